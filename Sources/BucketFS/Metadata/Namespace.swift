// What the mount shows where: folder listings, the attributes of files, and what a name in a
// folder is. A folder is a prefix with objects under it (or a placeholder object whose name ends
// in "/"). When an object `a` and objects under `a/` both exist, the folder keeps the name `a`
// and the object is shown as `a.object` (FolderNames). Names that cannot be file names are left
// out of listings with one log line each. Names here are relative to the mount's prefix (the
// client is a PrefixedClient); staged copies are kept under full object names.
//
// When the server cannot be reached, and on an offline mount, answers come from what the mount
// holds instead (`Namespace+WithoutServer.swift`): a folder's last listing, the pins' trees and
// the staged copies. Listings are asked for in `+ServerListings.swift` and `+StreamedListings.swift`,
// names in folders not listed probed in `+UnlistedFolders.swift`.
import Foundation
import StorageCore
import Synchronization

final class Namespace: Sendable {
  let client: any ObjectClient
  let options: MountOptions
  let staging: StagingArea?
  let log: @Sendable (String) -> Void
  let files: AttributeCache
  let missing: MissingNames
  let listings: FolderListings
  let folders: FolderObjects
  let reportedNames = Mutex<Set<ObjectName>>([])
  /// Attribute fetches in flight in the background (`prefetchAttributes`): a lookup that needs
  /// one waits for it instead of asking the server a second time.
  private let attributeFetches = Mutex<[ObjectName: Task<StorageMetadata?, Never>]>([:])
  private let attributeSlots = ReadAheadSlots(32)
  /// How many entries after a looked-up one get their attributes fetched ahead.
  static let attributeBatch = 256

  init(client: any ObjectClient, options: MountOptions, staging: StagingArea?, log: @escaping @Sendable (String) -> Void) {
    self.client = client
    self.options = options
    self.staging = staging
    self.log = log
    let ttl = options.metadataTTL
    // One budget, `metadata_cache_size`: three quarters for listings (most of what a walk
    // keeps), an eighth for attributes fetched one by one, a sixteenth for names known missing.
    let budget = options.metadataCacheSize
    missing = MissingNames(ttl: options.missTTL, capacity: max(1_000, budget / 16 / Self.bytesPerMissingName))
    listings = FolderListings(ttl: ttl, negativeTTL: options.missTTL, capacity: 20_000, budget: budget / 4 * 3)
    files = AttributeCache(ttl: ttl, capacity: max(1_000, budget / 8 / Self.bytesPerAttributes), listings: listings)
    folders = FolderObjects()
    offline = OfflineView(staging: staging, client: client)
  }

  static func join(_ dir: String, _ name: String) -> String { dir.isEmpty ? name : dir + "/" + name }

  /// What an entry of the attribute cache and of the known-missing names hold, about (the
  /// summary or flag, the key, the table's slot): for their share of the budget.
  static let bytesPerAttributes = MemoryLayout<ObjectSummary>.stride + 96
  static let bytesPerMissingName = 112

  /// What the mount keeps about names now, for the stats: entries and bytes, about.
  var heldMetadata: (entries: Int, bytes: Int, evicted: Int) {
    let l = listings.totals
    let attributes = files.count
    let absent = missing.count
    return (
      l.entries + attributes + absent, l.bytes + attributes * Self.bytesPerAttributes + absent * Self.bytesPerMissingName, l.evicted
    )
  }

  /// True when `path` is `folder` or under it ("" is the root, which holds everything).
  static func isInside(_ path: String, _ folder: String) -> Bool {
    folder.isEmpty || path == folder || (path.hasBytePrefix(folder) && path.utf8.dropFirst(folder.utf8.count).first == UInt8(ascii: "/"))
  }

  /// Drops what the mount knows of `path` and everything under it: listings, attributes and
  /// names known missing are asked of the server again.
  func forget(under path: String) {
    listings.forget(under: path)
    files.removeAll { Self.isInside($0, path) }
    missing.removeAll { Self.isInside($0, path) }
    folders.forget(under: path)
  }

  /// `join` undone: the folder of `path` ("" at the root) and its last name.
  static func split(_ path: String) -> (dir: String, name: String) {
    // By bytes: a slash followed by a combining mark is one `Character`, and still a slash.
    guard let slash = path.utf8.lastIndex(of: UInt8(ascii: "/")) else { return ("", path) }
    return (String(path[..<slash]), String(path[path.utf8.index(after: slash)...]))
  }

