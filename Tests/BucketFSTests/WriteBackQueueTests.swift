@testable import BucketFS
import Foundation
import StorageCore
import Synchronization
import TestSupport
import Testing

/// The write-back queue's rules without a kernel: the queue state as a value, the worker against
/// an in-memory bucket with GCS's generation preconditions, and the queue on a real folder.
@Suite struct QueueStateTests {
  func change(_ s: inout QueueState, _ kind: PendingChange.Kind, _ name: String, base: PendingChange.Base = .generation(0), size: Int64 = 0)
    -> (PendingChange, replaced: PendingChange?)
  {
    var c = PendingChange(sequence: s.reserveSequence(), kind: kind, name: name, base: base)
    let replaced = s.admit(&c)
    s.insert(c, size: size, readyAt: nil)
    if let replaced { s.remove(replaced.sequence) }
    return (c, replaced)
  }

  @Test func aWaitingUploadIsReplacedAndItsBaseTakenOver() {
    var s = QueueState()
    let (first, _) = change(&s, .upload, "a.txt", base: .generation(5), size: 10)
    let (second, replaced) = change(&s, .upload, "a.txt", base: .generation(0), size: 3)
    #expect(replaced?.sequence == first.sequence)
    #expect(second.base == .generation(5))
    #expect(s.waitState(first.sequence) == .follow(second.sequence))
    #expect(s.bytes == 3)
    #expect(s.takeNext(now: .now)?.sequence == second.sequence)
  }

  /// Bytes the kernel still writes, held under a name a rename moved them from: dropped, the
  /// rename's delete takes over their base; a crash that kept both records (the delete's
  /// rewritten, the held one's removal not) loads the delete alone, which deletes what the
  /// bucket holds under the old name. Loaded with both, the held bytes went up first and the
  /// delete then failed its precondition: the old name stayed.
  @Test func aHeldUploadDroppedByARenameStaysDroppedAfterACrash() {
    var s = QueueState()
    var held = PendingChange(sequence: s.reserveSequence(), kind: .upload, name: "d/part", base: .generation(5))
    s.stillWritten(held.sequence)
    _ = s.admit(&held)
    s.insert(held, size: 3, readyAt: nil)
    let (moved, _) = change(&s, .upload, "d/done", base: .generation(0), size: 3)
    // A rename's delete (an unlink's would take the held bytes' place at once).
    var delete = PendingChange(sequence: s.reserveSequence(), kind: .delete, name: "d/part", base: .generation(5))
    #expect(s.admit(&delete, dropsHeld: false) == nil)
    s.insert(delete, size: 0, readyAt: nil)
    #expect(delete.base == .previous, "a delete after held bytes waits for them")
    guard let (dropped, rebased) = s.dropWritten(held.sequence, movedInto: moved.sequence) else {
      Issue.record("the held upload was not dropped")
      return
    }
    #expect(dropped.sequence == held.sequence && rebased?.sequence == delete.sequence && rebased?.base == .generation(5))
    // The records a crash between the delete's rewrite and the held one's removal leaves.
    var next = QueueState()
    let (_, superseded) = next.load([held, moved, rebased!], sizes: [held.sequence: 3, moved.sequence: 3], damaged: 0)
    #expect(superseded.map(\.sequence) == [held.sequence])
    #expect(next.takeNext(now: .now)?.name == "d/done")
  }

  /// What `bucketfs sync` reads of the queue fits an extended attribute (64 KiB): 10,000 moves
  /// of a folder rename answered E2BIG. Failed changes come first; the rest are counted.
  @Test func theQueuesDescriptionFitsAnAttribute() {
    var s = QueueState()
    for i in 0..<10_000 { _ = change(&s, .delete, "a-folder-with-a-longer-name/file-\(i).txt") }
    var failed = PendingChange(sequence: s.reserveSequence(), kind: .upload, name: "refused.bin", base: .generation(0))
    _ = s.admit(&failed)
    failed.life = .failed("403: not allowed")
    s.insert(failed, size: 1, readyAt: nil)
    let text = s.describe(within: 60_000)
    #expect(text.utf8.count <= 60_000)
    let lines = text.split(separator: "\n")
    #expect(lines.first?.hasPrefix("upload\trefused.bin\tfailed") == true, "\(lines.first ?? "")")
    #expect(lines.last.map { $0.hasPrefix("…\t") && $0.contains("more changes") } == true, "\(lines.last ?? "")")
    let shown = lines.count - 2
    #expect(lines.last?.contains("\t\(10_000 - shown) more changes") == true, "\(shown) shown; \(lines.last ?? "")")
    #expect(s.describe().split(separator: "\n").count == 10_001)
  }

