import Foundation
import StorageCore
import Synchronization

/// The listings of folders, by path relative to the mount root.
///
/// A listing answers for `metadata_ttl` after it was taken. After that it still answers a walk:
/// a lookup of an entry after the last one looked up (listing order: `find`, `du`, `cp -r`,
/// `ls -lR`, `tar c` go through a folder that way) renews it for another `metadata_ttl`, and so
/// does a walk going on inside one of its sub-folders, so a walk costs one listing per folder
/// however long it takes (a copy of large files, say). Anything else after `metadata_ttl` —
/// `ls`, a second look at an entry — asks the server again. A name the listing does not have is
/// answered missing for `negative_ttl` (5 s) after the listing was taken or a walk last stepped
/// through it, then asked of the server, so that an object written elsewhere shows up.
/// Bytes stay safe either way: a read is pinned to the generation its attributes name, and an
/// object replaced since gives ESTALE, never mixed bytes.
final class FolderListings: Sendable {
  /// An entry of a listing, where it stands, and the listing itself.
  struct Found {
    let entry: DirectoryEntry
    let index: Int
    let entries: [DirectoryEntry]
    /// The lookup stepped forward from the entry looked up before it (a walk in listing order).
    var walking = false
  }

  enum Answer {
    case found(Found)
    /// Not in a current listing: no such name.
    case absent
    /// No current listing answers: ask the server.
    case unknown
    /// Not in a current listing whose word on absent names has passed `negative_ttl` (of
    /// `count` entries): a new listing of the folder can confirm it (`confirmAbsences`).
    case absenceToConfirm(count: Int)
  }

  private struct Listing {
    var entries: [DirectoryEntry]
    /// What the listing holds, as `FolderListings.bytes(of:)` counts it.
    var bytes: Int
    var byName: NameIndex
    /// Attributes fetched after the listing was taken (a v0 listing has names only).
    var attributes: [ObjectName: ObjectSummary] = [:]
    var expires: Double
    /// Until when a name the listing lacks is answered missing without asking.
    var absentUntil: Double
    /// The last entry looked up in listing order; -1 before the first.
    var cursor = -1
    /// The last sub-folder opened (opendir); -1 before the first. A walk whose kernel holds the
    /// entries from readdirplus opens folders without looking them up.
    var opened = -1
    var order: UInt64
  }

  private struct State {
    var listings: [ObjectName: Listing] = [:]
    var order: UInt64 = 0
    /// What all listings hold, counted as `bytes(of:)` does.
    var bytes = 0
    var evicted = 0
    /// How many of this mount's changes reached the bucket in each folder (`update`, `remove`).
    var changes: [ObjectName: UInt64] = [:]
    /// The last entries `update` gave each folder, with the count each made: a listing fetched
    /// while they landed is kept with them put in (`store`), instead of fetched again. A folder
    /// changed wholesale (`remove`) has none, and such a listing is not kept.
    var landed: [ObjectName: [Landed]] = [:]
  }

  private struct Landed {
    var change: UInt64
    var name: String
    var entry: DirectoryEntry?
  }

  /// How many landed entries are kept a folder, and for how many folders: a folder past them
  /// is listed again, as any whose changes are not known.
  static let landedPerFolder = 128
  static let foldersWithLanded = 32

  private let state = Mutex(State())
  /// Told the folder and entry names of each listing evicted (after the lock).
  private let evictionListener = Hook<@Sendable (String, [String]) -> Void>()
  /// What else the budget pays for that evicting listings gives back: the inodes the kernel was
  /// handed for their entries (it forgets them once told; see `onEviction`).
  private let heldElsewhere = Hook<@Sendable () -> Int>()
  /// What one entry's inode costs, as `heldElsewhere` counts it.
  static let bytesPerInode = 256

  func countAlso(_ bytes: @escaping @Sendable () -> Int) { heldElsewhere.set(bytes) }

