// The write-back queue's changes in memory, and every rule about them that needs neither the disk
// nor a server: what a new change is based on and which waiting upload it replaces, which change
// may start now, how a change's end reaches the ones after it, and what the mount shows of each
// name meanwhile. `WriteBackQueue` keeps one under its lock, writes the records and runs the
// workers; everything here is a plain value, tested as one.
import Foundation
import StorageCore

struct QueueState {
  /// What a name looks like from the changes still queued for it.
  enum LocalView: Sendable, Equatable {
    case file(dataPath: String, size: Int64, mtime: Timestamp)
    /// A version the server will copy here; its bytes are the source object's.
    case copied(PendingChange.Source, mtime: Timestamp)
    case folder
    case deleted

    /// Size and modification time of a file the queue puts there.
    var fileAttributes: (size: Int64, mtime: Timestamp)? {
      switch self {
      case .file(_, let size, let mtime): (size, mtime)
      case .copied(let source, let mtime): (source.size, mtime)
      case .folder, .deleted: nil
      }
    }
  }

  /// How a wait for a change ended.
  enum Outcome: Sendable, Equatable {
    case applied
    /// Our bytes went beside the object (`conflictName`).
    case conflict
    case failed(String)
    /// The change is safe on disk and waits (the server cannot be reached, or is slow to).
    case waiting(String)
  }

  /// How a change left the queue, for a wait that looks after it left (an fsync must learn of a
  /// conflict, not take a missing record for success).
  enum Ending: Equatable {
    case finished(Outcome)
    /// A newer upload of the name took its place before it started: wait for that one.
    case replaced(by: UInt64)
  }

  /// Where a wait for a change stands.
  enum WaitState: Equatable {
    case ended(Outcome)
    /// Wait for this change instead (it replaced the one waited for).
    case follow(UInt64)
    /// Not here and not ended here: carried out by an earlier mount.
    case unknown
    /// Not carried out yet; `blockedBy` is why the server has not taken it, when it said.
    case queued(blockedBy: String?)
  }

  private typealias NameKey = [UInt8]
  private static func key(_ name: String) -> NameKey { Array(name.utf8) }

  private(set) var changes: [UInt64: PendingChange] = [:]
  /// Each name's changes, oldest first. Keyed by the name's bytes: two spellings `String` takes
  /// for one are two objects.
  private var byName: [NameKey: [UInt64]] = [:]
  /// The changes pending or started, oldest first: the scheduler's list.
  private var unfinished: [UInt64] = []
  private var next: UInt64 = 1
  /// Why the change at the head last failed to go out (the server gone, say).
  private var lastError: String?
  private(set) var applied = 0
  private(set) var conflicts = 0
  /// Appends carried onto another writer's newer version (`PendingChange.Rebase`).
  private(set) var merges = 0
  /// Renames carried out as an upload of the bytes under the new name, then a delete of the old
  /// (where the server cannot copy: Firebase REST, or the file has local changes).
  private(set) var renamesByUpload = 0
  /// What the last change carried out of each name left there, for a change based on "whatever
  /// the queue left" made after it was done.
  private var left: [NameKey: PendingChange.Effect] = [:]
  /// The last spelling of each name (a folder's without its "/") queued by this mount, keyed by
  /// `String`, which takes canonically equal spellings for one key: how a new name finds another
  /// spelling of itself that this mount wrote, done or not.
  private var spellings: [String: String] = [:]
  /// When each change queued by this mount may start (`WriteBackQueue.settle` after it was
  /// queued, so in the order of sequences; those an earlier mount queued may start at once).
  private var readyAt: [UInt64: ContinuousClock.Instant] = [:]
  /// When the upload a new one replaced was to start: the new one starts no later (`insert`).
  private var replacedReady: [UInt64: ContinuousClock.Instant] = [:]
  /// What the folders hold of the queue, kept as changes come and go so that a lookup or a
  /// listing asks in O(depth), not by walking every queued change (a folder being filled through
  /// the mount asked about every one of its names: quadratic).
  private var folders = FolderIndex()
  /// Which folder prefixes have names with changes of any kind queued under them.
  private var queuedPrefixes = QueuedPrefixes()
  /// Changes whose record is being rewritten (`amend`): no worker takes them and no newer
  /// upload replaces them until it is on disk.
  private var held = Set<UInt64>()
  /// Uploads whose bytes the kernel may still be writing (a new file written by passthrough,
  /// `BucketFilesystem.create`): their record keeps the file across `kill -9`, but no worker
  /// takes them until the last writer is gone and `sealed` says what they hold. Unlike a held
  /// change, one holds up only what waits for its name, and a newer upload may replace it.
  private var writing = Set<UInt64>()
  /// Bytes of the queued uploads.
  private(set) var bytes: Int64 = 0
  private var sizes: [UInt64: Int64] = [:]
  private var ended: [UInt64: Ending] = [:]
  /// How many endings are remembered for waits.
  static let endingsKept = 10_000
  /// What the journal set aside as damaged; it changes only when a mount reads the queue.
  var damagedCount = 0