  /// Issue 56: a folder renamed object by object is a copy (a move) and a delete per object;
  /// the copies of other names pass the deletes before them, so many go at once (they went
  /// one at a time). A delete still waits for the copy before it, and an upload for a delete.
  @Test func aFolderRenamesMovesGoManyAtOnce() {
    var s = QueueState()
    var copies: [UInt64] = []
    for i in 0..<4 {
      var copy = PendingChange(sequence: s.reserveSequence(), kind: .copy, name: "dst/f\(i)", base: .generation(0))
      copy.source = PendingChange.Source(name: "src/f\(i)", generation: 7, size: 1)
      _ = s.admit(&copy)
      s.insert(copy, size: 0, readyAt: nil)
      copies.append(copy.sequence)
      _ = change(&s, .delete, "src/f\(i)", base: .generation(7))
    }
    var started: [UInt64] = []
    while let next = s.takeNext(now: .now) { started.append(next.sequence) }
    #expect(started == copies, "\(started)")
    // A copy into the folder a pending rename's delete empties, or an upload, waits.
    var s2 = QueueState()
    var copy = PendingChange(sequence: s2.reserveSequence(), kind: .copy, name: "dst/a", base: .generation(0))
    copy.source = PendingChange.Source(name: "src/a", generation: 7, size: 1)
    _ = s2.admit(&copy)
    s2.insert(copy, size: 0, readyAt: nil)
    _ = change(&s2, .delete, "src/a", base: .generation(7))
    var back = PendingChange(sequence: s2.reserveSequence(), kind: .copy, name: "src/a/x", base: .generation(0))
    back.source = PendingChange.Source(name: "other", generation: 3, size: 1)
    _ = s2.admit(&back)
    s2.insert(back, size: 0, readyAt: nil)
    let (upload, _) = change(&s2, .upload, "elsewhere")
    #expect(s2.takeNext(now: .now)?.sequence == copy.sequence)
    #expect(s2.takeNext(now: .now) == nil, "the copy under src/a and the upload \(upload.sequence) wait for src/a's delete")
  }

  @Test func aStartedUploadIsNotReplacedAndTheNextIsBasedOnIt() {
    var s = QueueState()
    let (first, _) = change(&s, .upload, "a.txt", base: .generation(5))
    #expect(s.takeNext(now: .now)?.sequence == first.sequence)
    let (second, replaced) = change(&s, .upload, "a.txt")
    #expect(replaced == nil)
    #expect(second.base == .previous)
    // One name's changes go in order: the second waits for the first.
    #expect(s.takeNext(now: .now) == nil)
    var done = s.changes[first.sequence]!
    done.life = .done(.generation(9))
    s.carriedOut(done)
    #expect(s.passOn(done)?.base == .generation(9))
    s.remove(first.sequence)
    #expect(s.waitState(first.sequence) == .ended(.applied))
    #expect(s.takeNext(now: .now)?.base == .generation(9))
  }

  @Test func aConflictSendsTheNextChangeBesideToo() {
    var s = QueueState()
    let (first, _) = change(&s, .upload, "a.txt", base: .generation(5))
    _ = s.takeNext(now: .now)
    let (second, _) = change(&s, .upload, "a.txt")
    var done = s.changes[first.sequence]!
    done.life = .done(.conflict("a.txt.conflict-x"))
    s.carriedOut(done)
    #expect(s.passOn(done) == nil)
    s.remove(first.sequence)
    #expect(s.waitState(first.sequence) == .ended(.conflict))
    #expect(s.conflicts == 1)
    #expect(s.changes[second.sequence]?.base == .previous)
    #expect(s.leftGeneration("a.txt") == nil)
    // A change based on what the queue left, made once nothing of the name is queued, is based
    // on that too.
    var later = PendingChange(sequence: s.reserveSequence(), kind: .delete, name: "b.txt", base: .previous)
    #expect(s.admit(&later) == nil)
    #expect(later.base == .previous)
  }

