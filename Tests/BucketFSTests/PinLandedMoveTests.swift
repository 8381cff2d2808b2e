@testable import BucketFS
import Foundation
import StorageCore
import Synchronization
import Testing

/// Issue 55 F3: a pinned folder renamed through a writable Firebase mount, the daemon killed
/// 0.1-3 s later, remounted and synced: offline 1-5 of 60 files read EIO, the pin "kept 55/60",
/// "the object changed on the server (generation A → B)", and no pass but a verifying one (a
/// day later) mended it. Over v0 the server makes a new generation of each moved file. The
/// killed daemon's tree learned it (`noticed`, the copy adopted) and a pass then removed the old
/// generation's copy, while the record still named the old generation (it is written at the next
/// pass or at the unmount). The next mount's pass took the recorded generation as current (a v0
/// listing has names only), fetched it, failed, and removed the new generation's copy as kept by
/// no pin. Both halves made exact here, with the in-memory client's v0 listing.
@Suite struct PinLandedMoveTests {
  private func setUp() throws -> (URL, MemoryObjectClient, StagingArea) {
    let root = URL(fileURLWithPath: "/tmp").appendingPathComponent("bucketfs-landed-\(UUID().uuidString.prefix(8))")
    let client = MemoryObjectClient()
    client.listsWithAttributes.store(false, ordering: .relaxed)
    for i in 1...3 { client.put("p/f\(i)", Data("file \(i)".utf8)) }
    let staging = try StagingArea(folder: root, bucket: client.bucket, sizeLimit: 1 << 30, maxFile: 1 << 30, log: { _ in })
    return (root, client, staging)
  }

  /// A move lands (the keeper adopts the copy for the new generation) after a pass recorded the
  /// pin and before it removes the copies no pin keeps; the daemon is then killed (no `stop`).
  /// The record on disk names a version whose copy is there, for every file. Before, it named
  /// the old generation, whose copy the pass had just removed.
  @Test func aMoveLandingAsAPassEndsIsRecordedBeforeTheOldCopyGoes() async throws {
    let (root, client, staging) = try setUp()
    defer { try? FileManager.default.removeItem(at: root) }
    let pending = QueuedChanges()
    let keeper = pending.keeper(staging: staging, client: client)
    keeper.pin("p/")
    #expect(await keeper.eventually { keeper.isKept("p/", files: 3) })
    #expect(await keeper.passesEnded(within: 20))

    // `mv p q`: the moves are queued; the pin follows, its copies carried.
    pending.names.withLock { q in for i in 1...3 { q["q/f\(i)"] = .version; q["p/f\(i)"] = .deleted } }
    let renaming = keeper.renameStarting(from: "p/", to: "q/")
    keeper.renamed(from: "p/", to: "q/")
    keeper.renameEnded(renaming)
    #expect(await keeper.eventually { keeper.isKept("q/", files: 3) })
    #expect(await keeper.passesEnded(within: 20))

    // Every move lands on the server (new generations of the same bytes); the keeper hears of
    // q/f1's only as the next pass ends.
    var moved: [Int: StorageMetadata] = [:]
    for i in 1...3 {
      let source = try await client.metadata(of: "p/f\(i)")
      moved[i] = try await client.copy("p/f\(i)", generation: source.generation, to: "q/f\(i)", ifGenerationMatch: nil)
      try await client.delete("p/f\(i)", ifGenerationMatch: nil)
    }
    pending.names.withLock { $0 = [:] }
    // Something to stage, so that the pass records and removes what no pin keeps.
    client.put("q/new", Data("new file".utf8))
    let landed = moved[1]!
    keeper.whileEnding.set { _ in keeper.noticed("q/f1", landed) }
    keeper.refresh(overlapping: "q/")
    #expect(await keeper.eventually { keeper.pin(for: "q/")?.tree[ObjectName("q/new")] != nil })
    #expect(await keeper.passesEnded(within: 20))
    keeper.whileEnding.set { _ in }
    #expect(keeper.pin(for: "q/")?.tree[ObjectName("q/f1")]?.generation == landed.generation)

    // As `kill -9` leaves it (no `stop`): what the next mount finds on disk.
    let again = try StagingArea(folder: root, bucket: client.bucket, sizeLimit: 1 << 30, maxFile: 1 << 30, log: { _ in })
    let offline = PinKeeper(staging: again, client: client, online: false, log: { _ in })
    let recorded = try #require(offline.pin(for: "q/"))
    #expect(recorded.files.map(\.name) == ["q/f1", "q/f2", "q/f3", "q/new"])
    for (name, m) in recorded.files {
      #expect(again.status(name, generation: m.generation, size: m.size).isComplete, "\(name) at \(m.generation): no copy, unreadable offline")
    }
  }

  /// The state the kill left: the record names a generation the server no longer has, and the
  /// staging folder holds the copy of the new one (same bytes). A regular pass (not verifying)
  /// asks that name's metadata, keeps the new copy and fetches nothing. Before, it fetched the
  /// recorded generation ("the object changed on the server"), removed the new copy, and every
  /// later pass did the same until a verifying one.
  @Test func aPassAsksTheNamesWhoseRecordedGenerationHasNoCopy() async throws {
    let (root, client, staging) = try setUp()
    defer { try? FileManager.default.removeItem(at: root) }
    let recorded: Pin
    do {
      let keeper = PinKeeper(staging: staging, client: client, online: true, log: { _ in })
      keeper.pin("p/")
      #expect(await keeper.eventually { keeper.isKept("p/", files: 3) })
      #expect(await keeper.passesEnded(within: 20))
      recorded = try #require(keeper.pin(for: "p/"))
      keeper.stop()
    }
    // f1 written again with the same bytes (as a landed move is): a new generation. The copy of
    // the new generation is made from the old one, and the old one goes, as in the killed daemon.
    let old = try #require(recorded.tree[ObjectName("p/f1")])
    client.put("p/f1", Data("file 1".utf8))
    let new = try await client.metadata(of: "p/f1")
    #expect(new.generation > old.generation)
    #expect(staging.adopt("p/f1", metadata: new, from: "p/f1", generation: old.generation))
    staging.setPinned([])
    staging.removeUnused("p/f1", generation: old.generation)
    #expect(!staging.status("p/f1", generation: old.generation, size: old.size).isComplete)

    let again = try StagingArea(folder: root, bucket: client.bucket, sizeLimit: 1 << 30, maxFile: 1 << 30, log: { _ in })
    let keeper = PinKeeper(staging: again, client: client, online: true, log: { _ in })
    #expect(keeper.pin(for: "p/")?.tree[ObjectName("p/f1")]?.generation == old.generation)
    keeper.refresh(overlapping: "")
    #expect(await keeper.eventually { keeper.passTotals.passes >= 1 })
    #expect(await keeper.passesEnded(within: 20))
    let pin = try #require(keeper.pin(for: "p/"))
    #expect(pin.failures.isEmpty, "\(pin.failures)")
    #expect(pin.tree[ObjectName("p/f1")]?.generation == new.generation)
    #expect(keeper.isKept("p/", files: 3))
    #expect(keeper.passTotals.lastFetched == 0, "the pass fetched \(keeper.passTotals.lastFetched) objects")
    #expect(again.status("p/f1", generation: new.generation, size: new.size).isComplete, "the new generation's copy was removed")
    keeper.stop()
  }
}
