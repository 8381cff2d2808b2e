// Keeps pinned folders and files available offline: stages every object of a pinned tree in
// the background (a few at a time, through the staging area's own verified copies), keeps those
// copies from eviction, and brings the tree up to date whenever the mount learns of a change
// (every `pin_interval`, `refresh`, SIGHUP, a change this mount wrote): new and changed objects are
// staged, and only once the new version is verified does the old one stop being kept; objects
// deleted from the bucket are dropped. A pin that would not fit in `staging_size` beside the
// others is refused before anything is staged or evicted. Pins are recorded durably
// (`PinStore`) and resume at the next mount. An offline mount stages nothing: it shows and
// reads what the pins kept.
//
// A pass costs ⌈N/1000⌉ + (changed objects) requests for a pin of N objects: one recursive
// listing (`TreeWalk`), its generations compared with the staged copies, and only new or
// changed objects fetched. Over the Firebase v0 API a listing has names only, so a pass takes
// a listed name's metadata as last known; every object's is asked again (a verifying pass) at
// the first check, on `refresh`/SIGHUP, every `pin_verify_interval`, and for a name the mount
// saw with another generation (`noticed`).
import Foundation
import StorageCore
import Synchronization

final class PinKeeper: Sendable {
  private struct State {
    var pins: [ObjectName: Pin] = [:] {
      didSet { version &+= 1 }
    }
    var version: UInt64 = 0
    /// The tree a pass is staging, kept alongside the pin's last one until it is complete.
    var incoming: [ObjectName: [ObjectName: StorageMetadata]] = [:] {
      didSet { version &+= 1 }
    }
    /// Pins with a pass running: whether another is wanted after it (a change came meanwhile).
    var passes: [ObjectName: Bool] = [:]
    /// Pins whose next pass asks every object's metadata (`refresh(overlapping:verify:)`).
    var verifyWanted: Set<ObjectName> = []
    /// Objects the mount saw with another generation than their pin's tree has: the next pass
    /// asks their metadata even where the listing has none (v0).
    var noticed: Set<ObjectName> = []
    var totals = PassTotals()
    var stopped = false
    /// Copies being adopted for a new generation of a kept name (`noticed`): the old version and
    /// the new are kept, as a tree's are, from before the new copy is made until the tree names
    /// it.
    var adopting: [ObjectName: (from: StorageMetadata, to: StorageMetadata)] = [:] {
      didSet { version &+= 1 }
    }
    /// Pins whose trees learned a new generation (`noticed`) since their record was written:
    /// written at the next pass, or when the mount ends (`stop`), not once per landed move.
    var unsaved: Set<ObjectName> = []
    /// Renames made through the mount and not yet followed (`renameStarting` to
    /// `renameEnded`): their moves are queued, and may land, before the pins follow. A pass that
    /// read the bucket or the queue meanwhile took the moved names as gone; it records nothing.
    var renamesUnderway: [UInt64: (source: String, target: String)] = [:]
    var nextRename: UInt64 = 0
    /// Per pin, grows at the start, end and follow of every rename that overlaps it: a pass
    /// that began at another value may have seen the bucket half renamed, and records nothing.
    var renameMarks: [ObjectName: UInt64] = [:]
    /// Pins whose pass gave up for a rename underway: passed again when the last one ends.
    var abandoned: Set<ObjectName> = []
  }

  /// What a pass may do with what it found (`mayRecord`).
  private enum Verdict { case record, stop }

  /// What the passes cost, for the stats: a test counts them against the server's requests.
  struct PassTotals: Sendable {
    var passes = 0
    /// List pages, metadata requests and objects fetched by the last pass.
    var lastPages = 0
    var lastAsked = 0
    var lastFetched = 0
    /// Objects fetched (staged) by every pass.
    var fetched = 0
  }

  private let staging: StagingArea
  /// Bucket-wide: pins are kept by full object names, as staged copies are.
  private let client: any ObjectClient
  private let store: PinStore
  let online: Bool
  private let log: @Sendable (String) -> Void
  private let state = Mutex(State())
  /// Signalled at every change of a pin: what waits for one (`checked`, `bucketfs pin`'s
  /// progress) waits for that, not for a clock.
  private let changed = ChangeSignal()
  /// Held while a pin's record is written or removed: a pass that records a pin just unpinned
  /// must not bring its record back.
  private let records = Mutex(())
  /// Objects staged at once for all pins (each large one fetches several ranges itself).
  private let slots = ReadAheadSlots(8)

  /// For tests: runs in `noticed` after a landed move's copy is adopted and before the pin's
  /// tree names it, so that a test can end a pass there (a race that came 1 run in 6).
  let whileAdopting = Hook<@Sendable (ObjectName) -> Void>()

  /// For tests: runs in a pass right after it recorded the pin, before it hands the staging area
  /// the versions kept and removes the others, so that a test can land a move there (issue 55 F3).
  let whileEnding = Hook<@Sendable (ObjectName) -> Void>()

  /// Seconds between verifying passes over v0 (0: only on `refresh`).
  private let verifyEvery: Double

