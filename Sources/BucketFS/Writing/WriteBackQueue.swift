// The changes a writable mount has accepted and the bucket does not have yet, in the order they
// were made. A change is on disk (fsynced, its folder too) before the operation that made it
// returns, so it survives `kill -9` and a power loss; workers carry the changes out (each name's
// in order, `ChangeWorker`), so nothing is overwritten or deleted that the change did not see.
// While the server cannot be reached the changes wait; a new mount of the same bucket and staging
// folder picks them up. The rules live in `QueueState`, the records in `ChangeJournal`; this joins
// them under one lock and runs the workers, which sleep until `ChangeSignal` wakes them.
import Foundation
import StorageCore
import Synchronization

package final class WriteBackQueue: Sendable {
  typealias LocalView = QueueState.LocalView
  typealias Outcome = QueueState.Outcome

  let journal: ChangeJournal
  var folder: URL { journal.folder }
  var damaged: DamagedRecords { journal.damaged }
  private let state = Mutex(QueueState())
  /// Wakes the workers: a change queued (one of them), or one that ended (all: it may free more).
  private let work = ChangeSignal()
  /// Wakes the waits (fsync, `bucketfs sync`): a change ended, or the server failed it.
  private let changed = ChangeSignal()
  /// The mount is ending: waits for the queue are answered at once (`endWaits`).
  private let ending = Atomic<Bool>(false)

  /// The mount is ending (SIGTERM): whoever waits for the queue to empty is answered now.
  func endWaits() {
    ending.store(true, ordering: .releasing)
    changed.signal()
  }
  private let log: @Sendable (String) -> Void
  private let onApplied = Hook<@Sendable (PendingChange, StorageMetadata?) -> Void>()
  /// The fills of overlaid uploads' holes, by change: the edit's own while it runs, or one
  /// started here for a change an earlier mount queued.
  private let fills = Mutex<[UInt64: BaseFill]>([:])
  /// Where a base version's bytes come from (a staged copy, the bucket), set by the mount.
  private let baseFetch = Hook<BaseFill.Fetch>()
  /// The group commit's timer (nil: every close commits its own change).
  private let commitClock: CommitClock?

  /// `commit`: seconds between group commits (0: every close fsyncs its change before it returns).
  init(folder: URL, disk: any QueueDisk = SystemDisk(), commit: Double = 0, log: @escaping @Sendable (String) -> Void) throws {
    self.journal = try ChangeJournal(folder: folder, disk: disk, groupCommit: commit > 0, log: log)
    self.log = log
    commitClock = commit > 0 ? CommitClock() : nil
    let (changes, sizes) = try journal.load()
    let damaged = journal.damaged.count
    let (done, superseded) = state.withLock { $0.load(changes, sizes: sizes, damaged: damaged) }
    // Replaced uploads whose removal a power loss undid: the newer one goes in their place.
    for change in superseded { journal.remove(change, durably: true) }
    // Changes that were done when the last mount ended: their successors learn the generation.
    for change in done { passOn(change) }
    let count = state.withLock { $0.totals.changes + $0.totals.failed }
    if count > 0 { log("write-back: \(count) changes from an earlier mount are queued") }
    if commit > 0 { startCommits(every: commit) }
  }

  /// The group commit's clock: what closes put in place lasts within `seconds` (ext4's `commit=`).
  /// A timer on a queue of its own, not the task pool: a commit is a blocking fsync per file
  /// closed in the interval, which on one of the pool's threads (one per core) held back the
  /// FUSE replies and uploads waiting for that thread. It stops with the queue.
  private func startCommits(every seconds: Double) {
    guard let timer = commitClock?.timer else { return }
    let interval = DispatchTimeInterval.milliseconds(Int(seconds * 1000))
    timer.schedule(deadline: .now() + interval, repeating: interval)
    timer.setEventHandler { [weak self] in
      guard let self else { return }
      do throws(FSError) {
        try self.commit()
      } catch {
        self.log("write-back: the queue's group commit failed (errno \(error.errno)); tried again in \(seconds) s")
      }
    }
  }

  deinit { commitClock?.timer.cancel() }

  /// Makes every change queued so far last across a power loss (`fsync(2)`, `bucketfs sync`,
  /// an unmount); EIO when the disk would not.
  func commit() throws(FSError) {
    // Even with nothing noted since: a commit running now may hold the caller's files.
    try journal.groupCommit?.commit()
  }

  // MARK: making changes

  private func nextSequence() -> UInt64 { state.withLock { $0.reserveSequence() } }

  /// Queues the bytes of open file `fd` as the next version of `name`. `base` is what the change
  /// is based on when no earlier change of the name is queued (then it is the previous one's
  /// result). An upload of the name still waiting its turn is replaced: only the last bytes go.
  /// `linking`: the path of the open file `fd`, which becomes the queued bytes itself (a hard
  /// link, no copy); the caller must not change that file afterwards. `fill`: the file is an
  /// overlaid edit's (linked, never copied), whose holes that fill makes whole.
  /// `stillWritten`: the kernel is writing the linked file (`LocalEdits.Edit.Writers.kernel`):
  /// no worker takes the upload until `sealWritten` says what it holds.
  @discardableResult
  func upload(
    _ name: String, from fd: Int32, linking: String? = nil, written: (Int64) -> UInt32? = { _ in nil }, fill: BaseFill? = nil,
    stillWritten: Bool = false, contentType: String, mtime: Timestamp?, custom: [String: String]? = nil, base: PendingChange.Base,
    deleting: (name: String, base: PendingChange.Base)? = nil, appended: AppendedBytes? = nil, batch: QueueBatch? = nil
  ) throws(FSError) -> UInt64 {
    precondition(batch == nil || (fill == nil && !stillWritten), "a batch takes whole bytes only")
    let sequence = nextSequence()
    var change = PendingChange(sequence: sequence, kind: .upload, name: name, base: base, contentType: contentType, mtime: mtime, custom: custom)
    change.overlay = fill?.overlay
    let (size, crc) = try journal.takeBytes(
      from: fd, linking: linking, written: written, unfinished: fill != nil || stillWritten, for: change)
    change.dataSize = size
    change.dataCRC32C = crc
    if let fill { fills.withLock { $0[sequence] = fill } }
    if stillWritten { state.withLock { $0.stillWritten(sequence) } }
    do throws(FSError) {
      try add(&change, size: size, withBytes: true, held: stillWritten, deleting: deleting, appended: appended, batch: batch)
    } catch {
      fills.withLock { _ = $0.removeValue(forKey: sequence) }
      throw error
    }
    return sequence
  }

  /// Upload `sequence`, whose file the kernel still writes, with what a close of it gives now
  /// (its metadata, and the size the file has): its record rewritten, no new change. False when
  /// it is no such upload any more (replaced by an fsync's copy), and the caller queues anew.
  func rewriteWritten(_ sequence: UInt64, contentType: String, custom: [String: String]?, mtime: Timestamp?) throws(FSError) -> Bool {
    guard let current = state.withLock({ $0.written(sequence) }) else { return false }
    let size = try journal.currentBytes(of: current, checksum: false).size
    guard let rewritten = state.withLock({ $0.rewriteWritten(sequence, contentType: contentType, custom: custom, mtime: mtime, size: size) })
    else { return false }
    try journal.write(rewritten, committed: true)
    return true
  }

  /// Upload `sequence`, whose file the kernel still writes, renamed away: its bytes went under
  /// the new name as upload `movedInto` (`QueueState.dropWritten`), and it goes. The change
  /// that takes over its base is rewritten before its record goes: a crash between keeps both,
  /// and the next mount drops it (`QueueState.load`).
  func dropWritten(_ sequence: UInt64, movedInto: UInt64) {
    guard let (dropped, rebased) = state.withLock({ $0.dropWritten(sequence, movedInto: movedInto) }) else { return }
    if let rebased { _ = try? journal.write(rebased, committed: true) }
    _ = journal.removeReplaced(dropped)
    state.withLock { $0.remove(sequence) }
    changed.signal()
    work.signal()
  }

  /// The kernel has stopped writing upload `sequence`'s file (its last writer is gone): its
  /// record says what the file holds (size, CRC32C), with `metadata` when given (set since the
  /// close that queued it), and a worker may take it.
  func sealWritten(_ sequence: UInt64, metadata: (contentType: String, custom: [String: String]?, mtime: Timestamp)? = nil) {
    guard var change = state.withLock({ $0.written(sequence) }) else { return }
    if let metadata { (change.contentType, change.custom, change.mtime) = metadata }
    do throws(FSError) {
      let (size, crc) = try journal.currentBytes(of: change, checksum: true)
      change.dataSize = size
      change.dataCRC32C = crc
      try journal.write(change, committed: true)
    } catch {
      // Uploaded as the file is; only a later mount's check of the bytes goes without a CRC32C.
      log("write-back: cannot take the CRC32C of \(change.name.debugDescription) (errno \(error.errno)); it goes up as its file is")
    }
    state.withLock { $0.sealed(change) }
    work.signalOne()
  }

  /// Where the holes of overlaid uploads are filled from (the mount's staged copies and bucket).
  func fillBases(from fetch: @escaping BaseFill.Fetch) { baseFetch.set(fetch) }

  /// The fill of `change`'s holes: the edit's, or a new one over its queued file.
  private func fill(for change: PendingChange) throws(FSError) -> BaseFill {
    if let running = fills.withLock({ $0[change.sequence] }) { return running }
    guard let overlay = change.overlay else { throw FSError(EINVAL) }
    guard let fetch = baseFetch.value else { throw FSError(EIO) }
    let fd = journal.disk.open(journal.dataPath(change), O_RDWR | O_CLOEXEC, 0)
    guard fd >= 0 else { throw FSError(errno) }
    defer { journal.disk.close(fd) }
    let made = BaseFill(file: fd, overlay: overlay, disk: journal.disk, fetch: fetch)
    return fills.withLock { f in
      if let other = f[change.sequence] { return other }
      f[change.sequence] = made
      return made
    }
  }

  /// The fill of `name`'s last queued upload while its bytes are an overlay not yet whole.
  func overlaid(_ name: String) throws(FSError) -> BaseFill? {
    guard let (last, _) = state.withLock({ $0.lastVisible(name) }), last.kind == .upload, last.overlay != nil else { return nil }
    return try fill(for: last)
  }

  /// Waits until the bytes `name`'s queued upload puts there are whole (an overlaid edit's
  /// holes filled), for a reader or an edit that starts from them.
  func wholeBytes(_ name: String) async throws(FSError) {
    guard let fill = try overlaid(name) else { return }
    do throws(BucketError) {
      try await fill.ready()
    } catch {
      log("write-back: the bytes of \(name.debugDescription) its edit did not write cannot be read: \(error.detail)")
      throw FSError(error)
    }
  }

  /// An overlaid upload, started, made whole before it goes: its holes filled, the file
  /// fsynced, and its record rewritten with the size and CRC32C of the bytes (from then on a
  /// later mount checks them as any upload's). Nil when it is whole, else how it ended.
  private func makeWhole(_ change: inout PendingChange) async -> ChangeWorker.Verdict? {
    guard let overlay = change.overlay else { return nil }
    do throws(FSError) {
      let fill = try fill(for: change)
      do throws(BucketError) {
        try await fill.ready()
      } catch where error.code == .objectNotFound || error.code == .objectChanged {
        if let from = change.appendedFrom, fill.overlay.gaps(in: from..<Int64.max).isEmpty {
          // Only appended, and every appended byte is here: what the holes hid is not needed,
          // for the appended bytes go onto whatever version the bucket holds now (`merged`).
          log("write-back: the version \(change.name.debugDescription) was edited from left the bucket; what was appended goes onto its newest version")
          if change.rebase == nil { change.rebase = PendingChange.Rebase(onto: nil) }
          return nil
        }
        return .refused(
          BucketError(
            code: .objectNotFound, object: change.name,
            detail:
              "the version it was edited from (generation \(overlay.base.generation)) left the bucket before the bytes the edit did not write were read; what it wrote is kept in \(journal.dataPath(change))"
          ))
      } catch {
        return ChangeWorker.Verdict.of(error)
      }
      let (size, crc) = try journal.wholeBytes(of: change)
      var whole = change
      whole.overlay = nil
      whole.dataSize = size
      whole.dataCRC32C = crc
      try journal.write(whole)
      state.withLock { $0.madeWhole(whole) }
      fills.withLock { _ = $0.removeValue(forKey: change.sequence) }
      change = whole
      return nil
    } catch {
      return .retryLater("cannot make the queued bytes of \(change.name.debugDescription) whole: errno \(error.errno)")
    }
  }

  /// Sets `contentType`, `custom` entries and `mtime` on `name`'s upload that waits its turn,
  /// rewriting its record (no bytes copied, no new change); false when the name's last change is
  /// no such upload, and the caller queues a change of its own.
  func amend(_ name: String, contentType: String? = nil, custom: [String: String], mtime: Timestamp? = nil) throws(FSError) -> Bool {
    guard let (before, amended) = state.withLock({ $0.amend(name, contentType: contentType, custom: custom, mtime: mtime) }) else { return false }
    defer { work.signalOne() }
    do throws(FSError) {
      try journal.write(amended, committed: true)
    } catch {
      state.withLock { $0.release(amended.sequence, restoring: before) }
      throw error
    }
    state.withLock { $0.release(amended.sequence) }
    return true
  }

  /// Queues a server-side copy of `source` as the next version of `name` (a rename where the
  /// bucket copies): nothing local is needed, so it works with the server away too.
  @discardableResult
  func copy(
    _ name: String, from source: PendingChange.Source, contentType: String?, mtime: Timestamp?, custom: [String: String]?, base: PendingChange.Base,
    deleting: (name: String, base: PendingChange.Base)? = nil, batch: QueueBatch? = nil
  ) throws(FSError) -> UInt64 {
    var change = PendingChange(
      sequence: nextSequence(), kind: .copy, name: name, base: base, contentType: contentType, mtime: mtime, custom: custom)
    change.source = source
    try add(&change, deleting: deleting, batch: batch)
    return change.sequence
  }

  /// Queues the placeholder of folder `path` (an empty object named `path/`), with `custom`
  /// entries (the folder's mode, owner and times); one that is there already gets them instead.
  func folder(_ path: String, custom: [String: String] = [:], batch: QueueBatch? = nil) throws(FSError) {
    let empty = open("/dev/null", O_RDONLY | O_CLOEXEC)
    guard empty >= 0 else { throw FSError(errno) }
    defer { close(empty) }
    try upload(path + "/", from: empty, contentType: "application/x-directory", mtime: nil, custom: custom.isEmpty ? nil : custom, base: .generation(0),
      batch: batch)
  }

  /// Queues `custom` entries for folder `path`'s placeholder, which is made if there is none
  /// (a folder that only has objects under it): chmod, chown and times of a folder.
  @discardableResult
  func folderMetadata(_ path: String, custom: [String: String]) throws(FSError) -> UInt64 {
    try metadata(path + "/", contentType: nil, custom: custom, base: .any)
  }

  /// Queues new metadata (content type, custom entries) for `name` as it is in the bucket.
  @discardableResult
  func metadata(_ name: String, contentType: String?, custom: [String: String], base: PendingChange.Base) throws(FSError) -> UInt64 {
    let sequence = nextSequence()
    var change = PendingChange(sequence: sequence, kind: .metadata, name: name, base: base, contentType: contentType, custom: custom)
    try add(&change)
    return sequence
  }

  /// Queues the deletion of `name` (a folder placeholder when it ends with "/").
  @discardableResult
  func delete(_ name: String, base: PendingChange.Base, batch: QueueBatch? = nil) throws(FSError) -> UInt64 {
    let sequence = nextSequence()
    var change = PendingChange(sequence: sequence, kind: .delete, name: name, base: base)
    try add(&change, batch: batch)
    return sequence
  }

  /// Adds `change` to the queue, or to `batch` (queued with the rest of it by `queueTogether`).
  /// `held`: bytes the kernel still writes, which no worker takes before `sealWritten`.
  /// `deleting`: a rename's old name, whose delete is queued in the same append, so that a
  /// crash keeps both or neither (never the new name queued and the old one left for good).
  private func add(
    _ change: inout PendingChange, size: Int64 = 0, withBytes: Bool = false, held: Bool = false,
    deleting: (name: String, base: PendingChange.Base)? = nil, appended: AppendedBytes? = nil, batch: QueueBatch? = nil
  ) throws(FSError) {
    var delete = deleting.map { PendingChange(sequence: nextSequence(), kind: .delete, name: $0.name, base: $0.base) }
    if withBytes { delete?.renamedInto = change.sequence }
    let arrival = QueueBatch.Arrival(change: change, size: size, withBytes: withBytes, held: held, delete: delete, appended: appended)
    if let batch {
      batch.arrivals.append(arrival)
      return
    }
    change = try add([arrival])[0]
  }

  /// Queues what `fill` puts in a batch as one: every record in one append (one frame of the
  /// journal), so that `kill -9` or a power loss keeps all of it or none of it (a folder rename
  /// is never left with some files moved and the rest not). What `fill` put there is dropped
  /// when it throws; `QueueBatch.whenQueued` actions run either way, told which.
  func queueTogether(_ fill: (QueueBatch) async throws(FSError) -> Void) async throws(FSError) {
    let batch = QueueBatch()
    do throws(FSError) {
      try await fill(batch)
    } catch {
      for arrival in batch.arrivals where arrival.withBytes { journal.dropBytes(of: arrival.change) }
      batch.finish(queued: false)
      throw error
    }
    guard let first = batch.arrivals.first?.change.sequence else { return batch.finish(queued: true) }
    do throws(FSError) {
      _ = try add(batch.arrivals)
    } catch {
      // A folder that could not be synced leaves the changes queued all the same.
      batch.finish(queued: state.withLock { $0.changes[first] != nil })
      throw error
    }
    batch.finish(queued: true)
  }

  /// Adds `arrivals` to the queue: their records on disk in one append, then (uploads) their
  /// bytes under their final names, then the queue's view (`ChangeJournal` says why in that
  /// order); the changes as admitted. A folder that cannot be synced leaves the changes queued
  /// (in place, lasting across `kill -9`) and the caller told (EIO), as a disk's fsync error is.
  private func add(_ arrivals: [QueueBatch.Arrival]) throws(FSError) -> [PendingChange] {
    var admitted: [PendingChange] = []
    var deletes: [PendingChange] = []
    var replaced: [PendingChange] = []
    state.withLock { s in
      for arrival in arrivals {
        var change = arrival.change
        if let r = s.admit(&change, appended: arrival.appended) { replaced.append(r) }
        admitted.append(change)
        if var delete = arrival.delete {
          _ = s.admit(&delete, dropsHeld: false)
          deletes.append(delete)
        }
      }
    }
    var placed: [DurableFile.Placed] = []
    do throws(FSError) {
      // The replaced ones' records say so in the same append: whatever a crash keeps of the
      // journal, it never holds an older one waiting without the newer one that took its place.
      try journal.write(admitted + replaced + deletes, committed: true)
      for (change, arrival) in zip(admitted, arrivals) where arrival.withBytes { placed.append(try journal.keepBytes(of: change)) }
    } catch {
      state.withLock { s in for r in replaced { s.readmit(r) } }
      for (change, arrival) in zip(admitted, arrivals) where arrival.withBytes { journal.dropBytes(of: change) }
      throw error
    }
    let readyAt = ContinuousClock.now + Self.settle
    state.withLock { s in
      for (change, arrival) in zip(admitted, arrivals) { s.insert(change, size: arrival.size, readyAt: readyAt) }
      for delete in deletes { s.insert(delete, size: 0, readyAt: readyAt) }
    }
    // The replaced ones' bytes go once these last (`removeReplaced`): an fsynced version is
    // never lost to a newer one whose bytes a power loss undid.
    for r in replaced {
      placed.append(journal.removeReplaced(r))
      state.withLock { $0.remove(r.sequence) }
      fills.withLock { _ = $0.removeValue(forKey: r.sequence) }
    }
    // One new change: one worker (none for bytes the kernel still writes: `sealWritten` calls
    // one). A wait for an upload it replaced follows it when it ends.
    if arrivals.count > 1 {
      work.signal()
    } else if !arrivals[0].held {
      work.signalOne()
    }
    for case .folderNotSynced(let e) in placed {
      log("write-back: the queue's folder cannot be synced (errno \(e)): \(admitted[0].name.debugDescription) is queued, and may not outlast a power loss")
      throw FSError(EIO)
    }
    return admitted
  }

  /// Takes back upload `sequence` while it waits its turn (a write to the file failed after
  /// it was queued): true when it was taken back; one already started goes on.
  func withdraw(_ sequence: UInt64) -> Bool {
    guard let change = state.withLock({ $0.withdraw(sequence) }) else { return false }
    remove(change)
    changed.signal()
    return true
  }

  private func remove(_ change: PendingChange) {
    fills.withLock { _ = $0.removeValue(forKey: change.sequence) }
    journal.remove(change)
    state.withLock { $0.remove(change.sequence) }
  }

  /// Bytes of the queued uploads (they count against the staging folder's size and are never
  /// evicted).
  var queuedBytes: Int64 { state.withLock { $0.bytes } }

  // MARK: what the mount shows

  /// A spelling of `name` with other bytes that `String` takes for the same (canonically
  /// equal), queued by this mount: nil when there is none.
  func otherSpelling(of name: String) -> String? { state.withLock { $0.otherSpelling(of: name) } }

  /// `name` as the queued changes leave it: nil when no change of it is queued.
  func view(_ name: String) -> LocalView? {
    guard let (last, size) = state.withLock({ $0.lastVisible(name) }) else { return nil }
    if last.kind == .delete { return .deleted }
    if name.endsWithSlash { return .folder }
    if let source = last.source { return .copied(source, mtime: last.mtime ?? Timestamp(seconds: 0)) }
    return .file(dataPath: journal.dataPath(last), size: size, mtime: last.mtime ?? Timestamp(seconds: 0))
  }

  /// The queued change whose result `view(name)` shows.
  func viewed(_ name: String) -> UInt64? { state.withLock { $0.lastVisible(name)?.change.sequence } }

  /// The content type and custom metadata the last queued upload of `name` goes with.
  func queuedMetadata(_ name: String) -> (contentType: String?, custom: [String: String]?)? { state.withLock { $0.queuedMetadata(name) } }

  /// What the metadata changes still queued for `name` set (in queue order): an edit that
  /// starts from the bucket's object starts from these too, or its upload would undo them.
  func pendingMetadata(_ name: String, sinceLastVersion: Bool = false) -> (contentType: String?, custom: [String: String]) {
    state.withLock { $0.pendingMetadata(name, sinceLastVersion: sinceLastVersion) }
  }

  /// Whether some name under `prefix` is last changed by an upload (a file or placeholder this
  /// mount is putting there).
  func hasUploads(under prefix: String) -> Bool { state.withLock { $0.hasUploads(under: prefix) } }
  func hasQueued(under prefix: String) -> Bool { state.withLock { $0.hasQueued(under: prefix) } }

  /// Names with queued changes directly in folder `dir` ("" or ending in "/").
  func names(in dir: String) -> Set<ObjectName> { state.withLock { $0.names(in: dir) } }

  /// `user.sync_state` of `name`: nil when nothing of it is queued (synced).
  func syncState(_ name: String) -> (state: String, error: String?)? { state.withLock { $0.syncState(name) } }

  /// Changes queued (not failed), their bytes, those that failed for good, and the records set
  /// aside as damaged.
  var totals: QueueTotals {
    var totals = state.withLock { $0.totals }
    totals.atOnce = concurrency.limit
    return totals
  }

  /// What is left, one line per change, for `bucketfs sync`.
  func describe(within bytes: Int = .max) -> String { state.withLock { $0.describe(within: bytes) } }

  /// The changes queued, in the order they were made.
  var queued: [PendingChange] { state.withLock { $0.changes.values.sorted { $0.sequence < $1.sequence } } }

  /// Waits until change `first` is carried out, fails, or cannot be for lack of a server, or
  /// until `seconds` pass (then it is safe on disk and waits).
  func wait(for first: UInt64, within seconds: Double) async -> Outcome {
    let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
    var sequence = first
    while true {
      let epoch = changed.epoch
      switch state.withLock({ $0.waitState(sequence) }) {
      case .ended(let outcome): return outcome
      case .follow(let newer):
        sequence = newer
        continue
      case .unknown: return .applied
      case .queued(let blockedBy):
        // No worker (an offline mount): nothing will carry it out while this mount lives.
        if onApplied.value == nil { return .waiting("the mount is offline") }
        if let blockedBy { return .waiting(blockedBy) }
        if ContinuousClock.now >= deadline { return .waiting("not carried out yet") }
      }
      await changed.wait(after: epoch, until: deadline)
    }
  }

  /// The newest change queued so far.
  var newest: UInt64 { state.withLock { $0.newest } }

  /// Waits until the changes queued up to `mark` are carried out (or replaced by ones that
  /// are), but for uploads the kernel still writes, or until `seconds` pass: what is left of
  /// them then (`QueueState.outstanding`). For `bucketfs sync`, which waits for what was queued
  /// when it asked, not for what a writer that goes on queues meanwhile.
  func waitUntilDone(through mark: UInt64, within seconds: Double) async -> (changes: Int, stillWritten: Int) {
    let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
    while true {
      let epoch = changed.epoch
      let left = state.withLock { $0.outstanding(through: mark) }
      if left.changes <= left.stillWritten || ContinuousClock.now >= deadline || ending.load(ordering: .acquiring) { return left }
      await changed.wait(after: epoch, until: deadline)
    }
  }

  /// Waits until no change is waiting to go (failed ones stay), or until `seconds` pass; returns
  /// the totals then. For `bucketfs sync`, which asks again until its own deadline.
  func waitUntilEmpty(within seconds: Double) async -> QueueTotals {
    let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
    while true {
      let epoch = changed.epoch
      let totals = self.totals
      // Uploads whose file the kernel still writes wait for their writers, not for this; a
      // mount that is ending answers at once (its daemon waits for every answer it owes).
      if totals.changes <= totals.stillWritten || ContinuousClock.now >= deadline || ending.load(ordering: .acquiring) { return totals }
      await changed.wait(after: epoch, until: deadline)
    }
  }

  // MARK: carrying changes out

  /// Starts the workers. `applied` is told each change carried out (with the object's new
  /// attributes after an upload), and each refused for good, so that the mount's caches show
  /// the bucket as it is now.
  func start(client: any ObjectClient, applied: @escaping @Sendable (PendingChange, StorageMetadata?) -> Void) {
    onApplied.set(applied)
    let worker = ChangeWorker(
      client: client, dataPath: { [journal] in journal.dataPath($0) }, writeEmptyBytes: { [journal] change throws(FSError) in try journal.writeEmptyBytes(for: change) },
      sessionOpened: { [self] change, url in sessionOpened(change, url) },
      rebased: { [self] change throws(FSError) in try rebased(change) }, log: log)
    // They live as long as the mount's process.
    for _ in 0..<Self.workers {
      Task.detached { [self] in
        var backoff = 0.25
        while !Task.isCancelled {
          let epoch = work.epoch
          // As many at once as the server's round trips call for (`ChangeConcurrency`).
          guard concurrency.mayStart() else {
            await work.wait(after: epoch, until: nil)
            continue
          }
          let now = ContinuousClock.now
          let (taken, settles) = state.withLock { s in (Self.take(&s, now: now), s.nextSettled(after: now)) }
          guard var taken else {
            concurrency.ended()
            await work.wait(after: epoch, until: settles)
            continue
          }
          let verdict: ChangeWorker.Verdict
          let started = ContinuousClock.now
          if let failed = commitBefore(taken.change) {
            verdict = failed
          } else if let failed = await makeWhole(&taken.change) {
            verdict = failed
          } else {
            verdict = await worker.carryOut(taken)
          }
          concurrency.ended()
          switch verdict {
          case .done(let effect, let metadata, let skipped):
            if ChangeConcurrency.isSmall(taken.change) { concurrency.took(ContinuousClock.now - started) }
            backoff = 0.25
            if let skipped { logSkipped(taken.change, skipped) }
            finish(taken.change, effect, metadata)
          case .moved(let effect, let metadata):
            backoff = 0.25
            finish(taken.change, effect, metadata, movedSource: true)
          case .refused(let error):
            backoff = 0.25
            refuse(taken.change, error)
          case .retryLater(let reason):
            state.withLock { $0.putBack(taken.change.sequence, reason: reason) }
            ended()
            try? await Task.sleep(for: .milliseconds(Int(backoff * 1000)))
            backoff = min(backoff * 2, 15)
          }
        }
      }
    }
  }

  /// A change goes to the server only once the journal up to now has lasted (a group commit;
  /// nothing when none is due): its own newest record and bytes, the records that say the
  /// changes of its name before it were done or replaced, and a copy's source's. Otherwise a
  /// power loss could keep an older frame of what the server already has (a file's first close,
  /// before the kernel had written it), and the next mount would carry that out over it: a
  /// deleted or moved file comes back, empty bytes go beside the real ones as a conflict.
  /// Nil when it may go.
  private func commitBefore(_ change: PendingChange) -> ChangeWorker.Verdict? {
    guard journal.groupCommit != nil else { return nil }
    do throws(FSError) {
      try journal.commitCovering([change.name] + (change.source.map { [$0.name] } ?? []))
    } catch {
      return .retryLater("the queue's group commit failed (errno \(error.errno))")
    }
    return nil
  }

  /// The next change that can go, with what its base stands for now: a change based on the
  /// previous one of its name starts after that one is done, so what it left is known.
  private static func take(_ s: inout QueueState, now: ContinuousClock.Instant) -> ChangeWorker.Taken? {
    guard var change = s.takeNext(now: now) else { return nil }
    if change.base == .previous, change.kind == .upload, change.appendedFrom != nil, let g = s.leftMerged(change.name) {
      // Queued once the one before it was done (merged) and had passed on: what it appended
      // goes onto that merge, as `passOn` makes one queued in time do.
      change.base = .generation(g)
      change.rebase = PendingChange.Rebase(onto: g)
    }
    let precondition: ChangeWorker.Precondition =
      switch change.base {
      case .generation(let g): .generation(g)
      case .any: .any
      case .previous:
        if let g = s.leftGeneration(change.name) {
          .generation(g)
        } else if let copy = s.leftConflict(change.name) {
          .besideAt(copy.name, generation: copy.generation)
        } else if let copy = change.grows {
          // What the change before left is not known since a restart; its record said.
          .besideAt(copy.name, generation: copy.generation)
        } else {
          .beside
        }
      }
    let refusedCopy = change.kind == .delete ? s.failedCopy(of: change.name)?.name : nil
    var taken = ChangeWorker.Taken(change: change, precondition: precondition, refusedCopy: refusedCopy)
    taken.moves = s.renameDelete(of: change) != nil
    return taken
  }

  /// The session goes on disk with the change as soon as the server opens it.
  private func sessionOpened(_ change: PendingChange, _ url: String?) {
    var kept = change
    kept.sessionURL = url
    kept.life = .pending
    _ = try? journal.write(kept)
    state.withLock { $0.setSession(change.sequence, url) }
  }

  /// An append's `Rebase` lasts before what it put together is sent: a crash after the upload
  /// landed finds it in the bucket by size and CRC32C, rather than appending it again.
  private func rebased(_ change: PendingChange) throws(FSError) {
    var kept = change
    kept.life = .pending
    try journal.write(kept, committed: true)
    state.withLock { $0.setRebase(change.sequence, change.rebase) }
  }

  private func logSkipped(_ change: PendingChange, _ why: String) {
    let what = change.kind == .delete ? "\(change.name.debugDescription) not deleted" : "metadata of \(change.name.debugDescription) not changed"
    log("write-back: \(what): \(why)")
  }

  /// `change` is carried out: recorded (the bucket has it either way), the mount's caches told,
  /// the change after it of its name given what it left, and its record removed.
  /// `movedSource`: a rename's copy done as one move, which took the old name too; the rename's
  /// delete is then finished with it, without a request.
  private func finish(_ change: PendingChange, _ effect: PendingChange.Effect, _ metadata: StorageMetadata?, movedSource: Bool = false) {
    var record = change
    record.life = .done(effect)
    do throws(FSError) {
      // Through the group commit: lost to a power loss, the change is pending again with its
      // bytes (removed only after the commit), and the next mount finds them in the bucket.
      try journal.write(record, committed: true)
    } catch {
      log("write-back: cannot record that \(change.name.debugDescription) was written: errno \(error.errno)")
    }
    // The mount's caches learn the bucket's answer before the queue stops showing the change.
    if let applied = onApplied.value { applied(record, metadata) }
    let renameDelete = state.withLock { s in
      s.carriedOut(record)
      s.serverAnswered()
      return movedSource ? s.takeRenameDelete(of: change) : nil
    }
    passOn(record)
    ended()
    if let renameDelete { finish(renameDelete, .generation(0), nil) }
  }

  /// A change ended, or went back to wait: every worker and every wait looks again.
  private func ended() {
    work.signal()
    changed.signal()
  }

  /// A done change: the next change of its name based on it gets its generation, then it goes.
  private func passOn(_ done: PendingChange) {
    if let next = state.withLock({ $0.passOn(done) }) { _ = try? journal.write(next, committed: true) }
    remove(done)
  }

  private func refuse(_ change: PendingChange, _ error: BucketError) {
    var failed = change
    failed.life = .failed(error.detail)
    _ = try? journal.write(failed)
    state.withLock { s in
      s.failed(failed)
      s.serverAnswered()
    }
    log("write-back: \(change.kind.rawValue) of \(change.name.debugDescription) refused: \(error.detail); kept in \(folder.path)")
    if let applied = onApplied.value { applied(failed, nil) }
    ended()
  }

  /// How long a new upload waits before it may start: a shell's `>` closes the file once before
  /// the command writes it, and an editor may close it twice; a newer copy queued within this
  /// time replaces the waiting one, so such a file goes up once.
  static let settle: Duration = .milliseconds(50)

  /// Changes carried out at once: a bucket 20 ms away takes a round trip or more per change, so
  /// one at a time would leave a folder copied into the mount waiting for minutes (as many as
  /// `bucketfs cp -r` uploads at once).
  static let workers = ChangeConcurrency.most

  /// How many of the workers may carry out a change at once.
  let concurrency = ChangeConcurrency()
}

/// A dispatch timer, which is safe to schedule and cancel from any thread, held by the Sendable
/// queue. Resumed at once (it fires only once scheduled): a dispatch source released while
/// suspended is a crash, and a queue whose load fails is released before its clock starts.
private final class CommitClock: @unchecked Sendable {
  let timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "bucketfs.commit"))
  init() { timer.resume() }
}