  init() {}

  /// The changes a journal held when the mount started (sizes: of the uploads' bytes). A change
  /// that was started is pending again: a restart carries it out again. Returns the changes that
  /// were done, for `finished` to pass their results on and remove.
  ///
  /// Also returns the uploads a newer one replaced (`admit`) whose removal a power loss undid:
  /// the newer took over their base, which no other change does, so they are known. They are
  /// not loaded; uploaded, they would make the newer one a false conflict.
  mutating func load(_ loaded: [PendingChange], sizes: [UInt64: Int64], damaged: Int) -> (done: [PendingChange], superseded: [PendingChange]) {
    damagedCount = damaged
    var superseded: [PendingChange] = []
    var lastOfName: [NameKey: PendingChange] = [:]
    for change in loaded.sorted(by: { $0.sequence < $1.sequence }) {
      let name = Self.key(change.name)
      // (A rename's delete takes over the base of the bytes the kernel still wrote under the
      // old name: `dropWritten`.)
      if let earlier = lastOfName[name], earlier.kind.putsVersion, earlier.isUnfinished,
        change.kind.putsVersion || change.kind == .delete, change.isUnfinished,
        case .generation = change.base, change.base == earlier.base
      {
        superseded.append(earlier)
      }
      lastOfName[name] = change
    }
    let dropped = Set(superseded.map(\.sequence))
    for var change in loaded.sorted(by: { $0.sequence < $1.sequence }) where !dropped.contains(change.sequence) {
      if change.life == .started { change.life = .pending }
      insert(change, size: sizes[change.sequence] ?? 0, readyAt: nil)
      if case .done(let effect) = change.life { left[Self.key(change.name)] = effect }
    }
    next = (loaded.map(\.sequence).max() ?? 0) + 1
    let done = loaded.filter { if case .done = $0.life { true } else { false } }.sorted { $0.sequence < $1.sequence }
    applied += done.count
    return (done, superseded)
  }

  mutating func reserveSequence() -> UInt64 {
    defer { next += 1 }
    return next
  }

  // MARK: adding

