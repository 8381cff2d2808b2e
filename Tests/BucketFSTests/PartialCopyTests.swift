@testable import BucketFS
import Foundation
import TestSupport
import StorageCore
import Synchronization
import Testing

/// A partial copy filled around blocks that reads fetched first: every block arrives once, the
/// copy completes, and its bytes are the object's.
@Suite struct PartialCopyTests {
  @Test func theFillerFetchesAroundHolesAndCompletes() async throws {
    let client = MemoryObjectClient()
    let size = 20 * Int(PartialCopy.fetchSize) / 4 + 12_345  // five filler runs and a short block
    let data = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 9) })
    client.put("obj", data)
    let metadata = try await client.metadata(of: "obj")
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("partial-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: folder) }
    let ended = Mutex<Bool?>(nil)
    let onEnd: @Sendable (PartialCopy, Bool) -> Void = { _, filled in ended.withLock { $0 = filled } }
    let made = PartialCopy(
      name: "obj", metadata: metadata, path: folder.appendingPathComponent("obj.part").path, client: client,
      writer: StagingWriter(), log: { _ in }, onEnd: onEnd)
    let copy = try #require(made)
    // Reads at scattered places first: present blocks in the middle of what each filler run
    // would cover.
    let block = Int(PartialCopy.blockSize)
    for index in [3, 70, 71, 140, 200, 260, 300] where (index + 1) * block <= size {
      try await copy.wait(offset: Int64(index * block), end: Int64(index * block + 10))
    }
    let readsBefore = client.reads.load(ordering: .relaxed)
    copy.startFilling()
    _ = await eventually(timeout: .seconds(5)) { ended.withLock { $0 } != nil }
    #expect(ended.withLock { $0 } == true, "the copy did not complete")
    #expect(copy.holds(offset: 0, end: Int64(size)))
    let fd = open(copy.path, O_RDONLY)
    defer { close(fd) }
    var back = Data(count: size)
    let ok = back.withUnsafeMutableBytes { BlockChecksums.readFully(fd, into: $0, at: 0) }
    #expect(ok && back == data)
    // The filler asked only for what was missing: one GET per gap between the read blocks,
    // at most one per filler run.
    #expect(client.reads.load(ordering: .relaxed) - readsBefore <= 7 + size / Int(PartialCopy.fetchSize) + 1)
  }
}
