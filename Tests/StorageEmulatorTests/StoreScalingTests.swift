import Foundation
import Testing

@testable import StorageEmulator

/// Writing an object must not cost more as the bucket grows (an upload once copied the whole
/// bucket index: 1 ms empty, 12 ms at 25,000 objects).
@Suite struct StoreScalingTests {
  func commitTime(_ store: ObjectStore, names: [String]) throws -> Double {
    var times: [Double] = []
    for name in names {
      let (path, fd) = store.temporaryFile()
      close(fd)
      let start = ContinuousClock.now
      _ = try store.commit(bucket: "bk", name: name, temporaryPath: path, size: 0, hashes: ObjectHashes(), metadata: [:])
      times.append((ContinuousClock.now - start).seconds)
    }
    return times.sorted()[times.count / 2]
  }

  @Test func uploadCostDoesNotGrowWithTheBucket() async throws {
    try await offPool { try self.uploadCostDoesNotGrowWithTheBucketBlocking() }
  }

  func uploadCostDoesNotGrowWithTheBucketBlocking() throws {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("emu-scale-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: root) }
    let store = try ObjectStore(root: root)
    let empty = try commitTime(store, names: (0..<200).map { "empty/\($0)" })
    // Fill the index directly (the cost under test is the index's, not the disk's).
    let filler = ObjectRecord(
      name: "", bucket: "bk", generation: 1, metageneration: 1, size: 0, contentType: "x", md5Hash: "", crc32c: "",
      timeCreated: 0, updated: 0, metadata: [:], downloadTokens: [], dataFile: "none")
    store.index((0..<100_000).map { i in
      var r = filler
      r.name = "fill/\(String(format: "%06d", i))"
      return r
    })
    let full = try commitTime(store, names: (0..<200).map { "full/\($0)" })
    #expect(full <= max(empty * 2, empty + 0.0005), "median upload: \(empty * 1000) ms empty, \(full * 1000) ms at 100,000 objects")
  }
}