  /// Sets what `change` is based on, given the name's earlier changes: an earlier upload of the
  /// name that has not started is replaced (returned, marked replaced) and its base taken over;
  /// any other earlier change makes this one based on what that one leaves; with none queued,
  /// a change based on the queue's previous result is based on what the last one left.
  /// `dropsHeld`: a delete takes the place of bytes of its name the kernel still writes (below).
  mutating func admit(_ change: inout PendingChange, appended: AppendedBytes? = nil, dropsHeld: Bool = true) -> PendingChange? {
    // One done already counts by what it left (`left`), even while its record is still here:
    // it has passed on, and nothing after it would learn its generation.
    let earlier = standing(change.name, before: change.sequence)
    guard let lastSequence = earlier.last, let last = changes[lastSequence] else {
      // Appended to what the edit opened, or to what its last close left.
      change.appendedFrom = change.base == .previous ? appended?.fromBase : appended?.fromStart
      if change.base == .previous, case .merged(let g)? = left[Self.key(change.name)] {
        // What it was based on went up merged with another writer's bytes: an append goes
        // onto that (any other change goes beside it: `.previous` names no generation).
        if change.appendedFrom != nil {
          change.base = .generation(g)
          change.rebase = PendingChange.Rebase(onto: g)
        }
        return nil
      }
      if change.base == .previous, let generation = left[Self.key(change.name)]?.generation { change.base = .generation(generation) }
      // Based on what went beside the object: it grows that copy (its record says which).
      if change.base == .previous, case .conflict(let copy, let g?)? = left[Self.key(change.name)] {
        change.grows = PendingChange.ConflictCopy(name: copy, generation: g)
      }
      // A generation the mount's caches gave that is older than what this queue itself put
      // there last (a lookup answered before that change landed, stored after it): the newer
      // one is the version the caller saw. Generations of a name only grow, so the larger of
      // the two is never one the caller did not see; the older one sent the change beside.
      // Not for an upload: its bytes were read from the older one, and put over the newer they
      // would drop what that has and they lack (a merged append's other writer's lines).
      if change.kind != .upload, case .generation(let seen) = change.base, seen > 0, let mine = left[Self.key(change.name)]?.generation,
        mine > seen
      {
        change.base = .generation(mine)
      }
      return nil
    }
    // Appended to the replaced one's bytes, which were appended to its base: appended to that.
    let appendedToLast = appended?.from(after: lastSequence).flatMap { mine in last.appendedFrom.map { min(mine, $0) } }
    // One being carried onto another version than its bytes' (`Rebase`) is replaced only by an
    // append, which is carried there too; and not once what it put together was recorded: that
    // upload may have landed already, and what follows must know what it left.
    let replaceable = last.rebase == nil || (last.rebase?.size == nil && appendedToLast != nil)
    // Bytes the kernel still writes wait for their writers: put in place of a copy an fsync
    // sent (and waits for), they would hold it back until the file's last close, which a
    // program forking children that exit (each a close of the file) never reaches. They go
    // after it instead.
    let outwaits = writing.contains(change.sequence) && !writing.contains(lastSequence)
    // A file removed while a program still writes it (`rm` of a script's log): its held bytes
    // would go only to be deleted once the script ends, and the delete, waiting for them, held
    // up every upload queued after it. The delete takes their place. (Not a rename's delete:
    // a close before the rename moves the edit rewrites those bytes, which `dropWritten` drops
    // once it has moved.)
    if dropsHeld, change.kind == .delete, last.kind == .upload, last.life == .pending, writing.contains(lastSequence), !held.contains(lastSequence) {
      replace(lastSequence, by: change.sequence)
      change.base = earlier.count > 1 ? .previous : last.base
      change.grows = last.grows
      return changes[lastSequence]
    }
    if last.kind.putsVersion && last.life == .pending && change.kind.putsVersion && !held.contains(lastSequence) && replaceable && !outwaits {
      replacedReady[change.sequence] = readyAt[lastSequence] ?? .now
      replace(lastSequence, by: change.sequence)
      change.base = last.base
      if earlier.count > 1 { change.base = .previous }
      change.appendedFrom = appendedToLast
      change.rebase = last.rebase
      change.grows = last.grows
      return changes[lastSequence]
    }
    change.base = .previous
    change.appendedFrom = appended?.from(after: lastSequence)
    return nil
  }

  /// Upload `sequence`, when it still waits its turn: marked as ended (a wait for it learns it
  /// failed) and returned, for its record to go; nil when it started or is not here.
  mutating func withdraw(_ sequence: UInt64) -> PendingChange? {
    guard let change = changes[sequence], change.kind == .upload, change.life == .pending else { return nil }
    ended[sequence] = .finished(.failed("a write to the file failed after it was queued"))
    return change
  }

  /// The metadata of `name`'s last change, when it is an upload waiting its turn: what a chmod,
  /// chown, utimensat or setxattr after a close sets goes with that upload (one request, one
  /// record) instead of a change of its own. The change is held (no worker takes it, no newer
  /// upload replaces it) and returned, for its record to be rewritten and `release`d; nil when
  /// the last change is not such an upload.
  mutating func amend(_ name: String, contentType: String?, custom: [String: String], mtime: Timestamp?) -> (before: PendingChange, after: PendingChange)? {
    guard let last = byName[Self.key(name)]?.last, let change = changes[last], change.kind == .upload, change.life == .pending,
      !held.contains(last)
    else { return nil }
    var amended = change
    if let contentType { amended.contentType = contentType }
    if !custom.isEmpty { amended.custom = (amended.custom ?? [:]).merging(custom) { _, new in new } }
    if let mtime { amended.mtime = mtime }
    changes[last] = amended
    held.insert(last)
    return (change, amended)
  }

  /// An amended change's record is on disk (or, `restoring` it, could not be rewritten): it may go.
  mutating func release(_ sequence: UInt64, restoring before: PendingChange? = nil) {
    if let before, changes[sequence] != nil { changes[sequence] = before }
    held.remove(sequence)
  }

  /// `name`'s changes before `sequence` that still stand (neither replaced nor done).
  private func standing(_ name: String, before sequence: UInt64) -> [UInt64] {
    (byName[Self.key(name)] ?? []).filter { $0 < sequence && changes[$0].map { !$0.isReplaced && !$0.isDone } == true }
  }

  /// `sequence` is replaced by `newer`: a wait for it follows that one.
  private mutating func replace(_ sequence: UInt64, by newer: UInt64) {
    setLife(sequence, .replaced(by: newer))
    ended[sequence] = .replaced(by: newer)
  }