  /// What this mount's write-back queue holds of an object and the server has not yet.
  enum Queued: Sendable { case version, deleted }

  /// The queue's changes of object `name` (a full object name) still to reach the server; and
  /// whether it has any under a prefix. A pass takes the tree as the mount shows it: a name a
  /// queued move puts in the pin as last known, though the server does not list it yet, and
  /// one it moves away as gone, though the server lists it still; else a pass before a rename
  /// lands drops the copies the rename carried over and fetches the old names' again.
  private let queued: @Sendable (String) -> Queued?
  private let queuedUnder: @Sendable (String) -> Bool

  init(
    staging: StagingArea, client: any ObjectClient, online: Bool, verifyEvery: Double = 86_400,
    queued: @escaping @Sendable (String) -> Queued? = { _ in nil }, queuedUnder: @escaping @Sendable (String) -> Bool = { _ in false },
    log: @escaping @Sendable (String) -> Void
  ) {
    self.staging = staging
    self.client = client
    self.online = online
    self.verifyEvery = verifyEvery
    self.queued = queued
    self.queuedUnder = queuedUnder
    self.log = log
    store = PinStore(stagingFolder: staging.folder)
    let (pins, damaged, superseded) = store.load()
    for path in damaged { log("pins: \(path) cannot be read; set aside as \(path).damaged, that pin is forgotten") }
    for target in superseded { log("pins: the record of \(target) outlived its rename (the mount ended between the two); removed") }
    state.withLock { s in for pin in pins { s.pins[pin.target] = pin } }
    protect()
  }

  /// Brings every pin up to date now (resuming those a stop left half done), then every
  /// `seconds` (`pin_interval`), while online.
  func start(every seconds: Double) {
    guard online else { return }
    refresh(overlapping: "")
    Task { [weak self] in
      while true {
        try? await Task.sleep(for: .seconds(seconds))
        guard let self, !state.withLock({ $0.stopped }) else { return }
        refresh(overlapping: "")
      }
    }
  }

  /// The mount ended: no pass starts, records, removes a copy or frees heap after this;
  /// `passesEnded` waits for those still running to give up.
  func stop() {
    let unsaved = state.withLock { s in
      s.stopped = true
      defer { s.unsaved = [] }
      return s.unsaved.compactMap { s.pins[$0] }
    }
    for pin in unsaved { save(pin) }
    changed.signal()
  }

  /// Returns once no pass runs (after `stop`), or at `deadline`: the process must not end with
  /// a pass inside malloc_trim, syncfs or the staging folder (issue 55 F4: heap corruption at
  /// exit). False when a pass still ran at the deadline (it records and removes nothing).
  @discardableResult
  func passesEnded(within seconds: Double) async -> Bool {
    let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
    while true {
      let epoch = changed.epoch
      if state.withLock({ $0.passes.isEmpty }) { return true }
      if ContinuousClock.now >= deadline { return false }
      await changed.wait(after: epoch, until: deadline)
    }
  }

  /// A rename through the mount is about to queue its moves (`renamed` follows when it worked,
  /// `renameEnded` in every case). Until it ends, passes of the pins that `source` or `target`
  /// (full object names, a folder's ending in "/") overlap record nothing: the queue's moves
  /// make the old names gone, for the queue and then the bucket, before the pins follow, and a
  /// pass then dropped every copy the rename was to carry (issue 55 F1). The token is
  /// `renameEnded`'s.
  func renameStarting(from source: String, to target: String) -> UInt64 {
    state.withLock { s in
      s.nextRename &+= 1
      s.renamesUnderway[s.nextRename] = (source, target)
      Self.markRename(&s, source, target)
      return s.nextRename
    }
  }

  /// A rename that `renameStarting` announced is over (followed or failed): the passes that gave
  /// up for it run again, once no other rename underway overlaps their pin.
  func renameEnded(_ token: UInt64) {
    let again = state.withLock { s -> [ObjectName] in
      guard let (source, target) = s.renamesUnderway.removeValue(forKey: token) else { return [] }
      Self.markRename(&s, source, target)
      let free = s.abandoned.filter { pin in s.pins[pin].map { !Self.renameUnderway(s, over: $0) } ?? true }
      s.abandoned.subtract(free)
      return Array(free)
    }
    for target in again { schedule(target) }
  }

  private static func markRename(_ s: inout State, _ source: String, _ target: String) {
    for pin in s.pins.values where pin.overlaps(source) || pin.overlaps(target) { s.renameMarks[pin.target, default: 0] &+= 1 }
  }

  private static func renameUnderway(_ s: State, over pin: Pin) -> Bool {
    s.renamesUnderway.values.contains { pin.overlaps($0.source) || pin.overlaps($0.target) }
  }

  /// Whether the pass over `target` that began at rename epoch `epoch` may record what it found:
  /// not after `stop`, nor when the pin is gone, nor when a rename started since it began (it may
  /// have read the bucket half renamed; it runs again once the renames end).
  private func mayRecord(_ target: ObjectName, since mark: UInt64) -> Verdict {
    state.withLock { s in
      guard !s.stopped, let pin = s.pins[target] else { return .stop }
      let underway = Self.renameUnderway(s, over: pin)
      guard underway || (s.renameMarks[target] ?? 0) != mark else { return .record }
      if underway {
        s.abandoned.insert(target)
      } else {
        s.passes[target] = true
      }
      return .stop
    }
  }