  func finish(_ s: inout QueueState, _ c: PendingChange, _ effect: PendingChange.Effect) {
    var done = s.changes[c.sequence]!
    done.life = .done(effect)
    s.carriedOut(done)
    _ = s.passOn(done)
    s.remove(c.sequence)
  }

  @Test func uploadsAndDeletesDoNotPassEachOther() {
    var s = QueueState()
    let (upload, _) = change(&s, .upload, "new.txt")
    let (other, _) = change(&s, .upload, "other.txt")
    let (delete, _) = change(&s, .delete, "old.txt", base: .generation(3))
    let (later, _) = change(&s, .upload, "later.txt")
    let (second, _) = change(&s, .delete, "old2.txt", base: .generation(4))
    // Uploads of different names go at once; the rename's delete waits for the uploads before
    // it, and the upload after the delete waits for it.
    #expect(s.takeNext(now: .now)?.sequence == upload.sequence)
    #expect(s.takeNext(now: .now)?.sequence == other.sequence)
    #expect(s.takeNext(now: .now) == nil)
    finish(&s, upload, .generation(1))
    #expect(s.takeNext(now: .now) == nil)
    finish(&s, other, .generation(2))
    #expect(s.takeNext(now: .now)?.sequence == delete.sequence)
    #expect(s.takeNext(now: .now) == nil)
    finish(&s, delete, .generation(0))
    #expect(s.takeNext(now: .now)?.sequence == later.sequence)
    #expect(s.takeNext(now: .now) == nil)
    finish(&s, later, .generation(5))
    #expect(s.takeNext(now: .now)?.sequence == second.sequence)
    #expect(s.applied == 4)
  }

  /// A folder's mode and times, set after its files (tar): a metadata change waits for its own
  /// name's changes only, so the uploads before and after it keep going.
  @Test func aMetadataChangeHoldsUpOnlyItsOwnName() {
    var s = QueueState()
    let (placeholder, _) = change(&s, .upload, "d/")
    let (file, _) = change(&s, .upload, "d/f.txt")
    let (mode, _) = change(&s, .metadata, "d/", base: .any)
    let (next, _) = change(&s, .upload, "e/g.txt")
    let (delete, _) = change(&s, .delete, "old.txt", base: .generation(3))
    #expect(s.takeNext(now: .now)?.sequence == placeholder.sequence)
    #expect(s.takeNext(now: .now)?.sequence == file.sequence)
    // Past the folder's metadata, which waits for its placeholder's upload.
    #expect(s.takeNext(now: .now)?.sequence == next.sequence)
    // A delete still waits for every upload before it.
    #expect(s.takeNext(now: .now) == nil)
    finish(&s, placeholder, .generation(1))
    #expect(s.takeNext(now: .now)?.sequence == mode.sequence)
    finish(&s, file, .generation(2))
    finish(&s, next, .generation(3))
    #expect(s.takeNext(now: .now)?.sequence == delete.sequence)
  }

  /// A rename where the server copies, after a chmod of the source: the copy waits for the
  /// chmod, or the server would copy the source without its new mode.
  @Test func aCopyWaitsForItsSourcesMetadata() {
    var s = QueueState()
    let (mode, _) = change(&s, .metadata, "a.tmp", base: .generation(4))
    var copy = PendingChange(sequence: s.reserveSequence(), kind: .copy, name: "a", base: .generation(0))
    copy.source = PendingChange.Source(name: "a.tmp", generation: 4, size: 1)
    _ = s.admit(&copy)
    s.insert(copy, size: 0, readyAt: nil)
    #expect(s.takeNext(now: .now)?.sequence == mode.sequence)
    #expect(s.takeNext(now: .now) == nil)
    finish(&s, mode, .generation(4))
    #expect(s.takeNext(now: .now)?.sequence == copy.sequence)
  }

  @Test func aNewUploadWaitsToSettle() {
    var s = QueueState()
    var c = PendingChange(sequence: s.reserveSequence(), kind: .upload, name: "a", base: .generation(0))
    _ = s.admit(&c)
    let start = ContinuousClock.now
    s.insert(c, size: 0, readyAt: start + .milliseconds(50))
    #expect(s.takeNext(now: start) == nil)
    #expect(s.nextSettled(after: start) == start + .milliseconds(50))
    // Past its time, a change that cannot start is not a time to wake at (it waits for a signal).
    #expect(s.nextSettled(after: start + .milliseconds(60)) == nil)
    #expect(s.takeNext(now: start + .milliseconds(50))?.sequence == c.sequence)
    #expect(s.nextSettled(after: start) == nil)
  }