  /// A replaced change waits again: the change that replaced it could not be written.
  mutating func readmit(_ replaced: PendingChange) {
    setLife(replaced.sequence, .pending)
    if case .replaced(let newer)? = ended.removeValue(forKey: replaced.sequence) { replacedReady.removeValue(forKey: newer) }
  }

  /// `change` is in the queue (its record and bytes on disk), to start no sooner than `readyAt`.
  mutating func insert(_ change: PendingChange, size: Int64, readyAt: ContinuousClock.Instant?) {
    let name = Self.key(change.name)
    if changes[change.sequence] == nil {
      byName[name, default: []].append(change.sequence)
      if byName[name]!.count > 1, byName[name]![byName[name]!.count - 2] > change.sequence { byName[name]!.sort() }
    }
    changes[change.sequence] = change
    if change.isUnfinished { Self.insertSorted(change.sequence, into: &unfinished) }
    spellings[Self.spellingKey(change.name)] = Self.spellingKey(change.name)
    // One that replaced a waiting upload starts when that one would have: a writer closing the
    // file more often than `settle` (a script whose commands each close its output once) had
    // each close put the upload off again, and nothing went up while it ran.
    let inherited = replacedReady.removeValue(forKey: change.sequence)
    if let readyAt { self.readyAt[change.sequence] = min(readyAt, inherited ?? readyAt) }
    sizes[change.sequence] = size
    bytes += size
    reindex(name)
  }

  /// `sequence` left the queue (done and passed on, or replaced): how it ended is kept for waits.
  mutating func remove(_ sequence: UInt64) {
    guard let gone = changes.removeValue(forKey: sequence) else { return }
    setUnfinished(sequence, false)
    let name = Self.key(gone.name)
    byName[name]?.removeAll { $0 == sequence }
    if byName[name]?.isEmpty == true { byName.removeValue(forKey: name) }
    if ended[sequence] == nil {
      ended[sequence] = .finished(gone.conflictName == nil ? .applied : .conflict)
      if ended.count > Self.endingsKept, let oldest = ended.keys.min() { ended.removeValue(forKey: oldest) }
    }
    readyAt.removeValue(forKey: sequence)
    writing.remove(sequence)
    bytes -= sizes.removeValue(forKey: sequence) ?? 0
    reindex(name)
  }

  /// Upload `sequence`'s bytes are still being written by the kernel: no worker takes it yet.
  mutating func stillWritten(_ sequence: UInt64) { writing.insert(sequence) }

  /// Upload `sequence`, still written and waiting: rewritten (returned) with what its edit's
  /// close gives it now (metadata, and the size its file has grown to); nil when it is no such
  /// upload any more (replaced, withdrawn).
  mutating func rewriteWritten(
    _ sequence: UInt64, contentType: String, custom: [String: String]?, mtime: Timestamp?, size: Int64
  ) -> PendingChange? {
    guard var change = written(sequence) else { return nil }
    change.contentType = contentType
    change.custom = custom
    change.mtime = mtime
    change.dataSize = size
    changes[sequence] = change
    resize(sequence, to: size)
    return change
  }

  /// Upload `sequence`, still written and waiting, whose file was renamed: its bytes went under
  /// the new name as upload `movedInto`, and under the old name they would go only to be
  /// deleted, once the writers are gone, the rename's delete waiting for them (and every
  /// upload queued after that delete with it). Ended as replaced by that upload and returned,
  /// for its record to go, with the name's next change when that one takes over what it was
  /// based on (as the one that replaces an upload does), for its record to be rewritten
  /// first. Nil when it is no such upload (sealed, started).
  mutating func dropWritten(_ sequence: UInt64, movedInto: UInt64) -> (dropped: PendingChange, rebased: PendingChange?)? {
    guard let dropped = written(sequence) else { return nil }
    replace(sequence, by: movedInto)
    guard standing(dropped.name, before: sequence).isEmpty, let next = byName[Self.key(dropped.name)]?.first(where: { $0 > sequence }),
      changes[next]?.base == .previous
    else {
      return (dropped, nil)
    }
    changes[next]!.base = dropped.base
    return (dropped, changes[next])
  }

  /// The changes queued up to `mark` still to be carried out, and those that took their place
  /// since (holding their bytes and more); of them, the uploads the kernel still writes.
  func outstanding(through mark: UInt64) -> (changes: Int, stillWritten: Int) {
    var successors = Set<UInt64>()
    for (sequence, ending) in ended where sequence <= mark {
      guard case .replaced(var newer) = ending else { continue }
      while case .replaced(let next)? = ended[newer] { newer = next }
      successors.insert(newer)
    }
    var left = (changes: 0, stillWritten: 0)
    for (sequence, change) in changes where change.isUnfinished && (sequence <= mark || successors.contains(sequence)) {
      left.changes += 1
      if writing.contains(sequence) { left.stillWritten += 1 }
    }
    return left
  }

