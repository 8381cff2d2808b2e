@testable import BucketFS
import Foundation
import StorageCore
import Testing

/// Issue 55: a pinned folder renamed through the mount, synced and unmounted at once left a file
/// unreadable offline. When a move lands, the keeper (`PinKeeper.noticed`) and a pass listing
/// the new generation both adopt the kept copy for it, at once. Each wrote the copy's side file
/// through one temporary name per process (`PrivateFile.write`): the second unlinked the first's
/// temporary file, the first renamed the second's into place, and the second, its own gone,
/// failed and removed the data file the first had installed. The index still said complete
/// (online, nothing was fetched again); the next mount found a side file without data and
/// dropped it, and the pin's tree named a version no copy held.
@Suite struct ConcurrentAdoptionTests {
  @Test func twoAdoptionsOfOneVersionAtOnceLeaveItsCopy() async throws {
    let root = URL(fileURLWithPath: "/tmp").appendingPathComponent("bucketfs-adopt2-\(UUID().uuidString.prefix(8))")
    defer { try? FileManager.default.removeItem(at: root) }
    let client = MemoryObjectClient()
    let names = (0..<200).map { "q/f\($0)" }
    for name in names { client.put(name, Data("bytes of \(name)".utf8)) }
    let staging = try StagingArea(folder: root, bucket: client.bucket, sizeLimit: 1 << 30, maxFile: 1 << 30, log: { _ in })
    var moved: [String: StorageMetadata] = [:]
    for name in names {
      let m = try await client.metadata(of: name)
      #expect(await staging.stagePinned(name, metadata: m, client: client) == nil)
      // The same bytes under the generation a move gave them.
      var next = m
      next.generation = m.generation + 1000
      moved[name] = next
    }
    // Two adopters of each name, on threads of their own, started together.
    let moves = moved
    let results = await withTaskGroup(of: [Bool].self) { group -> [Bool] in
      for _ in 0..<2 {
        group.addTask {
          await withCheckedContinuation { (done: CheckedContinuation<[Bool], Never>) in
            Thread {
              done.resume(returning: names.map { staging.adopt($0, metadata: moves[$0]!, from: $0, generation: moves[$0]!.generation - 1000) })
            }.start()
          }
        }
      }
      var all: [Bool] = []
      for await r in group { all += r }
      return all
    }
    #expect(results.allSatisfy { $0 })
    // As the next mount finds them on disk.
    let reloaded = try StagingArea(folder: root, bucket: client.bucket, sizeLimit: 1 << 30, maxFile: 1 << 30, log: { _ in })
    let lost = names.filter { !reloaded.status($0, generation: moves[$0]!.generation, size: moves[$0]!.size).isComplete }
    #expect(lost.isEmpty, "\(lost.count) of \(names.count) adopted copies lost: \(lost.prefix(5))")
  }
}