  @Test func whatTheMountShowsOfQueuedNames() {
    var s = QueueState()
    _ = change(&s, .upload, "d/a.txt", size: 4)
    _ = change(&s, .upload, "d/sub/", size: 0)
    _ = change(&s, .upload, "d/deep/x", size: 0)
    _ = change(&s, .metadata, "d/only-metadata", base: .generation(2))
    _ = change(&s, .delete, "d/gone", base: .generation(2))
    #expect(s.names(in: "d/") == ["a.txt", "sub/", "deep/", "gone"])
    #expect(s.lastVisible("d/a.txt")?.size == 4)
    #expect(s.lastVisible("d/only-metadata") == nil)
    #expect(s.lastVisible("d/gone")?.change.kind == .delete)
    #expect(s.hasUploads(under: "d/deep/"))
    #expect(!s.hasUploads(under: "e/"))
    #expect(s.totals.changes == 5)
    // A spelling with other bytes that String takes for the same name.
    #expect(s.otherSpelling(of: "d/a.txt") == nil)
    _ = change(&s, .upload, "caf\u{E9}")
    #expect(s.otherSpelling(of: "cafe\u{301}") == "caf\u{E9}")
    #expect(s.lastVisible("cafe\u{301}") == nil)
  }

  @Test func aRefusedChangeStaysAndSaysWhy() {
    var s = QueueState()
    let (c, _) = change(&s, .upload, "bad")
    var taken = s.takeNext(now: .now)!
    taken.life = .failed("name refused")
    s.failed(taken)
    #expect(s.waitState(c.sequence) == .ended(.failed("name refused")))
    #expect(s.syncState("bad")! == ("failed", "name refused"))
    #expect(s.totals.failed == 1 && s.totals.changes == 0)
    #expect(s.describe() == "upload\tbad\tfailed\tname refused\n")
    #expect(s.takeNext(now: .now) == nil)
  }

  @Test func aChangeBlockedByTheServerSaysWhy() {
    var s = QueueState()
    let (c, _) = change(&s, .upload, "a")
    _ = s.takeNext(now: .now)
    s.putBack(c.sequence, reason: "connection refused")
    #expect(s.waitState(c.sequence) == .queued(blockedBy: "connection refused"))
    #expect(s.syncState("a")! == ("pending", "connection refused"))
    #expect(s.takeNext(now: .now)?.sequence == c.sequence)
    s.serverAnswered()
    #expect(s.waitState(c.sequence) == .queued(blockedBy: nil))
  }

  /// Records written before a change's life was one value read the same, and back.
  @Test func recordsKeepTheirFormat() throws {
    let old = #"{"sequence":7,"kind":"upload","name":"a","base":{"generation":{"_0":3}},"state":"done","produced":12}"#
    let done = try JSONDecoder().decode(PendingChange.self, from: Data(old.utf8))
    #expect(done.life == .done(.generation(12)))
    let conflict = #"{"sequence":8,"kind":"upload","name":"a","base":{"previous":{}},"state":"done","conflictName":"a.c"}"#
    #expect(try JSONDecoder().decode(PendingChange.self, from: Data(conflict.utf8)).life == .done(.conflict("a.c")))
    let failed = #"{"sequence":9,"kind":"delete","name":"a","base":{"any":{}},"state":"failed","error":"no"}"#
    #expect(try JSONDecoder().decode(PendingChange.self, from: Data(failed.utf8)).life == .failed("no"))
    let skipped = #"{"sequence":10,"kind":"delete","name":"a","base":{"any":{}},"state":"done"}"#
    #expect(try JSONDecoder().decode(PendingChange.self, from: Data(skipped.utf8)).life == .done(.unknown))
    for life: PendingChange.Life in [.pending, .started, .done(.generation(4)), .done(.unknown), .done(.conflict("x")), .failed("why")] {
      var c = PendingChange(sequence: 1, kind: .copy, name: "n", base: .previous)
      c.life = life
      #expect(try JSONDecoder().decode(PendingChange.self, from: JSONEncoder().encode(c)) == c)
    }
    let unknown = #"{"sequence":9,"kind":"delete","name":"a","base":{"any":{}},"state":"half-done"}"#
    #expect(throws: DecodingError.self) { try JSONDecoder().decode(PendingChange.self, from: Data(unknown.utf8)) }
  }
}