  /// The newest change queued so far (0: none yet).
  var newest: UInt64 { next - 1 }

  /// The upload `sequence` whose writers are gone, while it is still waiting for them.
  func written(_ sequence: UInt64) -> PendingChange? {
    guard writing.contains(sequence), let change = changes[sequence], change.life == .pending else { return nil }
    return change
  }

  /// Its record says what the bytes hold (`sealed`): a worker may take it.
  mutating func sealed(_ change: PendingChange) {
    guard written(change.sequence) != nil else { return }
    writing.remove(change.sequence)
    changes[change.sequence] = change
    resize(change.sequence, to: change.dataSize ?? 0)
  }

  private mutating func resize(_ sequence: UInt64, to size: Int64) {
    guard let old = sizes[sequence] else { return }
    sizes[sequence] = size
    bytes += size - old
  }

  // MARK: carrying out

  /// The oldest change that can go now, marked started. Changes of one name go in order, and
  /// uploads and deletes do not pass each other (a rename is an upload, then a delete, and the
  /// old name must not go before the new one is there); uploads of different names go at once,
  /// and so do deletes; a copy waits for its source's changes too. A metadata change waits for
  /// its name's changes only (and a copy of it for it): counted as a
  /// delete, every folder's mode and times that tar sets after its files drained every upload
  /// before it, a round trip or two each, which made an untar 20 ms away land 3.5x later than
  /// `bucketfs cp -r` of the same tree. A change not settled yet holds up the ones after it as
  /// if started. A folder's delete (`a/`) also waits for the changes queued before it under the
  /// folder: on a hierarchical bucket it deletes the folder itself, which the server refuses
  /// while the folder holds anything (an `rm -r` queues the files' deletes first).
  mutating func takeNext(now: ContinuousClock.Instant) -> PendingChange? {
    var names = Set<NameKey>()
    var uploadBefore = false
    var deleteBefore = false
    // Deletes before this point that are renames' (the name an earlier copy took its bytes
    // from): a rename's copy of other names may pass them, so that a folder renamed object by
    // object has many moves in flight, not one at a time.
    var copySources = Set<NameKey>()
    var renameDeletes: [NameKey] = []
    var otherDeleteBefore = false
    for sequence in unfinished {
      guard let change = changes[sequence] else { continue }
      let name = Self.key(change.name)
      // A server-side copy also waits for its source's changes: a chmod or time queued on the
      // source before a rename must be on it when the server copies it.
      let sourceBusy = change.source.map { names.contains(Self.key($0.name)) } ?? false
      let contentsBusy = change.kind == .delete && name.last == UInt8(ascii: "/") && names.contains { $0.starts(with: name) }
      let passesDeletes =
        change.kind == .copy && !otherDeleteBefore
        && !renameDeletes.contains { deleted in
          Self.related(deleted, name) || change.source.map { Self.related(deleted, Self.key($0.name)) } == true
        }
      let free =
        !names.contains(name) && !sourceBusy && !contentsBusy
        && (change.kind.putsVersion ? (!deleteBefore || passesDeletes) : change.kind == .delete ? !uploadBefore : true)
      let settled = (readyAt[sequence].map { $0 <= now } ?? true) && !held.contains(sequence)
      // Changes settle in the order they were queued: none after this one has settled either.
      if change.life == .pending && !settled { break }
      if change.life == .pending && free && !writing.contains(sequence) {
        readyAt.removeValue(forKey: sequence)
        changes[sequence]!.life = .started
        return changes[sequence]
      }
      names.insert(name)
      if change.kind == .copy, let source = change.source { copySources.insert(Self.key(source.name)) }
      // Bytes the kernel still writes hold up their own name only: a delete of another name
      // after them (an `rm` while a script writes its log) held up every upload after it until
      // the script ended. No rename's bytes are ever such an upload (a move copies them).
      if change.kind.putsVersion && writing.contains(sequence) {
        continue
      } else if change.kind.putsVersion {
        uploadBefore = true
      } else if change.kind == .delete {
        deleteBefore = true
        if copySources.contains(name) { renameDeletes.append(name) } else { otherDeleteBefore = true }
      }
      if uploadBefore && otherDeleteBefore { break }
    }
    return nil
  }