  // MARK: pin and unpin

  /// Pins `target` (a full object name, or a folder's prefix ending in "/"): it is checked and
  /// staged in the background; `checked` waits for the check.
  func pin(_ target: ObjectName) {
    let isNew = state.withLock { s -> Bool in
      if let pin = s.pins[target], !pin.isRefused { return false }
      s.pins[target] = Pin(target: target, phase: .checking, tree: [:])
      return true
    }
    changed.signal()
    if isNew { log("pin: \(target.string.isEmpty ? "the bucket" : target) asked for") }
    guard online else {
      // Nothing can be listed: the pin is recorded, and the next online mount stages it.
      finishCheck(target) { $0.problem = "offline: staged when the mount is online" }
      if let pin = state.withLock({ $0.pins[target] }) { save(pin) }
      return
    }
    schedule(target)
  }

  /// The pin of `target` once its first check is done (nil: not pinned).
  func checked(_ target: ObjectName) async -> Pin? {
    while true {
      let epoch = changed.epoch
      guard let pin = state.withLock({ $0.pins[target] }), case .checking = pin.phase else {
        return state.withLock { $0.pins[target] }
      }
      await changed.wait(after: epoch, until: nil)
    }
  }

  /// Returns once a pin changed, or after `seconds`.
  func waitForChange(within seconds: Double) async {
    let epoch = changed.epoch
    await changed.wait(after: epoch, until: .now + .milliseconds(Int(seconds * 1000)))
  }

  /// Unpins `target`: its copies stay as ordinary staged copies, evicted when room is needed.
  /// False when it was not pinned.
  @discardableResult
  func unpin(_ target: ObjectName) -> Bool {
    let removed = state.withLock { s -> Bool in
      s.incoming.removeValue(forKey: target)
      return s.pins.removeValue(forKey: target) != nil
    }
    guard removed else { return false }
    changed.signal()
    records.withLock { _ in store.remove(target) }
    protect()
    staging.evictIfNeeded()
    log("unpin: \(target.string.isEmpty ? "the bucket" : target)")
    return true
  }

  // MARK: renames

  /// A rename made through the mount, from `source` to `target` (full object names; a
  /// folder's end in "/"): the pins follow it (`PinRename`). A pin of the name, or of a folder
  /// under it, is the pin of the new name, recorded so; what the trees held under the name is
  /// held under the new one, and its copy is carried over (a hard link), so that it stays kept
  /// and shows offline where the mount shows it, before the rename reaches the server and
  /// after. The objects the server makes there are new generations of the same bytes; the pass
  /// that lists them takes the carried copies for them (`StagingArea.adopt`), fetching nothing.
  func renamed(from source: String, to target: String) {
    let rename = PinRename(source: source, target: target)
    // Carried before the pins change: the old copies stay kept until the new ones are.
    let planned = state.withLock { s in s.pins.values.compactMap { rename.apply(to: $0) } }
    var carried: [PinRename.Carried] = []
    for file in planned.flatMap(\.carried)
    where staging.adopt(file.to, metadata: file.metadata, from: file.from, generation: file.metadata.generation) {
      carried.append(file)
    }
    let changes = state.withLock { s -> [(old: ObjectName, pin: Pin)] in
      let changes = s.pins.values.compactMap { pin in rename.apply(to: pin).map { (pin.target, $0.pin) } }
      for (old, pin) in changes {
        s.renameMarks[old, default: 0] &+= 1
        s.renameMarks[pin.target, default: 0] &+= 1
      }
      for (old, _) in changes {
        s.pins.removeValue(forKey: old)
        // A pass over the old name finds no pin and stops; the new one gets its own.
        s.incoming.removeValue(forKey: old)
      }
      for (old, pin) in changes {
        s.pins[pin.target] = pin
        if s.verifyWanted.remove(old) != nil { s.verifyWanted.insert(pin.target) }
      }
      return changes
    }
    guard !changes.isEmpty else { return }
    changed.signal()
    protect()
    // Kept by no pin now: the old names' copies would show offline as files the mount has not.
    for file in carried { staging.removeUnused(file.from, generation: file.metadata.generation) }
    for (old, pin) in changes {
      // The new record names the old one, which a stop between the two leaves for `load` to remove.
      save(pin, following: old == pin.target ? nil : old)
      if old != pin.target {
        records.withLock { _ in if state.withLock({ $0.pins[old] == nil }) { store.remove(old) } }
        log("pin: \(old.string.isEmpty ? "the bucket" : old.string) is \(pin.target) now (renamed)")
      }
    }
    // Brought up to date at once: a rename on the server (folders.rename) is there now; one the
    // queue carries out keeps its names (`queued`) until each lands, and its landing asks again.
    for (_, pin) in changes where !pin.isRefused { schedule(pin.target) }
  }