@Suite struct ChangeWorkerTests {
  let folder = FileManager.default.temporaryDirectory.appendingPathComponent("worker-\(UUID().uuidString)")

  func worker(_ client: MemoryObjectClient) -> ChangeWorker {
    let folder = self.folder
    return ChangeWorker(
      client: client, dataPath: { folder.appendingPathComponent($0.fileName + ".data").path },
      writeEmptyBytes: { change throws(FSError) in
        guard FileManager.default.createFile(atPath: folder.appendingPathComponent(change.fileName + ".data").path, contents: Data()) else {
          throw FSError(EIO)
        }
      }, sessionOpened: { _, _ in }, rebased: { _ throws(FSError) in }, log: { _ in })
  }

  func upload(_ name: String, _ bytes: String, sequence: UInt64) throws -> PendingChange {
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    let c = PendingChange(sequence: sequence, kind: .upload, name: name, base: .generation(0))
    try Data(bytes.utf8).write(to: folder.appendingPathComponent(c.fileName + ".data"))
    return c
  }

  @Test func anUploadGoesOnlyOnTheVersionItWasBasedOn() async throws {
    defer { try? FileManager.default.removeItem(at: folder) }
    let client = MemoryObjectClient()
    client.put("a.txt", Data("theirs".utf8))
    let theirs = try await client.metadata(of: "a.txt").generation
    let c = try upload("a.txt", "ours", sequence: 1)
    guard case .done(.conflict(let beside, _), let m, _) = await worker(client).carryOut(.init(change: c, precondition: .generation(theirs - 1))) else {
      Issue.record("not a conflict")
      return
    }
    #expect(beside.hasPrefix("a.txt.conflict-"))
    #expect(m?.customMetadata?["bucketfs-conflict-of"] == "a.txt")
    #expect(client.objects.withLock { $0["a.txt"]?.0 } == Data("theirs".utf8))
    #expect(client.objects.withLock { $0[beside]?.0 } == Data("ours".utf8))

    guard case .done(.generation(let g), _, _) = await worker(client).carryOut(.init(change: c, precondition: .generation(theirs))) else {
      Issue.record("not applied")
      return
    }
    #expect(client.objects.withLock { $0["a.txt"]?.1.generation } == g)
  }

  @Test func anUploadWhoseAnswerWasLostIsDoneWhenTheRetryFindsItsBytes() async throws {
    defer { try? FileManager.default.removeItem(at: folder) }
    let client = MemoryObjectClient()
    let c = try upload("b.txt", "bytes", sequence: 2)
    client.answersToLose.store(1, ordering: .relaxed)
    guard case .retryLater = await worker(client).carryOut(.init(change: c, precondition: .generation(0))) else {
      Issue.record("a lost answer is not final")
      return
    }
    // The retry's precondition fails on the version the first try made: done, not a conflict.
    let made = try await client.metadata(of: "b.txt").generation
    guard case .done(.generation(made), _, _) = await worker(client).carryOut(.init(change: c, precondition: .generation(0))) else {
      Issue.record("the retry took its own version for someone else's")
      return
    }
    #expect(client.objects.withLock { $0.keys.sorted() } == ["b.txt"])
  }

  /// A delete whose answer was lost, tried again on a server that checks the precondition
  /// before the object's existence (Firebase's v0: 412, not 404): done, not "changed", so the
  /// upload queued after it lands under the name instead of going beside as a conflict copy.
  @Test func aDeleteWhoseAnswerWasLostIsDoneWhenTheRetryFindsTheObjectGone() async throws {
    let client = MemoryObjectClient()
    client.preconditionFirst.store(true, ordering: .relaxed)
    client.put("d.txt", Data("v1".utf8))
    let generation = try await client.metadata(of: "d.txt").generation
    let delete = PendingChange(sequence: 4, kind: .delete, name: "d.txt", base: .generation(generation))
    client.answersToLose.store(1, ordering: .relaxed)
    guard case .retryLater = await worker(client).carryOut(.init(change: delete, precondition: .generation(generation))) else {
      Issue.record("a lost answer is not final")
      return
    }
    #expect(client.objects.withLock { $0["d.txt"] } == nil)
    guard case .done(.generation(0), _, nil) = await worker(client).carryOut(.init(change: delete, precondition: .generation(generation))) else {
      Issue.record("the retry took the delete's own effect for someone else's change")
      return
    }
  }