  /// Whether two names are one, or one is a folder holding the other.
  private static func related(_ a: NameKey, _ b: NameKey) -> Bool {
    func holds(_ folder: NameKey, _ inner: NameKey) -> Bool {
      inner.count > folder.count && inner.starts(with: folder) && (folder.last == UInt8(ascii: "/") || inner[folder.count] == UInt8(ascii: "/"))
    }
    return a == b || holds(a, b) || holds(b, a)
  }

  /// When the next change still settling may start (nil: none is). Only times to come: a
  /// settled change that waits for another (its name's, or an upload before a delete) is woken
  /// by that one's end, not by a clock that has passed.
  func nextSettled(after now: ContinuousClock.Instant) -> ContinuousClock.Instant? {
    // The first one still settling: they settle in the order they were queued.
    for sequence in unfinished where changes[sequence]?.life == .pending {
      if let ready = readyAt[sequence], ready > now { return ready }
    }
    return nil
  }

  /// What the previous change of `name` left, for a change based on it (nil: nothing is known;
  /// it went beside the object or was not applied).
  func leftGeneration(_ name: String) -> Int64? { left[Self.key(name)]?.generation }

  /// The generation the previous change of `name` left when it merged appended bytes onto
  /// another writer's version.
  func leftMerged(_ name: String) -> Int64? {
    if case .merged(let g)? = left[Self.key(name)] { g } else { nil }
  }

  /// The conflict copy the previous change of `name` went to, and the generation it left there
  /// (nil: it did not go beside, or an older record did not say).
  func leftConflict(_ name: String) -> (name: String, generation: Int64)? {
    guard case .conflict(let copy, let generation?)? = left[Self.key(name)] else { return nil }
    return (copy, generation)
  }

  /// A started change is to be tried again later (`reason`: why it could not go now).
  mutating func putBack(_ sequence: UInt64, reason: String) {
    if changes[sequence]?.life == .started { changes[sequence]!.life = .pending }
    lastError = reason
  }

  /// A change went out (or was refused for good): the server answers.
  mutating func serverAnswered() { lastError = nil }

  mutating func setSession(_ sequence: UInt64, _ url: String?) { changes[sequence]?.sessionURL = url }

  /// An append is being carried onto another version (`PendingChange.Rebase`).
  mutating func setRebase(_ sequence: UInt64, _ rebase: PendingChange.Rebase?) { changes[sequence]?.rebase = rebase }

  /// An overlaid upload's bytes are whole now: `whole` is its record without the overlay.
  mutating func madeWhole(_ whole: PendingChange) {
    if changes[whole.sequence] != nil { changes[whole.sequence] = whole }
  }

  mutating func failed(_ change: PendingChange) { set(change) }

  /// `done` is carried out; a change of the same name may start as soon as it reads as done, and
  /// finds what it left.
  mutating func carriedOut(_ done: PendingChange) {
    set(done)
    // Counted as it stops counting as queued: `bucketfs sync` may answer before it is passed on.
    applied += 1
    if case .done(let effect) = done.life {
      left[Self.key(done.name)] = effect
      if case .conflict = effect { conflicts += 1 }
      if case .merged = effect { merges += 1 }
      if done.kind == .delete, done.renamedInto != nil { renamesByUpload += 1 }
    }
  }

  /// The next change of `done`'s name when it is based on `done`'s result: it now names the
  /// generation, and is returned so that its record says so too (nil when there is none, or
  /// when `done` left no generation: then `.previous` stays, and sends it beside the object too).
  mutating func passOn(_ done: PendingChange) -> PendingChange? {
    guard let nextSequence = byName[Self.key(done.name)]?.first(where: { $0 > done.sequence && changes[$0]?.isQueued == true }),
      let next = changes[nextSequence], next.base == .previous
    else { return nil }
    switch done.life {
    case .done(.generation(let g)):
      changes[nextSequence]!.base = .generation(g)
    case .done(.merged(let g)) where next.appendedFrom != nil:
      // Its bytes start with the queued ones, not with what went up: only what it appended
      // goes onto that.
      changes[nextSequence]!.base = .generation(g)
      changes[nextSequence]!.rebase = PendingChange.Rebase(onto: g)
    case .done(.conflict(let copy, let g?)):
      // It grows that copy, across a restart too (`WriteBackQueue.take`).
      changes[nextSequence]!.grows = PendingChange.ConflictCopy(name: copy, generation: g)
    default:
      return nil
    }
    return changes[nextSequence]
  }

  private mutating func set(_ change: PendingChange) {
    guard changes[change.sequence] != nil else { return }
    changes[change.sequence] = change
    setUnfinished(change.sequence, change.isUnfinished)
    reindex(Self.key(change.name))
  }

