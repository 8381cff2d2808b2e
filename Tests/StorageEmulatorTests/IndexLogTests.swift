import Foundation
import Testing

@testable import StorageEmulator

/// The store's index log: a restart reads it instead of every side file, and a log that is
/// missing, cut short or out of step with the side files is made again from them.
@Suite struct IndexLogTests {
  func put(_ store: ObjectStore, _ name: String, _ bytes: String = "x") throws -> ObjectRecord {
    let (path, fd) = store.temporaryFile()
    _ = Array(bytes.utf8).withUnsafeBytes { writeAll(fd, $0) }
    close(fd)
    let hashes = ObjectHashes()
    Array(bytes.utf8).withUnsafeBytes { hashes.update($0) }
    return try store.commit(
      bucket: "bk", name: name, temporaryPath: path, size: Int64(bytes.utf8.count), hashes: hashes, metadata: ["metadata": ["k": "v"]])
  }

  func names(_ store: ObjectStore) -> [String] {
    store.list(bucket: "bk", prefix: "", delimiter: nil, pageToken: nil, maxResults: 1000).items.map(\.name)
  }

  func scratch() -> URL { FileManager.default.temporaryDirectory.appendingPathComponent("emu-index-\(UUID().uuidString)") }

  @Test func aRestartFindsWhatWasWrittenAndNotWhatWasDeleted() throws {
    let root = scratch()
    defer { try? FileManager.default.removeItem(at: root) }
    let first = try ObjectStore(root: root)
    // Names with a tab, spaces, non-ASCII and the folder separator: the log keeps them whole.
    let odd = ["a\tb", "dir/sub/x y.txt", "café", "z"]
    for name in odd { _ = try put(first, name) }
    let replaced = try put(first, "z", "newer bytes")
    #expect(first.delete("bk", "café"))
    let second = try ObjectStore(root: root)
    #expect(names(second) == ["a\tb", "dir/sub/x y.txt", "z"])
    let z = try #require(second.get("bk", "z"))
    #expect(z.generation == replaced.generation && z.size == 11 && z.metadata == ["k": "v"])
    #expect(second.get("bk", "café") == nil)
    // A new upload after the restart goes on in the same log.
    _ = try put(second, "later")
    #expect(names(try ObjectStore(root: root)) == ["a\tb", "dir/sub/x y.txt", "later", "z"])
  }

  @Test(arguments: ["missing", "cut short", "out of step"])
  func aLogThatCannotBeTrustedIsMadeAgainFromTheSideFiles(damage: String) throws {
    let root = scratch()
    defer { try? FileManager.default.removeItem(at: root) }
    let store = try ObjectStore(root: root)
    for i in 0..<20 { _ = try put(store, "f\(i)") }
    let log = store.bucketFolder("bk").appendingPathComponent(IndexLog.fileName).path
    switch damage {
    case "missing":
      unlink(log)
    case "cut short":
      let fd = open(log, O_WRONLY | O_APPEND)
      _ = Array("+123\tpartial-line-with".utf8).withUnsafeBytes { writeAll(fd, $0) }
      close(fd)
    default:
      // A side file the log does not know (as a crash between the two would leave).
      let fd = open(log, O_WRONLY | O_APPEND)
      _ = Array("-\tf3\n".utf8).withUnsafeBytes { writeAll(fd, $0) }
      close(fd)
    }
    let again = try ObjectStore(root: root)
    #expect(Set(names(again)) == Set((0..<20).map { "f\($0)" }))
    // The log was written again: the next start trusts it.
    #expect(IndexLog.replay(folder: again.bucketFolder("bk"))?.generations.count == 20)
  }

  @Test func listingReadsRecordsWrittenSinceItsCacheFilled() throws {
    let root = scratch()
    defer { try? FileManager.default.removeItem(at: root) }
    let store = try ObjectStore(root: root)
    _ = try put(store, "a", "one")
    #expect(store.get("bk", "a")?.size == 3)
    let newer = try #require(store.get("bk", "a"))
    _ = store.updateMetadata(newer, with: ["contentType": "text/plain"])
    #expect(store.list(bucket: "bk", prefix: "", delimiter: nil, pageToken: nil, maxResults: 10).items.first?.contentType == "text/plain")
    _ = try put(store, "a", "three")
    #expect(store.get("bk", "a")?.size == 5)
  }
}