  @Test func aDeleteOfAMovedVersionIsNotApplied() async throws {
    let client = MemoryObjectClient()
    client.put("c.txt", Data("v1".utf8))
    client.put("c.txt", Data("v2".utf8))
    let delete = PendingChange(sequence: 3, kind: .delete, name: "c.txt", base: .generation(1))
    guard case .done(.unknown, nil, let skipped?) = await worker(client).carryOut(.init(change: delete, precondition: .generation(1))) else {
      Issue.record("a moved version was deleted")
      return
    }
    #expect(skipped == ChangeWorker.notApplied)
    #expect(client.objects.withLock { $0["c.txt"]?.0 } == Data("v2".utf8))
    // Gone already is what a delete wants.
    for _ in 0..<2 {
      guard case .done(.generation(0), _, _) = await worker(client).carryOut(.init(change: delete, precondition: .any)) else {
        Issue.record("a delete of whatever is there (or nothing) failed")
        return
      }
    }
    #expect(client.objects.withLock { $0["c.txt"] } == nil)
  }

  @Test func theServerAwayIsRetriedAndARefusalIsFinal() async throws {
    defer { try? FileManager.default.removeItem(at: folder) }
    let client = MemoryObjectClient()
    let c = try upload("d.txt", "x", sequence: 4)
    client.writesToRefuse.store(1, ordering: .relaxed)
    guard case .retryLater = await worker(client).carryOut(.init(change: c, precondition: .generation(0))) else {
      Issue.record("the server away is final")
      return
    }
    #expect(client.objects.withLock { $0["d.txt"] } == nil)
    for status in [400, 403] {
      guard case .refused = ChangeWorker.Verdict.of(BucketError(code: .unauthorized, object: "d", detail: "no", httpStatus: status)) else {
        Issue.record("\(status) is retried")
        continue
      }
    }
    for status in [429, 500, 503, 401] {
      let code: BucketError.Code = status == 401 ? .unauthenticated : .unknown
      guard case .retryLater = ChangeWorker.Verdict.of(BucketError(code: code, object: "d", detail: "busy", httpStatus: status)) else {
        Issue.record("\(status) is final")
        continue
      }
    }
  }

  @Test func aCopyWhoseSourceVersionIsGoneIsRefused() async throws {
    let client = MemoryObjectClient()
    let source = PendingChange.Source(name: "src", generation: 77, size: 1, crc32c: nil, md5Hash: nil)
    var copy = PendingChange(sequence: 5, kind: .copy, name: "dst", base: .generation(0))
    copy.source = source
    guard case .refused(let error) = await worker(client).carryOut(.init(change: copy, precondition: .generation(0))) else {
      Issue.record("a copy of nothing went")
      return
    }
    #expect(error.detail.contains("no longer in the bucket"))
  }

  @Test func aFolderWithoutAPlaceholderGetsOneWithItsKeys() async throws {
    defer { try? FileManager.default.removeItem(at: folder) }
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    let client = MemoryObjectClient()
    client.put("dir/file", Data("f".utf8))
    var c = PendingChange(sequence: 6, kind: .metadata, name: "dir/", base: .any)
    c.custom = ["goog-reserved-posix-mode": "750"]
    guard case .done(.generation, let m?, _) = await worker(client).carryOut(.init(change: c, precondition: .any)) else {
      Issue.record("no placeholder")
      return
    }
    #expect(m.customMetadata?["goog-reserved-posix-mode"] == "750")
    #expect(client.objects.withLock { $0["dir/"]?.0 } == Data())
    // And one that is there gets them, whatever its version.
    c.custom = ["goog-reserved-posix-mode": "700"]
    guard case .done(.generation, let again?, _) = await worker(client).carryOut(.init(change: c, precondition: .any)) else {
      Issue.record("an existing placeholder did not take the keys")
      return
    }
    #expect(again.customMetadata?["goog-reserved-posix-mode"] == "700")
  }
}

/// The queue on a real folder, its workers carrying changes out against the in-memory bucket.
@Suite struct WriteBackQueueTests {
  let folder = FileManager.default.temporaryDirectory.appendingPathComponent("queue-\(UUID().uuidString)")

