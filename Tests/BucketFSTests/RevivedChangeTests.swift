@testable import BucketFS
import Foundation
import StorageCore
import Testing

/// An upload replaced by a newer one waits again when the newer one's bytes did not outlast a
/// crash. Based on what the change before it left (`.previous`), which was carried out: the
/// record that named that generation may be lost while the newer one's, which took the same
/// base, lasted. A crash state of the whole-mount replay (seen once, under load): the revived
/// upload had no generation to go onto and went beside the object as a conflict copy that no
/// writer made.
@Suite struct RevivedChangeTests {
  /// The records as a mount of an earlier version wrote them (a file each: read into the log
  /// at the load), with `missing` upload bytes left out.
  func load(_ records: [PendingChange], missing: Set<UInt64>) throws -> [PendingChange] {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("revived-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: dir) }
    for change in records {
      try JSONEncoder().encode(change).write(to: dir.appendingPathComponent(change.fileName + ".json"))
      if change.kind == .upload, !missing.contains(change.sequence) {
        try Data(repeating: 0x61, count: Int(change.dataSize ?? 0)).write(to: dir.appendingPathComponent(change.fileName + ".data"))
      }
    }
    return try ChangeJournal(folder: dir, log: { _ in }).load().changes
  }

  func upload(_ sequence: UInt64, base: PendingChange.Base, size: Int64) -> PendingChange {
    var change = PendingChange(sequence: sequence, kind: .upload, name: "f", base: base, contentType: "text/plain")
    change.dataSize = size
    var crc = CRC32C()
    Data(repeating: 0x61, count: Int(size)).withUnsafeBytes { crc.update($0) }
    change.dataCRC32C = crc.value
    return change
  }

  @Test func aRevivedUploadGoesOntoWhatTheOneThatReplacedItWasBasedOn() throws {
    var replaced = upload(2, base: .previous, size: 0)
    replaced.life = .replaced(by: 3)
    let loaded = try load([replaced, upload(3, base: .generation(5), size: 3)], missing: [3])
    #expect(loaded.map(\.sequence) == [2])
    #expect(loaded.first?.life == .pending)
    #expect(loaded.first?.base == .generation(5))
  }

  /// While the change before it is still queued, what it leaves is still to come.
  @Test func withTheChangeBeforeItQueuedItStaysOnWhatThatLeaves() throws {
    var replaced = upload(2, base: .previous, size: 0)
    replaced.life = .replaced(by: 3)
    let loaded = try load([upload(1, base: .generation(4), size: 1), replaced, upload(3, base: .generation(5), size: 3)], missing: [3])
    #expect(loaded.map(\.sequence) == [1, 2])
    #expect(loaded.last?.base == .previous)
  }
}