  private mutating func setLife(_ sequence: UInt64, _ life: PendingChange.Life) {
    changes[sequence]?.life = life
    setUnfinished(sequence, changes[sequence]?.isUnfinished ?? false)
    if let name = changes[sequence]?.name { reindex(Self.key(name)) }
  }

  /// `name`'s place in the folder index, from its changes now.
  private mutating func reindex(_ key: NameKey) {
    let last = (byName[key] ?? []).last { changes[$0].map { $0.isQueued && $0.kind != .metadata } == true }.flatMap { changes[$0] }
    folders.set(String(decoding: key, as: UTF8.self), shown: last != nil, uploading: last?.kind.putsVersion == true)
    queuedPrefixes.set(String(decoding: key, as: UTF8.self), queued: (byName[key] ?? []).contains { changes[$0]?.isQueued == true })
  }

  private mutating func setUnfinished(_ sequence: UInt64, _ yes: Bool) {
    let at = Self.position(of: sequence, in: unfinished)
    let present = at < unfinished.count && unfinished[at] == sequence
    if yes && !present { unfinished.insert(sequence, at: at) }
    if !yes && present { unfinished.remove(at: at) }
  }

  private static func position(of sequence: UInt64, in list: [UInt64]) -> Int {
    var low = 0
    var high = list.count
    while low < high {
      let mid = (low + high) / 2
      if list[mid] < sequence { low = mid + 1 } else { high = mid }
    }
    return low
  }

  private static func insertSorted(_ sequence: UInt64, into list: inout [UInt64]) {
    let at = position(of: sequence, in: list)
    if at == list.count || list[at] != sequence { list.insert(sequence, at: at) }
  }

  // MARK: waiting

  /// Where change `sequence` stands, for a wait.
  func waitState(_ sequence: UInt64) -> WaitState {
    switch ended[sequence] {
    case .finished(let outcome): return .ended(outcome)
    case .replaced(let newer): return .follow(newer)
    case nil: break
    }
    guard let change = changes[sequence] else { return .unknown }
    switch change.life {
    case .done(.conflict): return .ended(.conflict)
    case .done: return .ended(.applied)
    case .failed(let why): return .ended(.failed(why))
    case .replaced(let newer): return .follow(newer)
    case .pending, .started:
      // The server is away (the last attempt said so): a change at the head, or one not taken
      // yet, will not go until it is back.
      let isHead = unfinished.first == sequence
      return .queued(blockedBy: isHead || change.life == .pending ? lastError : nil)
    }
  }

  // MARK: what the mount shows

  private static func spellingKey(_ name: String) -> String { name.withoutTrailingSlash }

  /// A spelling of `name` with other bytes that `String` takes for the same (canonically
  /// equal), queued by this mount: nil when there is none.
  func otherSpelling(of name: String) -> String? {
    spellings[name].flatMap { Namespace.sameBytes($0, name) ? nil : $0 }
  }

  private func queued(_ name: String) -> [PendingChange] {
    (byName[Self.key(name)] ?? []).compactMap { changes[$0] }.filter(\.isQueued)
  }

  /// The last queued change that puts or removes something under `name`, and its bytes' size.
  func lastVisible(_ name: String) -> (change: PendingChange, size: Int64)? {
    // A metadata change leaves a name as it is; so does a refused copy (a rename whose source
    // changed in the bucket): nothing moved, and its source's version is not to be had. Its
    // record stays, to say so (`bucketfs sync`, `user.sync_error`).
    queued(name).last { $0.kind != .metadata && !($0.kind == .copy && $0.isFailed) }.map { ($0, sizes[$0.sequence] ?? 0) }
  }

  /// The content type and custom metadata the last queued upload of `name` goes with.
  func queuedMetadata(_ name: String) -> (contentType: String?, custom: [String: String]?)? {
    queued(name).last { $0.kind.putsVersion }.map { ($0.contentType, $0.custom) }
  }

  /// What the metadata changes still queued for `name` set (in queue order).
  /// `sinceLastVersion`: only those queued after the name's last upload or copy (what that one
  /// goes with already has the ones before it).
  func pendingMetadata(_ name: String, sinceLastVersion: Bool = false) -> (contentType: String?, custom: [String: String]) {
    var out: (contentType: String?, custom: [String: String]) = (nil, [:])
    for change in queued(name) {
      if change.kind.putsVersion && sinceLastVersion { out = (nil, [:]) }
      guard change.kind == .metadata else { continue }
      if let type = change.contentType { out.contentType = type }
      out.custom.merge(change.custom ?? [:]) { _, new in new }
    }
    return out
  }