  func file(_ text: String) throws -> FileDescriptor {
    let path = folder.appendingPathComponent("edit-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    try Data(text.utf8).write(to: URL(fileURLWithPath: path))
    let fd = open(path, O_RDONLY)
    #expect(fd >= 0)
    return FileDescriptor(fd)
  }

  @Test func changesWaitOnDiskAndGoInOrderOnceStarted() async throws {
    defer { try? FileManager.default.removeItem(at: folder) }
    let queueFolder = folder.appendingPathComponent("queue")
    let client = MemoryObjectClient()
    var sequences: [UInt64] = []
    do {
      let queue = try WriteBackQueue(folder: queueFolder, log: { _ in })
      let f = try file("first")
      sequences.append(try queue.upload("x.txt", from: f.fd, contentType: "text/plain", mtime: 1, base: .generation(0)))
      let g = try file("second")
      sequences.append(try queue.upload("y.txt", from: g.fd, contentType: "text/plain", mtime: 2, base: .generation(0)))
      sequences.append(try queue.delete("x.txt", base: .previous))
      // Not started: an offline queue says so and keeps the changes.
      #expect(await queue.wait(for: sequences[0], within: 5) == .waiting("the mount is offline"))
      #expect(queue.totals.changes == 3)
    }
    // A new queue on the same folder (a new mount) finds them and carries them out.
    let queue = try WriteBackQueue(folder: queueFolder, log: { _ in })
    #expect(queue.totals.changes == 3)
    let applied = Mutex<[UInt64]>([])
    queue.start(client: client) { change, _ in applied.withLock { $0.append(change.sequence) } }
    #expect(await queue.wait(for: sequences[2], within: 30) == .applied)
    #expect(await queue.wait(for: sequences[1], within: 30) == .applied)
    #expect(client.objects.withLock { $0["x.txt"] } == nil)
    #expect(client.objects.withLock { $0["y.txt"]?.0 } == Data("second".utf8))
    #expect(client.writes.withLock { $0 }.filter { $0.contains("x.txt") } == ["upload x.txt", "delete x.txt"])
    #expect(await queue.waitUntilEmpty(within: 30).changes == 0)
    #expect(applied.withLock { $0.sorted() } == sequences)
    let left = try FileManager.default.contentsOfDirectory(atPath: queueFolder.path).filter { $0.hasSuffix(".json") || $0.hasSuffix(".data") }
    #expect(left.isEmpty)
  }

  @Test func aWaitForAReplacedUploadFollowsItsReplacement() async throws {
    defer { try? FileManager.default.removeItem(at: folder) }
    let client = MemoryObjectClient()
    client.put("z.txt", Data("theirs".utf8))
    let queue = try WriteBackQueue(folder: folder.appendingPathComponent("queue"), log: { _ in })
    let base = try await client.metadata(of: "z.txt").generation
    let (one, two) = (try file("one"), try file("two"))
    let first = try queue.upload("z.txt", from: one.fd, contentType: "text/plain", mtime: 1, base: .generation(base))
    _ = try queue.upload("z.txt", from: two.fd, contentType: "text/plain", mtime: 2, base: .generation(0))
    queue.start(client: client) { _, _ in }
    #expect(await queue.wait(for: first, within: 30) == .applied)
    #expect(client.objects.withLock { $0["z.txt"]?.0 } == Data("two".utf8))
    #expect(client.writes.withLock { $0 } == ["upload z.txt"])
  }
  /// A change carried out between two group commits has its removal in the log and its bytes
  /// still there (they are unlinked once the removal lasts): a daemon killed then leaves them,
  /// and the next mount removes them as the queue's, not as damaged bytes without a record.
  @Test func bytesOfAChangeCarriedOutBeforeAKillAreNotDamage() async throws {
    defer { try? FileManager.default.removeItem(at: folder) }
    let queueFolder = folder.appendingPathComponent("queue")
    let client = MemoryObjectClient()
    let killed = try WriteBackQueue(folder: queueFolder, commit: 3600, log: { _ in })
    let f = try file("carried out")
    _ = try killed.upload("k.txt", from: f.fd, contentType: "text/plain", mtime: 1, base: .generation(0))
    try killed.commit()
    killed.start(client: client) { _, _ in }
    #expect(await killed.waitUntilEmpty(within: 30).changes == 0)
    let left = { try FileManager.default.contentsOfDirectory(atPath: queueFolder.path).filter { $0.hasSuffix(".data") } }
    #expect(try left().count == 1, "the bytes are unlinked at the next commit, which a kill never reaches")
    // The next mount, as after kill -9 (this one never commits again).
    let next = try WriteBackQueue(folder: queueFolder, log: { _ in })
    #expect(next.totals.damaged == 0 && next.totals.changes == 0)
    #expect(try left().isEmpty)
    #expect(client.writes.withLock { $0 } == ["upload k.txt"])
  }

  /// A chmod, utimensat or setxattr after a close goes with the upload that waits its turn: its
  /// record is rewritten (a new mount reads the new metadata), no change of its own is queued,
  /// and one upload carries the final metadata; a started upload is never amended.
  @Test func metadataSetAfterACloseGoesWithTheWaitingUpload() async throws {
    defer { try? FileManager.default.removeItem(at: folder) }
    let queueFolder = folder.appendingPathComponent("queue")
    let client = MemoryObjectClient()
    do {
      let queue = try WriteBackQueue(folder: queueFolder, commit: 3600, log: { _ in })
      let f = try file("bytes")
      _ = try queue.upload("m.txt", from: f.fd, contentType: "text/plain", mtime: 1, base: .generation(0))
      #expect(try queue.amend("m.txt", custom: ["goog-reserved-posix-mode": "600"], mtime: 1_612_325_106.5))
      #expect(try queue.amend("m.txt", contentType: "text/markdown", custom: ["color": "blue"]))
      #expect(try !queue.amend("other.txt", custom: ["color": "red"]), "no upload of that name waits")
      #expect(queue.totals.changes == 1)
      #expect(queue.view("m.txt")?.fileAttributes?.mtime == 1_612_325_106.5)
      try queue.commit()
    }
    let queue = try WriteBackQueue(folder: queueFolder, log: { _ in })
    #expect(queue.totals.changes == 1)
    #expect(queue.queuedMetadata("m.txt")?.contentType == "text/markdown")
    #expect(queue.queuedMetadata("m.txt")?.custom == ["goog-reserved-posix-mode": "600", "color": "blue"])
    queue.start(client: client) { _, _ in }
    #expect(await queue.waitUntilEmpty(within: 30).changes == 0)
    #expect(client.writes.withLock { $0 } == ["upload m.txt"])
    #expect(try !queue.amend("m.txt", custom: ["color": "green"]), "nothing of the name waits any more")
  }
}

/// The folder index answers what a walk of every queued name answered.
@Suite struct FolderIndexTests {
  /// Brute force: what `names(in:)` and `hasUploads(under:)` said before the index.
  func walk(_ names: [String: Bool], in dir: String) -> Set<String> {
    var out = Set<String>()
    for name in names.keys where name.hasPrefix(dir) {
      let rest = name.dropFirst(dir.count)
      guard let first = rest.split(separator: "/", omittingEmptySubsequences: false).first, !first.isEmpty else { continue }
      out.insert(rest.contains("/") ? String(first) + "/" : String(first))
    }
    return out
  }

  @Test func agreesWithAWalkOfEveryName() {
    var rng = SeededGenerator(seed: 44)
    let pool = ["a", "a/", "a/b", "a/b/c", "a/b/", "b", "b/x", "c/d/e/f", "a//b", "c/", "c/d/", "z"]
    var index = FolderIndex()
    var live: [String: Bool] = [:]
    for _ in 0..<2_000 {
      let name = pool.randomElement(using: &rng)!
      let shown = Bool.random(using: &rng)
      let uploading = shown && Bool.random(using: &rng)
      index.set(name, shown: shown, uploading: uploading)
      if shown { live[name] = uploading } else { live.removeValue(forKey: name) }
      for dir in ["", "a/", "a/b/", "b/", "c/", "c/d/", "c/d/e/", "a//"] {
        #expect(index.names(in: dir) == Set(walk(live, in: dir).map { ObjectName($0) }), "in \(dir.debugDescription): \(live)")
        let uploadsUnder = live.contains { $0.key.hasPrefix(dir) && $0.value }
        if !dir.isEmpty { #expect(index.hasUploads(under: dir) == uploadsUnder, "under \(dir): \(live)") }
      }
    }
  }
}