  /// A name the kernel can show: not empty, not `.`/`..`, no `/` or NUL, at most 255 bytes.
  /// Why the bucket cannot hold an object made under the new name `name` at `path` exactly
  /// (an errno), or nil: Cloud Storage refuses carriage returns and line feeds in object names
  /// and names over 1,024 bytes (cloud.google.com/storage/docs/objects#naming).
  /// `objectName` is the name in the bucket (with the mount's prefix); a folder's is its
  /// placeholder's, one byte longer ("/").
  static func refusal(ofNewName name: String, objectName: String, isFolder: Bool) -> Int32? {
    guard isValidName(name) else { return EINVAL }
    if name.utf8.contains(where: { $0 == 0x0A || $0 == 0x0D }) { return EINVAL }
    if objectName.utf8.count + (isFolder ? 1 : 0) > maxObjectName { return ENAMETOOLONG }
    return nil
  }

  /// The longest object name Cloud Storage takes, in bytes.
  static let maxObjectName = 1024

  /// True when `a` and `b` are the same bytes. Swift's `==` on strings is canonical
  /// equivalence: NFC "café" (c3 a9) equals NFD "café" (65 cc 81), which are two objects.
  static func sameBytes(_ a: String, _ b: String) -> Bool { ObjectName.sameBytes(a, b) }

  static func isValidName(_ name: String) -> Bool {
    // Bytes, not Foundation's string search: this runs for every name of every listing.
    !name.isEmpty && name != "." && name != ".." && name.utf8.count <= 255
      && !name.utf8.contains(where: { $0 == UInt8(ascii: "/") || $0 == 0 })
  }

  /// What the mount shows without the server (`OfflineView`), by name relative to the prefix.
  let offline: OfflineView

  /// Folder `path`'s placeholder as a pinned tree last listed it: its mode and times offline.
  func pinnedFolderObject(_ path: String) -> StorageMetadata? { offline.pinnedFolderObject(path) }

  // MARK: listings (`Namespace+ServerListings.swift`, `+StreamedListings.swift`,
  // `+UnlistedFolders.swift`; without the server, `+WithoutServer.swift`)

  /// Listings fetched ahead of a walk, by folder, while in flight.
  let listingsAhead = Mutex<[ObjectName: Task<Void, Never>]>([:])
  let listingSlots = ReadAheadSlots(Namespace.foldersAhead)
  /// Folders listed ahead of a walk so far (for the stats).
  let foldersListedAhead = Atomic<Int>(0)
  /// How many folders after the one a walk went into have their listings fetched ahead.
  static let foldersAhead = 4
  /// Listings the server could not give, answered from the folder's last one (for the stats),
  /// and the folders the log said so of since their last listing (`+WithoutServer.swift`).
  let listingsFromLast = Atomic<Int>(0)
  let saidFromLast = Mutex<Set<ObjectName>>([])

  // MARK: names and attributes

  /// The entry of a listing with its attributes: a v0 listing has none, so they are fetched now,
  /// and those of the next entries in the background, concurrently, because `ls -l` asks for
  /// them one after another in listing order.
  /// A folder's attributes are its placeholder's (`FolderObjects`), fetched the same way.
  func withAttributes(_ found: FolderListings.Found, dir: String) async throws(FSError) -> DirectoryEntry {
    let entry = found.entry
    if entry.isDirectory {
      let path = Self.join(dir, entry.name)
      guard folderUnknown(path) else { return entry }
      prefetchAttributes(following(found, dir: dir), dir: dir)
      await learnFolderObject(path)
      return entry
    }
    guard !entry.hasMetadata, let objectName = entry.objectName else { return entry }
    if let summary = files.summary(objectName) {
      var e = entry
      e.summary = summary
      return e
    }
    prefetchAttributes(following(found, dir: dir), dir: dir)
    let m = try await fileMetadata(objectName)
    listings.fill(dir: dir, objectName: objectName, m)
    return entry.with(m)
  }

  /// The objects whose attributes the entries after `found` still need: files' objects, and
  /// folders' placeholders (`dir/`).
  private func following(_ found: FolderListings.Found, dir: String) -> [String] {
    found.entries[(found.index + 1)...].prefix(Self.attributeBatch).compactMap { e -> String? in
      if e.isDirectory {
        let path = Self.join(dir, e.name)
        return folderUnknown(path) ? path + "/" : nil
      }
      guard !e.hasMetadata, let name = e.objectName, files.summary(name) == nil else { return nil }
      return name
    }
  }

  /// Whether folder `path`'s attributes wait for what its placeholder is.
  func folderUnknown(_ path: String) -> Bool { options.posix && !options.offline && folders.get(path) == nil }

  /// Learns what folder `path`'s placeholder is, from the server when the mount does not know
  /// (a v0 listing carries no metadata). When it cannot tell now (the server away, offline) it
  /// stays unknown: the mount's defaults answer meanwhile, and the next lookup asks again.
  func learnFolderObject(_ path: String) async {
    guard folders.get(path) == nil, !options.offline else { return }
    do throws(BucketError) {
      folders.set(path, .object(try await client.metadata(of: path + "/")))
    } catch where error.code == .objectNotFound {
      folders.set(path, .absent)
    } catch {}
  }

