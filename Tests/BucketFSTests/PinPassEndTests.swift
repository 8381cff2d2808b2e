@testable import BucketFS
import Foundation
import StorageCore
import Synchronization
import Testing

/// Issue 55 F1/F4: when a pin pass may record what it found. A rename through the mount queues
/// its moves (which may land) before the pins follow it, and a pass over the old name that read
/// the queue or the bucket in between took every moved name as gone: it recorded an empty tree
/// and removed the copies the rename was to carry (offline, 30-261 of 300 files missing). And a
/// pass still running at the unmount went on recording and removing copies while the process
/// exited (and freed heap then: a crash at exit). Both made exact here.
@Suite struct PinPassEndTests {
  private func setUp(_ api: String) throws -> (URL, MemoryObjectClient, StagingArea) {
    let root = URL(fileURLWithPath: "/tmp").appendingPathComponent("bucketfs-passend-\(UUID().uuidString.prefix(8))")
    let client = MemoryObjectClient()
    client.listsWithAttributes.store(api == "gcs", ordering: .relaxed)
    for i in 1...3 { client.put("p/f\(i)", Data("file \(i)".utf8)) }
    let staging = try StagingArea(folder: root, bucket: client.bucket, sizeLimit: 1 << 30, maxFile: 1 << 30, log: { _ in })
    return (root, client, staging)
  }

  /// `mv p q`: the moves are queued and one lands, then a pass over `p/` runs (a landing or the
  /// interval asked for it), then the pin follows. The pass records nothing; the pin of `q/`
  /// keeps all three copies, carried, nothing fetched.
  @Test(arguments: ["gcs", "firebase"]) func aPassDuringARenameRecordsNothing(api: String) async throws {
    let (root, client, staging) = try setUp(api)
    let pending = QueuedChanges()
    defer { try? FileManager.default.removeItem(at: root) }
    let keeper = pending.keeper(staging: staging, client: client)
    keeper.pin("p/")
    #expect(await keeper.eventually { keeper.isKept("p/", files: 3) })
    #expect(await keeper.passesEnded(within: 20))
    let fetched = keeper.passTotals.fetched
    let generations = Dictionary(uniqueKeysWithValues: try (1...3).map { i in (i, try #require(keeper.pin(for: "p/")?.tree[ObjectName("p/f\(i)")]).generation) })

    let renaming = keeper.renameStarting(from: "p/", to: "q/")
    pending.names.withLock { q in for i in 1...3 { q["q/f\(i)"] = .version; q["p/f\(i)"] = .deleted } }
    _ = try await client.copy("p/f1", generation: generations[1]!, to: "q/f1", ifGenerationMatch: nil)
    try await client.delete("p/f1", ifGenerationMatch: nil)
    pending.names.withLock { q in q["q/f1"] = nil; q["p/f1"] = nil }
    keeper.refresh(overlapping: "p/")
    #expect(await keeper.passesEnded(within: 20))
    let old = try #require(keeper.pin(for: "p/"))
    #expect(old.files.count == 3, "the pass recorded the old names gone: \(old.files.map(\.name))")
    for i in 1...3 {
      let m = try #require(old.tree[ObjectName("p/f\(i)")])
      #expect(staging.status("p/f\(i)", generation: m.generation, size: m.size).isComplete, "p/f\(i)'s copy was removed")
    }

    keeper.renamed(from: "p/", to: "q/")
    keeper.renameEnded(renaming)
    for i in 2...3 {
      _ = try await client.copy("p/f\(i)", generation: generations[i]!, to: "q/f\(i)", ifGenerationMatch: nil)
      try await client.delete("p/f\(i)", ifGenerationMatch: nil)
    }
    pending.names.withLock { $0 = [:] }
    keeper.refresh(overlapping: "q/")
    #expect(await keeper.passesEnded(within: 20))
    #expect(keeper.isKept("q/", files: 3), "\(String(describing: keeper.pin(for: "q/")))")
    #expect(keeper.pin(for: "p/") == nil)
    #expect(keeper.passTotals.fetched == fetched, "the carried copies were fetched again")
  }

  /// A pass listed (f3 deleted meanwhile, a new file to fetch) and is fetching when the mount
  /// ends: after `stop` it records nothing and removes nothing, and `passesEnded` returns once
  /// it gave up. Before, it went on: recorded the new tree and removed f3's copy as the process
  /// exited.
  @Test(arguments: ["gcs", "firebase"]) func aPassOutlivingTheStopRecordsAndRemovesNothing(api: String) async throws {
    let (root, client, staging) = try setUp(api)
    defer { try? FileManager.default.removeItem(at: root) }
    let keeper = PinKeeper(staging: staging, client: client, online: true, log: { _ in })
    keeper.pin("p/")
    #expect(await keeper.eventually { keeper.isKept("p/", files: 3) })
    let f3 = try #require(keeper.pin(for: "p/")?.tree[ObjectName("p/f3")])

    try await client.delete("p/f3", ifGenerationMatch: nil)
    client.put("p/new", Data("new".utf8))
    client.holdReads()
    keeper.refresh(overlapping: "p/", verify: true)
    #expect(await keeper.eventually { if case .staging = keeper.pin(for: "p/")?.phase { true } else { false } })
    keeper.stop()
    #expect(await keeper.passesEnded(within: 0.2) == false, "the pass is held in its fetch")
    client.letReadsGo()
    #expect(await keeper.passesEnded(within: 20))
    #expect(staging.status("p/f3", generation: f3.generation, size: f3.size).isComplete, "a pass after the stop removed f3's copy")

    let offlineStaging = try StagingArea(folder: root, bucket: client.bucket, sizeLimit: 1 << 30, maxFile: 1 << 30, log: { _ in })
    let offline = PinKeeper(staging: offlineStaging, client: client, online: false, log: { _ in })
    let recorded = try #require(offline.pin(for: "p/"))
    #expect(recorded.files.map(\.name) == ["p/f1", "p/f2", "p/f3"], "a pass after the stop recorded its tree")
  }
}