  /// The renames the write-back queue still holds (full names: old, new), as a mount starting
  /// finds them: a pin whose every file is being moved under one new name follows, as it would
  /// have at the rename. A daemon killed inside the rename call, after the queue's frame and
  /// before the pin's record, left the pin on the old name (kept 0/0) and the new folder
  /// unpinned, its copies unprotected.
  func followQueued(renames: [(from: String, to: String)]) {
    guard !renames.isEmpty else { return }
    var moves: [ObjectName: String] = [:]
    for (from, to) in renames { moves[ObjectName(from)] = to }
    let follows = state.withLock { s -> [(String, String)] in
      s.pins.values.compactMap { pin -> (String, String)? in
        let target = pin.target.string
        guard pin.isFolder else { return moves[pin.target].map { (target, $0) } }
        let files = Pin.files(of: pin.tree)
        guard !files.isEmpty else { return nil }
        var newPrefix: String?
        for file in files {
          let rest = file.name.droppingBytes(target.utf8.count)
          guard let to = moves[ObjectName(file.name)], to.utf8.count >= rest.utf8.count, to.hasByteSuffix(rest) else { return nil }
          let prefix = String(decoding: Array(to.utf8).dropLast(rest.utf8.count), as: UTF8.self)
          guard newPrefix == nil || ObjectName.sameBytes(newPrefix!, prefix) else { return nil }
          newPrefix = prefix
        }
        guard let newPrefix, newPrefix.endsWithSlash || newPrefix.isEmpty, !ObjectName.sameBytes(newPrefix, target) else { return nil }
        return (target, newPrefix)
      }
    }
    for (from, to) in follows {
      log("pin: \(from) follows the rename to \(to) the queue still holds (the mount ended before the pin did)")
      renamed(from: from, to: to)
    }
  }

  // MARK: what is pinned

  /// Every pin, sorted by target.
  var pins: [Pin] { state.withLock { Array($0.pins.values) }.sorted { $0.target < $1.target } }

  /// Changes with every change of a pin: what is made of `pinnedObjects` holds until then.
  var version: UInt64 { state.withLock { $0.version } }

  /// The pin of exactly `target`, if any.
  func pin(for target: ObjectName) -> Pin? { state.withLock { $0.pins[target] } }

  /// The pin that holds object `name`, if any.
  func pin(holding name: String) -> Pin? { state.withLock { s in s.pins.values.first { !$0.isRefused && $0.holds(name) } } }

  /// Whether a pin holds folder `prefix` (its full name, ending in "/"; "" for the bucket):
  /// nil when none does; true when one that does has its tree as a whole listing
  /// (`Pin.listedWhole`), false when the pins that do hold only part of it.
  func holdsWhole(folder prefix: String) -> Bool? {
    state.withLock { s in
      let holding = s.pins.values.filter { !$0.isRefused && $0.isFolder && $0.holds(prefix) }
      return holding.isEmpty ? nil : holding.contains { $0.listedWhole }
    }
  }

  /// Every object the pins' trees hold (folder placeholders too), by full name: what an offline
  /// mount shows of them. The newest version when two pins list one name.
  func pinnedObjects() -> [ObjectName: StorageMetadata] {
    state.withLock { s in
      var out: [ObjectName: StorageMetadata] = [:]
      for pin in s.pins.values {
        for (name, m) in pin.tree where (out[name]?.generation ?? -1) < m.generation { out[name] = m }
      }
      return out
    }
  }

  /// Object `name` as a pin's tree last listed it (the newest, when two pins list it).
  func pinnedObject(_ name: String) -> StorageMetadata? {
    state.withLock { s in
      s.pins.values.compactMap { $0.tree[ObjectName(name)] }.max { $0.generation < $1.generation }
    }
  }

  /// How many of the pin's files have a complete copy, and their bytes.
  func kept(_ pin: Pin) -> (files: Int, bytes: Int64) {
    var files = 0
    var bytes: Int64 = 0
    for (name, m) in pin.files where staging.status(name, generation: m.generation, size: m.size).isComplete {
      files += 1
      bytes += m.size
    }
    return (files, bytes)
  }

  // MARK: bringing pins up to date

  /// Every pin that overlaps `path` (a full object name; a folder's ends in "/"; "" is all) is
  /// brought up to date: the mount learned that something there may have changed.
  /// With `verify` (`refresh`, SIGHUP: someone says the bucket changed) the passes ask every
  /// object's metadata where the listing gives none (v0).
  func refresh(overlapping path: String, verify: Bool = false) {
    guard online else { return }
    let targets = state.withLock { s in
      let targets = s.pins.values.filter { !$0.isRefused && $0.overlaps(path) }.map(\.target)
      if verify { s.verifyWanted.formUnion(targets) }
      return targets
    }
    for target in targets { schedule(target) }
  }