  func onEviction(_ listener: @escaping @Sendable (_ dir: String, _ names: [String]) -> Void) {
    evictionListener.set(listener)
  }
  let ttl: Double
  let negativeTTL: Double
  let capacity: Int
  /// Bytes the listings may hold together (their share of `metadata_cache_size`): past it, the
  /// least recently used go first. A listing a readdir has open is its handle's own copy, so an
  /// eviction never takes entries from under it.
  let budget: Int
  private let clock: @Sendable () -> Double

  init(
    ttl: Double, negativeTTL: Double? = nil, capacity: Int, budget: Int = .max,
    clock: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 }
  ) {
    self.ttl = ttl
    self.negativeTTL = negativeTTL ?? ttl
    self.capacity = capacity
    self.budget = budget
    self.clock = clock
  }

  /// Roughly what a listing of `entries` holds: each entry inline, its place in the name index,
  /// and the names too long to live inside their strings.
  static func bytes(of entries: [DirectoryEntry]) -> Int {
    var n = entries.count * (MemoryLayout<DirectoryEntry>.stride + 4)
    for e in entries {
      if e.name.utf8.count > 15 { n += 32 + e.name.utf8.count }
      if let o = e.objectName, o.utf8.count > 15 { n += 32 + o.utf8.count }
      n += e.summary?.heapBytes ?? 0
    }
    return n
  }

  /// Entries and bytes the listings hold, and how many listings were evicted to stay within
  /// the budget.
  var totals: (entries: Int, bytes: Int, listings: Int, evicted: Int) {
    state.withLock { s in (s.listings.values.reduce(0) { $0 + $1.entries.count }, s.bytes, s.listings.count, s.evicted) }
  }

  /// A mark to pass to `store` for a listing about to be fetched.
  func changeMark(_ dir: String) -> UInt64 { state.withLock { $0.changes[ObjectName(dir)] ?? 0 } }

  /// Keeps `entries` as folder `dir`'s listing from now on (a walk starts over). With `fetchedAt`
  /// (a `changeMark` taken before the listing was asked for), this mount's changes that reached
  /// the folder since are put in: the server may have answered before they landed, and a
  /// listing kept without them would miss a file just written (or show one just deleted).
  /// False, and nothing kept, when those changes are not all known (checked and kept under one
  /// lock, so no change slips in between).
  @discardableResult
  func store(_ dir: String, _ entries: [DirectoryEntry], fetchedAt mark: UInt64? = nil) -> Bool {
    let byName = NameIndex(entries)
    let now = clock()
    var evicted: [(String, [DirectoryEntry])] = []
    let elsewhere = heldElsewhere.value?() ?? 0
    let stored = state.withLock { s in
      var listing = Listing(
        entries: entries, bytes: 0, byName: byName, expires: now + ttl, absentUntil: now + negativeTTL, order: s.order + 1)
      if let mark, case let current = s.changes[ObjectName(dir)] ?? 0, current != mark {
        guard let landed = s.landed[ObjectName(dir)], let first = landed.first, first.change <= mark + 1 else { return false }
        for l in landed where l.change > mark { Self.apply(l.name, l.entry, to: &listing) }
      }
      listing.bytes = Self.bytes(of: listing.entries)
      s.order += 1
      if let old = s.listings[ObjectName(dir)] { s.bytes -= old.bytes }
      s.listings[ObjectName(dir)] = listing
      s.bytes += listing.bytes
      if s.listings.count > capacity || s.bytes + elsewhere > budget {
        evicted = Self.evict(&s, keeping: dir, capacity: capacity, budget: budget, elsewhere: elsewhere)
      }
      return true
    }
    if !evicted.isEmpty, let tell = evictionListener.value {
      for (folder, gone) in evicted { tell(folder, gone.map(\.name)) }
    }
    return stored
  }

  /// The least recently used listings out until the count and the bytes are within bounds
  /// (never `keeping`, the one just stored); in one sort, so that a full map does not sort on
  /// every insert: a tenth of the count at least.
  private static func evict(_ s: inout State, keeping: String, capacity: Int, budget: Int, elsewhere: Int)
    -> [(String, [DirectoryEntry])]
  {
    let kept = ObjectName(keeping)
    let oldest = s.listings.filter { $0.key != kept }.sorted { $0.value.order < $1.value.order }
    var dropCount = s.listings.count > capacity ? max(1, capacity / 10) : 0
    var gone: [(String, [DirectoryEntry])] = []
    // The inodes of an evicted listing's files are given back too, once the kernel forgets them.
    var others = elsewhere
    for (k, l) in oldest {
      guard dropCount > 0 || s.bytes + others > budget else { break }
      s.listings.removeValue(forKey: k)
      s.bytes -= l.bytes
      s.evicted += 1
      dropCount -= 1
      others = max(0, others - l.entries.count * bytesPerInode)
      gone.append((k.string, l.entries))
    }
    return gone
  }

  /// Forgets the listings of folder `path` and of every folder under it (`bucketfs refresh`).
  func forget(under path: String) {
    state.withLock { s in
      for dir in s.listings.keys where Namespace.isInside(dir.string, path) {
        if let l = s.listings.removeValue(forKey: dir) { s.bytes -= l.bytes }
      }
    }
  }

  /// Folder `dir`'s last listing from the server however old: what the mount knows of it when
  /// the server does not answer.
  func lastKnown(_ dir: String) -> [DirectoryEntry]? {
    state.withLock { s in s.listings[ObjectName(dir)].map { l in l.entries.indices.map { Self.filled(l, $0) } } }
  }

  /// Folder `dir`'s listing while it is current (no walk step is taken).
  func current(_ dir: String) -> [DirectoryEntry]? {
    let now = clock()
    return state.withLock { s in
      guard let l = s.listings[ObjectName(dir)], now <= l.expires else { return nil }
      Self.touch(dir, &s)
      return l.entries
    }
  }

  /// `dir`'s listing was used: the last the budget evicts.
  private static func touch(_ dir: String, _ s: inout State) {
    s.order += 1
    s.listings[ObjectName(dir)]?.order = s.order
  }

  /// Where `name` stands in folder `dir`'s current listing (no walk step is taken).
  func position(dir: String, name: String) -> Found? {
    let now = clock()
    return state.withLock { s in
      guard let l = s.listings[ObjectName(dir)], now <= l.expires, let i = Self.index(of: name, in: l) else { return nil }
      return Found(entry: Self.filled(l, i), index: i, entries: l.entries)
    }
  }

  /// What `name` in folder `dir` is, as a lookup asks: a step past the last entry looked up
  /// renews the listing and those of the folders the walk is inside.
  func lookup(dir: String, name: String) -> Answer {
    let now = clock()
    return state.withLock { s in
      guard var l = s.listings[ObjectName(dir)] else { return .unknown }
      let fresh = now <= l.expires
      guard let i = Self.index(of: name, in: l) else {
        guard fresh else { return .unknown }
        return now <= l.absentUntil ? .absent : .absenceToConfirm(count: l.entries.count)
      }
      let walking = i > l.cursor && l.cursor >= 0
      // With no time to live (metadata_ttl=0: ask every time) a walk keeps nothing either.
      if i > l.cursor && (fresh || ttl > 0) {
        l.cursor = i
        l.expires = now + ttl
        l.absentUntil = now + negativeTTL
        s.order += 1
        l.order = s.order
        s.listings[ObjectName(dir)] = l
        Self.renewAncestors(of: dir, in: &s, until: now + ttl)
      } else if !fresh {
        return .unknown
      }
      return .found(Found(entry: Self.filled(l, i), index: i, entries: l.entries, walking: walking))
    }
  }

  /// Sub-folder `name` of folder `dir` is being opened: where it stands in `dir`'s current
  /// listing, `walking` when it comes after the sub-folder opened before it.
  func opened(dir: String, name: String) -> Found? {
    let now = clock()
    return state.withLock { s in
      guard let l = s.listings[ObjectName(dir)], now <= l.expires, let i = Self.index(of: name, in: l) else { return nil }
      let walking = i > l.opened && l.opened >= 0
      s.listings[ObjectName(dir)]!.opened = i
      // A walk inside the folder uses it, though the kernel answers its lookups itself.
      Self.touch(dir, &s)
      return Found(entry: Self.filled(l, i), index: i, entries: l.entries, walking: walking)
    }
  }

  /// A new listing of folder `dir` from the server: when it holds no name the kept listing
  /// lacks, the kept one (which this mount's own changes keep up to date) answers absent names
  /// for `negative_ttl` again; true then. A folder this mount is filling would otherwise ask the
  /// server about every new name once the window passed, and a fresh listing cannot simply be
  /// kept instead, since this mount's changes land in it while it is fetched. A name another
  /// writer made is in the new listing and not the kept one: false, and the names are asked for.
  func confirmAbsences(_ dir: String, from listed: [DirectoryEntry], ours: Set<ObjectName>) -> Bool {
    let now = clock()
    return state.withLock { s in
      guard let l = s.listings[ObjectName(dir)], now <= l.expires else { return false }
      // A name of this mount's whose change is still queued may be in the bucket before its
      // answer is in the kept listing.
      guard listed.allSatisfy({ Self.index(of: $0.name, in: l) != nil || ours.contains(ObjectName($0.name)) }) else { return false }
      s.listings[ObjectName(dir)]!.absentUntil = now + negativeTTL
      return true
    }
  }

  /// Attributes of object `objectName` (in folder `dir`) fetched after the listing: kept with
  /// the listing, so that a walk does not fetch them twice.
  func fill(dir: String, objectName: String, _ metadata: StorageMetadata) {
    state.withLock { s in
      guard s.listings[ObjectName(dir)] != nil else { return }
      s.listings[ObjectName(dir)]!.attributes[ObjectName(objectName)] = ObjectSummary(metadata, path: objectName)
    }
  }

  /// The attributes a current listing holds for object `objectName` (relative to the mount
  /// prefix), found under its own name in its folder; nil when none does.
  func summary(ofObject objectName: String) -> ObjectSummary? {
    let (dir, name) = Namespace.split(objectName)
    let now = clock()
    return state.withLock { s in
      guard let l = s.listings[ObjectName(dir)], now <= l.expires, let i = Self.index(of: name, in: l) else { return nil }
      let e = l.entries[i]
      guard let object = e.objectName, Namespace.sameBytes(object, objectName) else { return nil }
      return e.summary ?? l.attributes[ObjectName(object)]
    }
  }

  /// The name folder `dir`'s kept listing shows file `name` (object `objectName`) under: its
  /// own, or the alias it has beside a folder of that name; nil when a folder has the name and
  /// no alias shows the object (the listing must be taken again to give it one).
  func shownName(dir: String, name: String, objectName: String) -> String? {
    state.withLock { s in
      guard let l = s.listings[ObjectName(dir)], let i = Self.index(of: name, in: l), l.entries[i].isDirectory else { return name }
      for n in 0..<1000 {
        let alias = FolderNames.alias(name, n)
        guard let j = Self.index(of: alias, in: l) else { return nil }
        if l.entries[j].objectName == objectName { return alias }
      }
      return nil
    }
  }

  /// A change this mount made reached the bucket: the listing shows it without listing again
  /// (`entry` nil: `name` is gone).
  func update(_ dir: String, name: String, entry: DirectoryEntry?) {
    state.withLock { s in
      s.changes[ObjectName(dir), default: 0] += 1
      Self.note(Landed(change: s.changes[ObjectName(dir)]!, name: name, entry: entry), in: dir, &s)
      guard s.listings[ObjectName(dir)] != nil else { return }
      let before = s.listings[ObjectName(dir)]!.entries.count
      // In place: a copy of the listing out of the map and back would copy its entries and
      // positions on every change, which made a folder filled through the mount quadratic.
      Self.apply(name, entry, to: &s.listings[ObjectName(dir)]!)
      let grown = (s.listings[ObjectName(dir)]!.entries.count - before) * (MemoryLayout<DirectoryEntry>.stride + 4)
      s.listings[ObjectName(dir)]!.bytes += grown
      s.bytes += grown
    }
  }

  private static func apply(_ name: String, _ entry: DirectoryEntry?, to l: inout Listing) {
    if let i = index(of: name, in: l) {
      if let entry {
        l.entries[i] = entry
      } else {
        l.entries.remove(at: i)
        l.byName.remove(i)
        if l.cursor >= i { l.cursor -= 1 }
        if l.opened >= i { l.opened -= 1 }
      }
    } else if let entry {
      l.entries.append(entry)
      l.byName.add(l.entries.count - 1, in: l.entries)
    }
  }

  /// Keeps `landed` for a listing of `dir` on its way (see `store`), within the bounds.
  private static func note(_ landed: Landed, in dir: String, _ s: inout State) {
    if s.landed[ObjectName(dir)] == nil && s.landed.count >= foldersWithLanded { s.landed.removeAll() }
    s.landed[ObjectName(dir), default: []].append(landed)
    if s.landed[ObjectName(dir)]!.count > landedPerFolder { s.landed[ObjectName(dir)]!.removeFirst(s.landed[ObjectName(dir)]!.count / 2) }
  }

  /// Folder `dir` changed (through this mount): its next use lists it again.
  func remove(_ dir: String) {
    state.withLock { s in
      s.changes[ObjectName(dir), default: 0] += 1
      s.landed[ObjectName(dir)] = nil
      if let l = s.listings.removeValue(forKey: ObjectName(dir)) { s.bytes -= l.bytes }
    }
  }

  /// Where `name` stands in `l`, by its bytes (two canonically equal spellings, which Swift's
  /// `==` takes for one, are two objects in the bucket).
  private static func index(of name: String, in l: Listing) -> Int? { l.byName.find(name, in: l.entries) }

  private static func filled(_ l: Listing, _ i: Int) -> DirectoryEntry {
    var e = l.entries[i]
    guard e.summary == nil, let name = e.objectName, let summary = l.attributes[ObjectName(name)] else { return e }
    e.summary = summary
    return e
  }

  /// The walk is inside `dir`: each folder above it whose last looked-up entry is the folder the
  /// walk went into stays current too.
  private static func renewAncestors(of dir: String, in s: inout State, until expires: Double) {
    var child = dir
    while !child.isEmpty {
      let (parent, name) = Namespace.split(child)
      guard var l = s.listings[ObjectName(parent)], l.cursor >= 0, l.cursor < l.entries.count, Namespace.sameBytes(l.entries[l.cursor].name, name) else { return }
      l.expires = max(l.expires, expires)
      s.listings[ObjectName(parent)] = l
      child = parent
    }
  }
}