  /// Whether any change of a name under folder prefix `prefix` ("a/", the placeholder too) is
  /// still the queue's, refused ones too: for a change that must not pass any of them (a folder
  /// renamed on the server moves the names under it while their changes wait here).
  func hasQueued(under prefix: String) -> Bool { queuedPrefixes.any(under: prefix) }

  /// Whether some name under `prefix` is last changed by an upload (a file or placeholder this
  /// mount is putting there).
  func hasUploads(under prefix: String) -> Bool { folders.hasUploads(under: prefix) }

  /// Names with queued changes directly in folder `dir` ("" or ending in "/").
  func names(in dir: String) -> Set<ObjectName> { folders.names(in: dir) }

  /// `user.sync_state` of `name`: nil when nothing of it is queued (synced).
  func syncState(_ name: String) -> (state: String, error: String?)? {
    let mine = queued(name)
    guard let last = mine.last else { return nil }
    if case .failed(let why) = last.life { return ("failed", why) }
    if mine.contains(where: { $0.life == .started }) { return ("uploading", nil) }
    let headIsMine = unfinished.first.flatMap { changes[$0] }.map { Namespace.sameBytes($0.name, name) } == true
    return ("pending", headIsMine ? lastError : nil)
  }

  /// The delete of a rename's old name, queued right after `copy` and based on the version it
  /// copies, while it waits: a copy carried out as one move does it too.
  func renameDelete(of copy: PendingChange) -> PendingChange? {
    guard copy.kind == .copy, let source = copy.source,
      let sequence = byName[Self.key(source.name)]?.first(where: { $0 > copy.sequence && changes[$0]?.isUnfinished == true }),
      let delete = changes[sequence], delete.kind == .delete, delete.life == .pending, delete.base == .generation(source.generation)
    else { return nil }
    return delete
  }

  /// Takes `renameDelete(of:)` as a worker takes a change (started), for the move that did it.
  mutating func takeRenameDelete(of copy: PendingChange) -> PendingChange? {
    guard var delete = renameDelete(of: copy) else { return nil }
    delete.life = .started
    readyAt.removeValue(forKey: delete.sequence)
    set(delete)
    return delete
  }

  /// A copy from `name` that was refused for good, if any: the old name keeps the only bytes.
  func failedCopy(of name: String) -> PendingChange? {
    changes.values.first { $0.kind == .copy && $0.isFailed && $0.source.map { Namespace.sameBytes($0.name, name) } == true }
  }

  var totals: QueueTotals {
    let queued = changes.values.filter(\.isQueued)
    let failed = queued.filter(\.isFailed).count
    return QueueTotals(
      changes: queued.count - failed, bytes: bytes, failed: failed, applied: applied, conflicts: conflicts, merges: merges,
      renamesByUpload: renamesByUpload, damaged: damagedCount, stillWritten: writing.count)
  }

  /// What is left, one line per change, for `bucketfs sync`.
  /// `bytes`: at most about this much text (an extended attribute holds 64 KiB): the failed
  /// changes first, then those waiting, in order, and how many more were left out.
  func describe(within bytes: Int = .max) -> String {
    var lines: [String] = []
    var size = 0
    let queued = changes.values.filter(\.isQueued).sorted { ($0.isFailed ? 0 : 1, $0.sequence) < ($1.isFailed ? 0 : 1, $1.sequence) }
    let firstWaiting = queued.first { !$0.isFailed }?.sequence
    for (i, c) in queued.enumerated() {
      if size > bytes - 200 {
        lines.append("…\t\(queued.count - i) more changes\twaiting")
        break
      }
      // One change a line whatever its name holds (a record from before names with line breaks
      // were refused; escapes that would retitle or clear a terminal).
      var line = "\(c.kind.rawValue)\t\(TerminalText.visible(c.name))\t\(c.stateName)"
      let why: String? =
        if case .failed(let why) = c.life { why } else if writing.contains(c.sequence) {
          "still open for writing: it goes when its last writer closes"
        } else { c.sequence == firstWaiting ? lastError : nil }
      if let why { line += "\t" + TerminalText.visible(why) }
      lines.append(line)
      size += line.utf8.count + 1
    }
    return lines.joined(separator: "\n") + (lines.isEmpty ? "" : "\n")
  }
}

extension PendingChange {
  var isReplaced: Bool {
    if case .replaced = life { true } else { false }
  }
  var isDone: Bool {
    if case .done = life { true } else { false }
  }

  /// The life's name as `bucketfs sync` prints it.
  var stateName: String {
    switch life {
    case .pending, .replaced: "pending"
    case .started: "started"
    case .done: "done"
    case .failed: "failed"
    }
  }
}