  /// The mount learned object `name`'s metadata (a lookup, a listing): when a pin keeps
  /// another generation of it, the next pass asks for it, though a v0 listing would not tell.
  func noticed(_ name: String, _ metadata: StorageMetadata) {
    guard online, !state.withLock({ $0.stopped }) else { return }
    let key = ObjectName(name)
    // The same bytes as a new generation (a move or copy this mount made has landed): the kept
    // copy serves it, and the tree says so now, not at a pass that may come after the mount is
    // gone (an offline rename then named a generation the bucket no longer had, and was refused).
    // Claimed (`adopting`) before the copy is made and until the tree names it: a pass ending in
    // between handed the staging area a kept set without it and removed it as kept by no pin,
    // then the tree named it (offline, ENOENT for that file until an online pass fetched it).
    let claim = state.withLock { s -> (target: ObjectName, old: StorageMetadata)? in
      guard s.adopting[key] == nil, let pin = s.pins.values.first(where: { !$0.isRefused && $0.tree[key] != nil }),
        let old = pin.tree[key], old.generation < metadata.generation
      else { return nil }
      s.adopting[key] = (old, metadata)
      return (pin.target, old)
    }
    if let (target, old) = claim {
      staging.addPinned(name, generation: metadata.generation, size: metadata.size)
      let adopted = staging.adopt(name, metadata: metadata, from: name, generation: old.generation)
      whileAdopting.value?(key)
      let (named, late) = state.withLock { s -> (Bool, Pin?) in
        s.adopting.removeValue(forKey: key)
        // Generations only grow: a pass may have put this one, or a newer, meanwhile.
        guard adopted, var pin = s.pins[target], let last = pin.tree[key], last.generation < metadata.generation else { return (false, nil) }
        pin.tree[key] = metadata
        s.pins[target] = pin
        s.unsaved.insert(target)
        // Begun before the stop, named after it: the stop's record did not have it, and a pass
        // may already have removed the older copy the record named.
        return (true, s.stopped ? pin : nil)
      }
      if let late { save(late) }
      if named {
        changed.signal()
        return
      }
    }
    let target = state.withLock { s -> ObjectName? in
      guard let pin = s.pins.values.first(where: { !$0.isRefused && $0.tree[key] != nil }),
        pin.tree[key]?.generation != metadata.generation, !s.noticed.contains(key)
      else { return nil }
      s.noticed.insert(key)
      return pin.target
    }
    if let target { schedule(target) }
  }

  /// What the passes cost so far.
  var passTotals: PassTotals { state.withLock { $0.totals } }

  /// Runs passes over `target` until no change asks for another.
  private func schedule(_ target: ObjectName) {
    let start = state.withLock { s -> Bool in
      guard s.pins[target] != nil, !s.stopped else { return false }
      if s.passes[target] != nil {
        s.passes[target] = true
        return false
      }
      s.passes[target] = false
      return true
    }
    guard start else { return }
    Task {
      while true {
        await pass(target)
        let again = state.withLock { s -> Bool in
          let again = s.passes[target] == true && s.pins[target] != nil && !s.stopped
          s.passes[target] = again ? false : nil
          return again
        }
        if !again {
          // `passesEnded` waits for this.
          changed.signal()
          return
        }
      }
    }
  }

