import Foundation
import Testing

@testable import StorageEmulator

/// Writing an object must not cost more as the bucket grows (an upload once copied the whole
/// bucket index: 1 ms empty, 12 ms at 25,000 objects).
@Suite struct StoreScalingTests {
  func commit(_ store: ObjectStore, _ name: String) throws -> Double {
    let (path, fd) = store.temporaryFile()
    close(fd)
    let start = ContinuousClock.now
    _ = try store.commit(bucket: "bk", name: name, temporaryPath: path, size: 0, hashes: ObjectHashes(), metadata: [:])
    return (ContinuousClock.now - start).seconds
  }

  @Test func uploadCostDoesNotGrowWithTheBucket() async throws {
    try await offPool { try self.uploadCostDoesNotGrowWithTheBucketBlocking() }
  }

  /// Uploads to an empty bucket and to one of 100,000 objects, alternating, so that both see the
  /// same machine load; their medians are compared.
  func uploadCostDoesNotGrowWithTheBucketBlocking() throws {
    let base = FileManager.default.temporaryDirectory.appendingPathComponent("emu-scale-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: base) }
    let empty = try ObjectStore(root: base.appendingPathComponent("empty"))
    let full = try ObjectStore(root: base.appendingPathComponent("full"))
    // Fill the index directly (the cost under test is the index's, not the disk's).
    let filler = ObjectRecord(
      name: "", bucket: "bk", generation: 1, metageneration: 1, size: 0, contentType: "x", md5Hash: "", crc32c: "",
      timeCreated: 0, updated: 0, metadata: [:], downloadTokens: [], dataFile: "none")
    full.index((0..<100_000).map { i in
      var r = filler
      r.name = "fill/\(String(format: "%06d", i))"
      return r
    })
    var emptyTimes: [Double] = []
    var fullTimes: [Double] = []
    for i in 0..<300 {
      emptyTimes.append(try commit(empty, "new/\(i)"))
      fullTimes.append(try commit(full, "new/\(i)"))
    }
    let e = emptyTimes.sorted()[150]
    let f = fullTimes.sorted()[150]
    #expect(f <= max(e * 2, e + 0.0005), "median upload: \(e * 1000) ms empty, \(f * 1000) ms at 100,000 objects")
  }
}