  /// Fetches the attributes of `names` (a folder's placeholder for a name ending in "/") in
  /// the background, 32 at a time, each once however many lookups ask.
  private func prefetchAttributes(_ names: [String], dir: String) {
    attributeFetches.withLock { inflight in
      for name in names where inflight[ObjectName(name)] == nil {
        inflight[ObjectName(name)] = Task { [self] in
          await attributeSlots.acquire()
          defer {
            attributeSlots.release()
            _ = attributeFetches.withLock { $0.removeValue(forKey: ObjectName(name)) }
          }
          if name.hasSuffix("/") {
            await learnFolderObject(String(name.dropLast()))
            return nil
          }
          guard let m = try? await client.metadata(of: name) else { return nil }
          files.set(name, m)
          noticePinned(name, m)
          listings.fill(dir: dir, objectName: name, m)
          return m
        }
      }
    }
  }

  /// What `name` in folder `dir` is, from the folder's listing when it is cached, else from the
  /// server (or the staged copies).
  func resolve(dir: String, name: String) async throws(FSError) -> DirectoryEntry {
    var answer = listings.lookup(dir: dir, name: name)
    if case .unknown = answer, await listedAfterProbes(dir) { answer = listings.lookup(dir: dir, name: name) }
    switch answer {
    case .found(let found):
      listFoldersAhead(found, dir: dir)
      return try await withAttributes(found, dir: dir)
    case .absent: throw FSError(ENOENT)
    case .absenceToConfirm(let count) where count < Self.confirmableListing && !options.offline:
      // One listing confirms every absent name for the next window, where a probe would ask
      // about this one name (two requests) and the next name again.
      if let listed = try? await fetchListing(dir) ?? nil, listings.confirmAbsences(dir, from: listed, ours: queuedNames(dir)),
        case .absent = listings.lookup(dir: dir, name: name)
      {
        throw FSError(ENOENT)
      }
    case .unknown, .absenceToConfirm: break
    }
    let path = Self.join(dir, name)
    if missing.contains(path) { throw FSError(ENOENT) }
    var fromStaged = false
    var unanswered = false
    let found: DirectoryEntry? = try await fromServer("looking up \(path)", { () async throws(BucketError) -> DirectoryEntry? in
      do throws(BucketError) {
        return try await probe(path: path, name: name)
      } catch {
        unanswered = error.isUnanswered
        throw error
      }
    }, orStaged: { () throws(FSError) -> DirectoryEntry? in
      fromStaged = true
      // The folder's last listing knows more than the staged copies (which are what was read).
      if let last = lastListed(dir: dir, name: name) { return last }
      if let staged = offline.entry(dir, name) { return staged }
      // A server that cannot be reached leaves the staged copies as the mount's view, but one
      // that stopped answering may hold the name: its silence is the answer, as when the
      // lookup's own deadline runs out (the caller decides what a writable mount makes of it).
      if unanswered { throw FSError(ENOENT) }
      return nil
    })
    if let found {
      if found.isDirectory && !fromStaged { await learnFolderObject(path) }
      // Where a listing carries what a probe does, names asked about one after another (tar
      // -x over a tree that is there) are answered by the folder's listing from the second on.
      if !fromStaged && client.listsAttributes { noteProbe(in: dir) }
      return found
    }
    // The staged copies' answer is not the server's: not remembered as missing.
    if fromStaged { throw FSError(ENOENT) }
    // An alias of an object hidden behind a folder of the same name: which alias belongs to
    // which object depends on the whole folder, so ask its listing.
    if FolderNames.mayBeAlias(name) {
      let entries = try await listing(dir)
      if let i = entries.firstIndex(where: { Self.sameBytes($0.name, name) }) {
        return try await withAttributes(FolderListings.Found(entry: entries[i], index: i, entries: entries), dir: dir)
      }
    }
    missing.add(path)
    noteProbe(in: dir)
    throw FSError(ENOENT)
  }

  /// Folders where lookups asked the server about names (`Namespace+UnlistedFolders.swift`).
  let unlistedFolders = Mutex<[ObjectName: UnlistedFolder]>([:])
  /// Folders remembered at once; past it they are forgotten together (each costs a miss again).
  static let unlistedFoldersKept = 256

  /// The names directly in a folder that this mount's queue holds changes of (a writable
  /// mount's; set once it has a queue).
  let queuedNamesSource = Hook<@Sendable (String) -> Set<ObjectName>>()

  func setQueuedNames(_ source: @escaping @Sendable (String) -> Set<ObjectName>) { queuedNamesSource.set(source) }