  /// Lists the pin's tree, checks it fits, stages what is missing, and records the result.
  private func pass(_ target: ObjectName) async {
    guard let (before, renameMark) = state.withLock({ s in s.pins[target].map { ($0, s.renameMarks[target] ?? 0) } }), !before.isRefused,
      !state.withLock({ $0.stopped })
    else { return }
    let firstCheck: Bool
    if case .checking = before.phase { firstCheck = true } else { firstCheck = false }
    // Never listed whole and kept: a pin made offline (recorded unchecked) or one a stop left
    // in its first staging. One that does not fit is refused, as at its first check; only a
    // pin that was kept once stays, as last listed, when it no longer fits.
    let neverKept = firstCheck || before.lastRefreshed == nil
    // What a listing without metadata (v0) takes as current: the tree as last listed, less the
    // names the mount saw change; nothing when this pass verifies.
    var (verify, known) = state.withLock { s -> (Bool, [ObjectName: StorageMetadata]) in
      let due = verifyEvery > 0 && (before.lastVerified.map { Date().timeIntervalSince($0) >= verifyEvery } ?? true)
      let verify = neverKept || due || s.verifyWanted.remove(target) != nil
      guard !verify else { return (true, [:]) }
      var known = before.tree
      for name in s.noticed where known.removeValue(forKey: name) != nil { s.noticed.remove(name) }
      return (false, known)
    }
    if !verify, !client.listsAttributes { known = knownStillStaged(known, of: before) }
    // Names the queue is still putting there, asked before the listing is read, never after: a
    // change that lands in between is then in the listing or here (asked after, it was in
    // neither, and the pass dropped the copy a rename had carried and fetched it again).
    let putting = queuedUnder(target.string) ? (state.withLock { $0.pins[target]?.tree } ?? before.tree).filter { queued($0.key.string) == .version } : [:]
    var tree: [ObjectName: StorageMetadata]
    let walked: TreeWalk.Walked
    do throws(BucketError) {
      walked = try await TreeWalk.objects(under: target.string, client: client, known: known)
      tree = walked.tree
    } catch {
      let problem = "cannot list it: \(error.detail)"
      log("pin \(target): \(problem)")
      if firstCheck { return refuse(target, problem) }
      update(target) { $0.problem = problem }
      return
    }
    // As the mount shows it, where its queued changes have not landed (`queued`).
    for (name, m) in putting where tree[name] == nil { tree[name] = m }
    if queuedUnder(target.string) {
      for name in Array(tree.keys) where queued(name.string) == .deleted { tree.removeValue(forKey: name) }
    }
    if let refusal = roomRefusal(target, tree) {
      log("pin \(target): \(refusal)")
      if neverKept { return refuse(target, refusal) }
      update(target) { $0.problem = refusal + "; kept as last listed" }
      return
    }
    let files = Pin.files(of: tree)
    let unchanged = Self.sameVersions(tree, before.tree)
    // The common pass of a kept pin: nothing changed and every copy is there. Nothing to stage,
    // record or protect again; only the time is noted (in memory: the record's tree holds).
    if unchanged, !firstCheck, !neverKept, case .kept = before.phase, before.problem == nil, before.failures.isEmpty,
      files.allSatisfy({ staging.status($0.name, generation: $0.metadata.generation, size: $0.metadata.size).isComplete })
    {
      guard mayRecord(target, since: renameMark) == .record else { return }
      let now = Date()
      update(target) { pin in
        pin.lastRefreshed = now
        if verify { pin.lastVerified = now }
      }
      if verify, let pin = state.withLock({ $0.pins[target] }) { save(pin) }
      count(walked, fetched: 0)
      return
    }
    var progress = Pin.Progress(files: files.count, bytes: files.reduce(0) { $0 + $1.metadata.size })
    var missing: [(name: String, metadata: StorageMetadata)] = []
    for file in files {
      if staging.status(file.name, generation: file.metadata.generation, size: file.metadata.size).isComplete {
        progress.filesDone += 1
        progress.bytesDone += file.metadata.size
      } else if putting[ObjectName(file.name)] == nil || walked.tree[ObjectName(file.name)] != nil {
        missing.append(file)
      }
      // A name the queue is still putting there, with no copy: the server has no such version
      // to fetch (a rename's source copy went with a kill; it is not "gone"). Its landing passes
      // again, and the listing then names the version to fetch.
    }
    // Kept beside the pin's tree only while it is pinned: an unpin during the check or the
    // staging removes it, and nothing here brings it back.
    guard state.withLock({ s -> Bool in
      guard s.pins[target] != nil else { return false }
      s.incoming[target] = tree
      return true
    }) else { return }
    protect()
    // A new version of a name whose last one the pin kept, with the same bytes (what the server
    // made of a rename, or a rewrite of the same bytes): that copy serves it, nothing is fetched.
    // The pin's tree as it is now: a rename during this pass re-keyed it and carried its copies.
    let kept = state.withLock { $0.pins[target]?.tree } ?? before.tree
    missing.removeAll { file in
      guard let last = kept[ObjectName(file.name)] ?? before.tree[ObjectName(file.name)], last.generation != file.metadata.generation,
        staging.adopt(file.name, metadata: file.metadata, from: file.name, generation: last.generation)
      else { return false }
      progress.filesDone += 1
      progress.bytesDone += file.metadata.size
      return true
    }
    let listedAt = Date()
    func start(_ pin: inout Pin) {
      pin.phase = .staging(progress)
      pin.problem = nil
      // Never kept: no older tree to keep readable meanwhile. The tree as listed is the pin's
      // (and its record's) from now on, so that a stop in this staging leaves the folder whole
      // as listed, not the part of it staged so far (issue 55 F5: offline `p` showed 3 of its 4
      // folders and 8 of 20 files in one, exit 0, and the status said "offline 0/0").
      if neverKept {
        pin.tree = tree
      }
      pin.listed = listedAt
    }
    // Recorded before it shows as checked: `bucketfs pin --background` returns then, and a
    // stop right after must leave a pin the next mount resumes.
    guard mayRecord(target, since: renameMark) == .record, var started = state.withLock({ $0.pins[target] }) else {
      return dropIncoming(target)
    }
    start(&started)
    if firstCheck || !missing.isEmpty { save(started) }
    update(target, start)

    let failures = await stage(missing, for: target)
    staging.syncCopies()
    let now = Date()
    func finish(_ pin: inout Pin) {
      // A name's generations only grow: one the mount learned while this pass listed (a move
      // that landed, `noticed`) is newer than what a listing without metadata took as known.
      var merged = tree
      for (name, m) in pin.tree where (merged[name]?.generation ?? .max) < m.generation { merged[name] = m }
      pin.tree = merged
      pin.failures = failures
      pin.lastRefreshed = now
      if verify || client.listsAttributes { pin.lastVerified = now }
      pin.phase = .kept
    }
    // Recorded before it shows as kept: whoever saw it kept (bucketfs pin returning) may
    // unmount at once, and the next mount must find it so.
    guard mayRecord(target, since: renameMark) == .record, var finished = state.withLock({ $0.pins[target] }) else {
      return dropIncoming(target)
    }
    finish(&finished)
    save(finished)
    whileEnding.value?(target)
    update(target, finish)
    state.withLock { s in _ = s.incoming.removeValue(forKey: target) }
    protect()
    dropUnkept(finished)
    count(walked, fetched: missing.count)
    if !failures.isEmpty { log("pin \(target): \(failures.count) objects could not be staged") }
    // Never once the mount ended: malloc_trim while the process exits corrupted the heap (F4).
    if !missing.isEmpty || verify, !state.withLock({ $0.stopped }) { HeapRelease.now() }
  }