/// A listing's entries in the order of their names' bytes, as places in the listing: a binary
/// search finds a name. A hash table of names took ~60 bytes an entry at its load factor; this
/// takes 4, and compares bytes, so two canonically equal spellings stay two names.
struct NameIndex {
  private var sorted: [Int32]

  init(_ entries: [DirectoryEntry]) {
    sorted = (0..<Int32(entries.count)).sorted { Self.less(entries[Int($0)].name, entries[Int($1)].name) }
  }

  static func less(_ a: String, _ b: String) -> Bool { a.utf8.lexicographicallyPrecedes(b.utf8) }

  /// The first place in `sorted` whose name is not before `name`.
  private func lowerBound(_ name: String, in entries: [DirectoryEntry]) -> Int {
    var lo = 0
    var hi = sorted.count
    while lo < hi {
      let mid = (lo + hi) / 2
      if Self.less(entries[Int(sorted[mid])].name, name) { lo = mid + 1 } else { hi = mid }
    }
    return lo
  }

  func find(_ name: String, in entries: [DirectoryEntry]) -> Int? {
    let at = lowerBound(name, in: entries)
    guard at < sorted.count, Namespace.sameBytes(entries[Int(sorted[at])].name, name) else { return nil }
    return Int(sorted[at])
  }

  /// Entry `i` (already in `entries`) is new.
  mutating func add(_ i: Int, in entries: [DirectoryEntry]) {
    sorted.insert(Int32(i), at: lowerBound(entries[i].name, in: entries))
  }

  /// Entry `i` was removed: the places after it move down by one.
  mutating func remove(_ i: Int) {
    sorted.removeAll { $0 == Int32(i) }
    for k in sorted.indices where sorted[k] > Int32(i) { sorted[k] -= 1 }
  }
}