  /// The attributes of object `objectName`.
  func fileMetadata(_ objectName: String) async throws(FSError) -> StorageMetadata {
    if let m = files.get(objectName) { return m }
    // Being fetched in the background already: that answer, unless it failed.
    if let pending = attributeFetches.withLock({ $0[ObjectName(objectName)] }), let m = await pending.value { return m }
    return try await fromServer("attributes of \(objectName)", { () async throws(BucketError) -> StorageMetadata in
      let m = try await client.metadata(of: objectName)
      files.set(objectName, m)
      noticePinned(objectName, m)
      return m
    }, orStaged: { () throws(FSError) -> StorageMetadata in
      guard let m = stagedCopies()[ObjectName(objectName)] else { throw FSError(ENOENT) }
      return m
    })
  }

  /// The attributes of object `objectName` as the server has them now, whatever is cached: the
  /// version a cached answer named is gone (someone else replaced it), and a new open must get
  /// the newest one rather than fail. Cached for whoever asks next.
  func latestFileMetadata(_ objectName: String) async throws(FSError) -> StorageMetadata {
    files.remove(objectName)
    return try await fromServer("attributes of \(objectName)", { () async throws(BucketError) -> StorageMetadata in
      let m = try await client.metadata(of: objectName)
      files.set(objectName, m)
      noticePinned(objectName, m)
      return m
    }, orStaged: { () throws(FSError) -> StorageMetadata in throw FSError(ESTALE) })
  }

  /// Object `name`'s metadata came from the server: a pin that keeps another version of it
  /// learns so (a v0 listing would not tell it).
  func noticePinned(_ name: String, _ m: StorageMetadata) { offline.pins.value?.noticed(client.bucketName(name), m) }

  /// A change made through the mount reached the bucket: what is cached of the name and its
  /// folder gives way to the bucket as it is now.
  func applied(_ change: PendingChange, _ metadata: StorageMetadata?) {
    let isFolder = change.name.hasSuffix("/")
    let path = isFolder ? String(change.name.dropLast()) : change.name
    let (dir, name) = Self.split(path)
    missing.remove(path)
    files.remove(path)
    if let conflict = change.conflictName {
      // The name holds someone else's version, whose attributes we do not have: list again.
      missing.remove(conflict)
      listings.remove(dir)
      return
    }
    switch (change.kind, isFolder) {
    case (.upload, true), (.metadata, true):
      if let metadata { folders.set(path, .object(metadata)) }
      listings.update(dir, name: name, entry: DirectoryEntry(name: name, isDirectory: true))
    case (.upload, false), (.copy, _), (.metadata, _):
      guard let metadata else { return listings.remove(dir) }
      files.set(path, metadata)
      // A file beside a folder of its name shows under an alias: that entry learns the new
      // version (the folder's entry is not the file's).
      guard let shown = listings.shownName(dir: dir, name: name, objectName: path) else { return listings.remove(dir) }
      listings.update(dir, name: shown, entry: DirectoryEntry(name: shown, isDirectory: false, objectName: path, metadata: metadata))
    case (.delete, false):
      guard let shown = listings.shownName(dir: dir, name: name, objectName: path) else { return listings.remove(dir) }
      listings.update(dir, name: shown, entry: nil)
    case (.delete, true):
      listings.update(dir, name: name, entry: nil)
      if isFolder {
        listings.remove(path)
        folders.set(path, .absent)
      }
    }
  }

  /// Where `name` stands in folder `dir`'s current listing, if any (no request).
  func position(dir: String, name: String) -> FolderListings.Found? { listings.position(dir: dir, name: name) }

  /// What a lookup can answer without a request: from a cached listing (when it has the
  /// entry's attributes) or a cached absence; nil when the async path must ask.
  func resolveIfCached(dir: String, name: String) -> Result<DirectoryEntry, FSError>? {
    switch listings.lookup(dir: dir, name: name) {
    case .found(let found):
      let e = found.entry
      listFoldersAhead(found, dir: dir)
      if e.isDirectory { return folderUnknown(Self.join(dir, e.name)) ? nil : .success(e) }
      if e.hasMetadata { return .success(e) }
      if let m = e.objectName.flatMap({ files.get($0) }) { return .success(e.with(m)) }
      // A v0 listing's file without attributes yet: the async path fetches them (and those of
      // the entries after it).
      return nil
    case .absent: return .failure(FSError(ENOENT))
    case .unknown, .absenceToConfirm: break
    }
    if missing.contains(Self.join(dir, name)) { return .failure(FSError(ENOENT)) }
    return nil
  }
}

extension DirectoryEntry {
  func with(_ metadata: StorageMetadata) -> DirectoryEntry {
    var e = self
    e.metadata = metadata
    return e
  }
}