  /// The entries of `known` (what a v0 listing's names are taken to be) whose copy is still
  /// there and no newer generation of the name is staged; the others have their metadata asked.
  /// A name whose recorded generation has no copy, or a copy beside a newer one, most likely
  /// changed: a move that landed (`noticed`, a new generation of the same bytes) in a daemon
  /// killed before its record said so left the record naming the old generation and only the
  /// new one's copy. Taken as known, the pass fetched the old generation ("the object changed
  /// on the server"), removed the new copy as kept by no pin, and no later pass asked again
  /// (issue 55 F3: offline 1-5 of 60 files EIO until a verifying pass, a day later). Asking
  /// costs a request per such name, which is a changed object.
  private func knownStillStaged(_ known: [ObjectName: StorageMetadata], of pin: Pin) -> [ObjectName: StorageMetadata] {
    var newest: [ObjectName: Int64] = [:]
    for copy in staging.completeCopies(where: pin.holds) {
      let name = ObjectName(copy.name)
      newest[name] = max(newest[name] ?? copy.generation, copy.generation)
    }
    return known.filter { name, m in
      name.string.endsWithSlash
        || ((newest[name] ?? .min) <= m.generation && staging.status(name.string, generation: m.generation, size: m.size).isComplete)
    }
  }

  /// Whether `a` and `b` hold the same names at the same generations.
  private static func sameVersions(_ a: [ObjectName: StorageMetadata], _ b: [ObjectName: StorageMetadata]) -> Bool {
    a.count == b.count && a.allSatisfy { name, m in b[name]?.generation == m.generation }
  }

  /// A pass ended: what it asked of the server, for the stats.
  private func count(_ walked: TreeWalk.Walked, fetched: Int) {
    state.withLock { s in
      s.totals.passes += 1
      s.totals.lastPages = walked.pages
      s.totals.lastAsked = walked.asked
      s.totals.lastFetched = fetched
      s.totals.fetched += fetched
    }
  }

  /// Stages `files` for pin `target`, a few at a time; what failed, and why.
  private func stage(_ files: [(name: String, metadata: StorageMetadata)], for target: ObjectName) async -> [ObjectName: String] {
    await withTaskGroup(of: (String, String?).self) { group -> [ObjectName: String] in
      for file in files {
        await slots.acquire()
        // Unpinned meanwhile: the rest is not staged.
        guard state.withLock({ $0.pins[target] != nil && !$0.stopped }) else {
          slots.release()
          break
        }
        group.addTask { [self] in
          defer { slots.release() }
          let failure = await staging.stagePinned(file.name, metadata: file.metadata, client: client)
          update(target) { pin in
            guard case .staging(var progress) = pin.phase else { return }
            progress.filesDone += 1
            progress.bytesDone += file.metadata.size
            pin.phase = .staging(progress)
          }
          return (file.name, failure)
        }
      }
      var failures: [ObjectName: String] = [:]
      for await (name, failure) in group { if let failure { failures[ObjectName(name)] = failure } }
      return failures
    }
  }

  /// Why `tree` cannot be pinned beside the other pins (nil: it fits): more than `staging_size`
  /// holds, or more than the disk has free.
  private func roomRefusal(_ target: ObjectName, _ tree: [ObjectName: StorageMetadata]) -> String? {
    var others: [ObjectName: Int64] = [:]
    state.withLock { s in
      for pin in s.pins.values where pin.target != target && !pin.isRefused {
        for (name, m) in pin.files { others[ObjectName(name + "\u{0}\(m.generation)")] = m.size }
      }
    }
    let othersBytes = others.values.reduce(0, +)
    var mine: Int64 = 0
    var toFetch: Int64 = 0
    for (name, m) in Pin.files(of: tree) where others[ObjectName(name + "\u{0}\(m.generation)")] == nil {
      mine += m.size
      if !staging.status(name, generation: m.generation, size: m.size).isComplete { toFetch += m.size }
    }
    let capacity = staging.capacity
    let what = target.string.isEmpty ? "the bucket" : target
    if othersBytes + mine > capacity {
      let free = max(0, capacity - othersBytes)
      return "pinning \(what) needs \(ByteCount(mine)) but staging_size leaves \(ByteCount(free)) for it "
        + "(\(ByteCount(capacity)) in all, \(ByteCount(othersBytes)) pinned already); raise -o staging_size or unpin something"
    }
    if let disk = staging.diskFree, toFetch > disk {
      return "pinning \(what) needs \(ByteCount(toFetch)) more on the disk of \(staging.folder.path), which has \(ByteCount(disk)) free"
    }
    return nil
  }

  /// Versions of the pin's objects no pin keeps any more (replaced, or deleted from the bucket)
  /// are removed, unless open (their readers keep the old bytes; eviction takes them later).
  /// What is kept is asked after the copies are listed, never taken from the pass's own view: a
  /// copy adopted meanwhile (`noticed`) was claimed before it was made, so it is in the set.
  /// A tree that learned a newer generation since its record was written (`unsaved`) is recorded
  /// first: the older copy the record names goes only once the record names the newer one. A
  /// move that landed between a pass's record and its removals (or before a pass that records
  /// nothing) had its old copy removed while the record still named it; a `kill -9` then left a
  /// record naming a copy no longer there (issue 55 F3).
  private func dropUnkept(_ pin: Pin) {
    let copies = staging.completeCopies(where: pin.holds)
    let (keptVersions, unsaved) = state.withLock { s in
      defer { s.unsaved = [] }
      return (Self.keptVersions(s), s.unsaved.compactMap { s.pins[$0] })
    }
    for pin in unsaved { save(pin) }
    let kept = Set(keptVersions.map { ObjectName($0.name + "\u{0}\($0.generation)") })
    for copy in copies where !kept.contains(ObjectName(copy.name + "\u{0}\(copy.generation)")) {
      staging.removeUnused(copy.name, generation: copy.generation)
    }
  }

  /// Every version the pins keep: their trees', the trees passes are staging, and the copies
  /// being adopted.
  private static func keptVersions(_ s: State) -> [(name: String, generation: Int64, size: Int64)] {
    var out: [(name: String, generation: Int64, size: Int64)] = []
    for tree in s.pins.values.filter({ !$0.isRefused }).map(\.tree) + Array(s.incoming.values) {
      for (name, m) in Pin.files(of: tree) { out.append((name, m.generation, m.size)) }
    }
    for (name, a) in s.adopting {
      out.append((name.string, a.from.generation, a.from.size))
      out.append((name.string, a.to.generation, a.to.size))
    }
    return out
  }

  // MARK: state

  /// A pass over `target`, unpinned meanwhile, stops: what it was staging is kept no more.
  private func dropIncoming(_ target: ObjectName) {
    state.withLock { s in _ = s.incoming.removeValue(forKey: target) }
    protect()
    staging.evictIfNeeded()
  }

  /// The pins' copies (and those of trees being staged) are kept from eviction. Made from the
  /// state under its lock and handed to the staging area after: when the state changed
  /// meanwhile (an unpin racing a pass), it is made again, so the last one handed over is never
  /// an older state's (a pin unpinned during its check stayed kept for good).
  private func protect() {
    while true {
      let (version, objects) = state.withLock { s in (s.version, Self.keptVersions(s)) }
      staging.setPinned(objects)
      if state.withLock({ $0.version }) == version { return }
    }
  }

  /// Changes pin `target` when it is still pinned; the pin as changed.
  @discardableResult
  private func update(_ target: ObjectName, _ change: (inout Pin) -> Void) -> Pin? {
    let changedPin = state.withLock { s -> Pin? in
      guard var pin = s.pins[target] else { return nil }
      change(&pin)
      s.pins[target] = pin
      return pin
    }
    if changedPin != nil { changed.signal() }
    return changedPin
  }

  /// Refuses the pin: shown so until the mount ends, and forgotten by the next (a record made
  /// offline, or by a stop in its first staging, is removed).
  private func refuse(_ target: ObjectName, _ reason: String) {
    finishCheck(target) { $0.phase = .refused(reason) }
    records.withLock { _ in store.remove(target) }
    dropIncoming(target)
  }

  /// The pin's first check is over (`change` says how): `checked` goes on.
  private func finishCheck(_ target: ObjectName, _ change: (inout Pin) -> Void) {
    update(target) { pin in
      change(&pin)
      if case .checking = pin.phase, online == false { pin.phase = .staging(Pin.Progress()) }
    }
  }

  private func save(_ pin: Pin, following old: ObjectName? = nil) {
    do throws(FSError) {
      try records.withLock { _ throws(FSError) in
        guard let current = state.withLock({ $0.pins[pin.target] }) else { return }
        // A name's generations only grow: what the mount learned since `pin` was taken (a
        // landed move, `noticed`) is written too. A pass's record written after the stop's
        // wrote the older generation, whose copy was already gone (kept 255/300 offline).
        var pin = pin
        for (name, m) in current.tree where (pin.tree[name]?.generation ?? .max) < m.generation { pin.tree[name] = m }
        // Not when the old name was pinned again meanwhile: that record is not this one's past.
        try store.save(pin, following: old.flatMap { old in state.withLock { $0.pins[old] == nil } ? old : nil })
      }
    } catch {
      log("pin \(pin.target): cannot record it in \(store.folder.path): \(String(cString: strerror(error.errno)))")
    }
  }
}
