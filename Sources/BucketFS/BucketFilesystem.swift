// The filesystem: plain async functions that return values or errno, free of C and of libfuse,
// so that it runs against an in-memory client in tests. FuseBridge decodes kernel requests, calls
// these, and replies.
//
// Names: the mount shows the bucket below `prefix`. A folder is a prefix with objects under it
// (or a placeholder object whose name ends in "/"). When an object `a` and objects under `a/`
// both exist, the folder keeps the name `a` and the object is shown as `a.object`. Names that
// cannot be file names are left out of listings with one log line each.
import Foundation
import StorageCore
import Synchronization

public final class BucketFilesystem: Sendable {
  public let client: any ObjectClient
  public let prefix: String
  public let options: MountOptions
  public let inodes = InodeTable()
  let files: TTLCache<String, StorageMetadata>
  let missing: TTLCache<String, Bool>
  let listings: TTLCache<String, [DirectoryEntry]>
  public let cache: BlockCache
  public let staging: StagingArea?
  let mountTime = Date().timeIntervalSince1970
  let log: @Sendable (String) -> Void

  final class OpenFile: Sendable {
    let objectName: String
    let metadata: StorageMetadata
    let reader: ObjectReader
    /// Staging of a large object starts after the first read is answered, so that its download
    /// does not delay the first byte.
    let stagingStarted = Atomic<Bool>(false)
    /// When a read of this handle last ran out of time.
    let lastTimeout = Mutex<ContinuousClock.Instant?>(nil)
    init(objectName: String, metadata: StorageMetadata, reader: ObjectReader) {
      self.objectName = objectName
      self.metadata = metadata
      self.reader = reader
    }
  }

  /// Starts staging `file` once (a large object's whole-object download).
  private func startStaging(_ file: OpenFile) {
    guard let staging, !options.offline, !file.stagingStarted.exchange(true, ordering: .acquiringAndReleasing) else { return }
    staging.stage(file.objectName, metadata: file.metadata, client: client)
  }

  private let openFiles = Mutex<(next: UInt64, files: [UInt64: OpenFile])>((1, [:]))
  private let openDirs = Mutex<(next: UInt64, dirs: [UInt64: [DirectoryEntry]])>((1, [:]))
  private let reportedNames = Mutex<Set<String>>([])
  /// The generation each inode had when last opened: when it is unchanged the kernel may keep
  /// its page cache across opens.
  private let openedGenerations = Mutex<[UInt64: Int64]>([:])
  /// How long a timed-out read makes the next reads of the handle fail at once.
  static let timeoutEcho: Duration = .seconds(1)
  /// Objects up to this size are fetched whole by the first read and staged from those bytes.
  static let smallObject = BlockCache.pageSize * 2

  public init(
    client: any ObjectClient, prefix: String, options: MountOptions, staging: StagingArea?,
    log: @escaping @Sendable (String) -> Void
  ) {
    self.client = client
    var p = StoragePath.normalize(prefix)
    if !p.isEmpty { p += "/" }
    self.prefix = p
    self.options = options
    let ttl = options.metadataTTL
    files = TTLCache(ttl: ttl, capacity: 200_000)
    missing = TTLCache(ttl: ttl, capacity: 50_000)
    listings = TTLCache(ttl: ttl, capacity: 2_000)
    cache = BlockCache(budget: options.cacheSize)
    self.staging = staging
    self.log = log
  }

  // MARK: names and attributes

  static func join(_ dir: String, _ name: String) -> String { dir.isEmpty ? name : dir + "/" + name }

  /// A name the kernel can show: not empty, not `.`/`..`, no `/` or NUL, at most 255 bytes.
  static func isValidName(_ name: String) -> Bool {
    !name.isEmpty && name != "." && name != ".." && !name.contains("/") && !name.contains("\u{0}")
      && name.utf8.count <= 255
  }

  func attributes(ino: UInt64, directory: Bool, metadata: StorageMetadata?) -> FileAttributes {
    let mtime = metadata?.updated?.timeIntervalSince1970 ?? mountTime
    let ctime = metadata?.timeCreated?.timeIntervalSince1970 ?? mtime
    return FileAttributes(
      ino: ino, size: directory ? 0 : metadata?.size ?? 0, isDirectory: directory,
      mode: directory ? options.dirMode : options.fileMode, uid: options.uid, gid: options.gid,
      mtime: mtime, ctime: ctime)
  }

  func gsURL(_ objectPath: String) -> String { "gs://\(client.bucket)/\(prefix)\(objectPath)" }

  // MARK: listing

  /// The entries of folder `path` (relative to the mount root).
  public func listing(_ path: String) async throws(FSError) -> [DirectoryEntry] {
    if let cached = listings.get(path) { return cached }
    if options.offline { return offlineListing(path) }
    do {
      let entries = try await fetchListing(path)
      listings.set(path, entries)
      return entries
    } catch {
      if ErrnoMapping.isServerGone(error), staging != nil {
        log("server unavailable (\(error.detail)); listing \(path.isEmpty ? "/" : path) from staged copies")
        return offlineListing(path)
      }
      throw FSError(error)
    }
  }

  private func fetchListing(_ path: String) async throws(StorageError) -> [DirectoryEntry] {
    let listPrefix = prefix + (path.isEmpty ? "" : path + "/")
    var folderNames: [String] = []
    var items: [String] = []
    var given: [String: StorageMetadata] = [:]
    var token: String? = nil
    repeat {
      let page = try await client.listPage(prefix: listPrefix, pageToken: token, maxResults: nil)
      folderNames += page.prefixes
      items += page.items
      given.merge(page.metadata) { a, _ in a }
      token = page.nextPageToken
    } while token != nil

    var entries: [DirectoryEntry] = []
    var dirNames = Set<String>()
    for folder in Set(folderNames).sorted() {
      let name = String(folder.dropFirst(listPrefix.count).dropLast())
      guard Self.isValidName(name) else {
        report(folder)
        continue
      }
      dirNames.insert(name)
      entries.append(DirectoryEntry(name: name, isDirectory: true))
    }
    var files: [(name: String, payload: String)] = []  // (name in this folder, object relative to prefix)
    for item in items {
      let name = String(item.dropFirst(listPrefix.count))
      if name.isEmpty { continue }  // this folder's own placeholder object
      if name.hasSuffix("/"), Self.isValidName(String(name.dropLast())) {
        // A placeholder of a sub-folder that the list returned as an item.
        if dirNames.insert(String(name.dropLast())).inserted {
          entries.append(DirectoryEntry(name: String(name.dropLast()), isDirectory: true))
        }
        continue
      }
      guard Self.isValidName(name) else {
        report(item)
        continue
      }
      files.append((name, String(item.dropFirst(prefix.count))))
    }
    let shown = FolderNames.assign(folders: dirNames, files: files) { name in report(listPrefix + name, reason: "no free alias beside the folder of the same name") }
    let metadata = try await metadataOf(shown.map(\.payload), given: given)
    for (name, objectName) in shown {
      guard let m = metadata[objectName] else { continue }  // deleted since the list
      entries.append(DirectoryEntry(name: name, isDirectory: false, objectName: objectName, metadata: m))
    }
    return entries
  }

  private func report(_ objectName: String, reason: String = "not a valid file name") {
    let first = reportedNames.withLock { $0.insert(objectName).inserted }
    if first { log("leaving out \(objectName.debugDescription): \(reason)") }
  }

  /// Metadata of many objects, concurrently (the v0 list carries names only).
  private func metadataOf(_ names: [String], given: [String: StorageMetadata]) async throws(StorageError)
    -> [String: StorageMetadata]
  {
    var out: [String: StorageMetadata] = [:]
    var needed: [String] = []
    for name in names {
      if let m = given[prefix + name] {
        out[name] = m
        files.set(name, m)
      } else if let m = files.get(name) {
        out[name] = m
      } else {
        needed.append(name)
      }
    }
    if needed.isEmpty { return out }
    let client = self.client
    let prefix = self.prefix
    let more = try await mapConcurrently(needed, limit: 64) { name throws(StorageError) -> (String, StorageMetadata)? in
      do throws(StorageError) {
        return (name, try await client.metadata(of: prefix + name))
      } catch where error.code == .objectNotFound {
        return nil  // deleted since the list
      }
    }
    for (name, m) in more {
      out[name] = m
      files.set(name, m)
    }
    return out
  }

  func offlineListing(_ path: String) -> [DirectoryEntry] {
    guard let staging else { return [] }
    let base = prefix + (path.isEmpty ? "" : path + "/")
    var dirs = Set<String>()
    var entries: [DirectoryEntry] = []
    var fileEntries: [String: DirectoryEntry] = [:]
    for (name, entry) in staging.completeEntries() where name.hasPrefix(base) {
      let rest = name.dropFirst(base.count)
      guard let first = rest.split(separator: "/", omittingEmptySubsequences: false).first.map(String.init),
        Self.isValidName(first)
      else { continue }
      if rest.count > first.count {
        dirs.insert(first)
      } else {
        fileEntries[first] = DirectoryEntry(
          name: first, isDirectory: false, objectName: String(name.dropFirst(prefix.count)), metadata: entry.metadata)
      }
    }
    for d in dirs.sorted() { entries.append(DirectoryEntry(name: d, isDirectory: true)) }
    let files = fileEntries.sorted(by: { $0.key < $1.key }).map { (name: $0.key, payload: $0.value) }
    for (name, var e) in FolderNames.assign(folders: dirs, files: files, leftOut: { _ in }) {
      e.name = name
      entries.append(e)
    }
    return entries
  }

  // MARK: lookup and getattr

  /// Resolves `name` in folder `parent`; the returned inode counts one kernel reference.
  public func lookup(parent: UInt64, name: String) async throws(FSError) -> FileAttributes {
    guard let dir = inodes.node(parent) else { throw FSError(ESTALE) }
    guard dir.isDirectory else { throw FSError(ENOTDIR) }
    if name.utf8.count > 255 { throw FSError(ENAMETOOLONG) }
    guard Self.isValidName(name) else { throw FSError(ENOENT) }
    let entry = try await resolve(dir: dir.path, name: name)
    let path = Self.join(dir.path, name)
    let node = InodeTable.Node(path: path, isDirectory: entry.isDirectory, objectName: entry.objectName)
    let ino = inodes.ino(for: node, lookup: true)
    return attributes(ino: ino, directory: entry.isDirectory, metadata: entry.metadata)
  }

  private func resolve(dir: String, name: String) async throws(FSError) -> DirectoryEntry {
    if let entries = listings.get(dir) {
      guard let e = entries.first(where: { $0.name == name }) else { throw FSError(ENOENT) }
      return e
    }
    let path = Self.join(dir, name)
    if missing.get(path) != nil { throw FSError(ENOENT) }
    if options.offline { return try offlineEntry(dir: dir, name: name) }
    do {
      if let e = try await probe(path: path, name: name) { return e }
      // An alias of an object hidden behind a folder of the same name: which alias belongs to
      // which object depends on the whole folder, so ask its listing.
      if FolderNames.mayBeAlias(name) {
        if let e = try await listing(dir).first(where: { $0.name == name }) { return e }
      }
      missing.set(path, true)
      throw FSError(ENOENT)
    } catch let error as StorageError {
      if ErrnoMapping.isServerGone(error), staging != nil { return try offlineEntry(dir: dir, name: name) }
      throw FSError(error)
    } catch let error as FSError {
      throw error
    } catch {
      throw FSError(EIO)
    }
  }

  /// Asks the server whether `path` is a folder (objects under it) or an object.
  private func probe(path: String, name: String) async throws(StorageError) -> DirectoryEntry? {
    async let folder: Result<ListPage, StorageError> = {
      do throws(StorageError) {
        return .success(try await client.listPage(prefix: prefix + path + "/", pageToken: nil, maxResults: 1))
      } catch { return .failure(error) }
    }()
    let object: Result<StorageMetadata, StorageError>
    do throws(StorageError) {
      object = .success(try await client.metadata(of: prefix + path))
    } catch {
      object = .failure(error)
    }
    let page = try await folder.get()
    if !page.items.isEmpty || !page.prefixes.isEmpty {
      return DirectoryEntry(name: name, isDirectory: true)
    }
    switch object {
    case .success(let m):
      files.set(path, m)
      return DirectoryEntry(name: name, isDirectory: false, objectName: path, metadata: m)
    case .failure(let e) where e.code == .objectNotFound:
      return nil
    case .failure(let e):
      throw e
    }
  }

  private func offlineEntry(dir: String, name: String) throws(FSError) -> DirectoryEntry {
    guard let e = offlineListing(dir).first(where: { $0.name == name }) else { throw FSError(ENOENT) }
    return e
  }

  public func getattr(_ ino: UInt64) async throws(FSError) -> FileAttributes {
    guard let node = inodes.node(ino) else { throw FSError(ESTALE) }
    if node.isDirectory { return attributes(ino: ino, directory: true, metadata: nil) }
    let m = try await fileMetadata(node)
    return attributes(ino: ino, directory: false, metadata: m)
  }

  func fileMetadata(_ node: InodeTable.Node) async throws(FSError) -> StorageMetadata {
    let objectName = node.objectName ?? node.path
    if let m = files.get(objectName) { return m }
    if options.offline {
      guard let e = staging?.completeEntries()[prefix + objectName] else { throw FSError(ENOENT) }
      return e.metadata
    }
    do {
      let m = try await client.metadata(of: prefix + objectName)
      files.set(objectName, m)
      return m
    } catch {
      if ErrnoMapping.isServerGone(error), let e = staging?.completeEntries()[prefix + objectName] {
        return e.metadata
      }
      throw FSError(error)
    }
  }

  // MARK: directories

  public func openDirectory(_ ino: UInt64) async throws(FSError) -> UInt64 {
    guard let node = inodes.node(ino) else { throw FSError(ESTALE) }
    guard node.isDirectory else { throw FSError(ENOTDIR) }
    let entries = try await listing(node.path)
    return openDirs.withLock { s in
      let fh = s.next
      s.next += 1
      s.dirs[fh] = entries
      return fh
    }
  }

  /// Entries from `offset` on, with their attributes. The caller counts a kernel reference
  /// (`inodes.addLookup`) for each entry it hands out through readdirplus.
  public func readDirectory(_ ino: UInt64, handle: UInt64, offset: Int) -> [(DirectoryEntry, FileAttributes)] {
    guard let node = inodes.node(ino), let entries = openDirs.withLock({ $0.dirs[handle] }) else { return [] }
    guard offset < entries.count else { return [] }
    return entries[offset...].map { e in
      let n = InodeTable.Node(path: Self.join(node.path, e.name), isDirectory: e.isDirectory, objectName: e.objectName)
      let ino = inodes.ino(for: n, lookup: false)
      return (e, attributes(ino: ino, directory: e.isDirectory, metadata: e.metadata))
    }
  }

  public func releaseDirectory(_ handle: UInt64) {
    _ = openDirs.withLock { $0.dirs.removeValue(forKey: handle) }
  }

  // MARK: files

  /// Opens a file for reading: pins its generation and starts staging it. Returns the handle and
  /// whether the kernel may keep cached pages from an earlier open (same generation).
  public func open(_ ino: UInt64, flags: Int32) async throws(FSError) -> (handle: UInt64, keepCache: Bool) {
    if flags & O_ACCMODE != O_RDONLY || flags & O_TRUNC != 0 { throw FSError(EROFS) }
    guard let node = inodes.node(ino) else { throw FSError(ESTALE) }
    if node.isDirectory { throw FSError(EISDIR) }
    let m = try await fileMetadata(node)
    let objectName = prefix + (node.objectName ?? node.path)
    let reader = ObjectReader(client: client, cache: cache, name: objectName, generation: m.generation, size: m.size)
    if let staging {
      staging.retain(objectName, generation: m.generation)
      if !options.offline {
        if m.size <= Self.smallObject {
          // Small objects are staged from the same GET that serves the reads.
          Task {
            if let bytes = try? await reader.read(offset: 0, count: Int(m.size)) {
              staging.stage(objectName, metadata: m, bytes: bytes)
            }
          }
        }
      }
    }
    let keep = openedGenerations.withLock { g -> Bool in
      let same = g[ino] == m.generation
      g[ino] = m.generation
      return same
    }
    let file = OpenFile(objectName: objectName, metadata: m, reader: reader)
    let fh = openFiles.withLock { s in
      let fh = s.next
      s.next += 1
      s.files[fh] = file
      return fh
    }
    if m.size > Self.smallObject {
      // Opened but not read soon (or read only after a while): stage anyway.
      Task {
        try? await Task.sleep(for: .milliseconds(300))
        startStaging(file)
      }
    }
    return (fh, keep)
  }

  public func read(handle: UInt64, offset: Int64, count: Int) async throws(FSError) -> Data {
    guard let file = openFiles.withLock({ $0.files[handle] }) else { throw FSError(EBADF) }
    let size = file.metadata.size
    let end = min(size, offset + Int64(count))
    guard offset < end else { return Data() }
    if let data = staging?.read(file.objectName, generation: file.metadata.generation, offset: offset, count: Int(end - offset)) {
      return data
    }
    if options.offline { throw FSError(EIO) }
    // A read that just failed for lack of an answer fails again at once for a moment: the
    // kernel retries a failed readahead page by page, and each retry would wait the whole
    // read_timeout again before the reader sees the error.
    if let failed = file.lastTimeout.withLock({ $0 }), ContinuousClock.now - failed < Self.timeoutEcho {
      throw FSError(EIO)
    }
    do {
      let reader = file.reader
      let data = try await ReadDeadline.run(seconds: options.readTimeout, object: file.objectName) { () async throws(StorageError) -> Data in
        try await reader.read(offset: offset, count: Int(end - offset))
      }
      if size > Self.smallObject { startStaging(file) }
      return data
    } catch {
      if error.code == .objectChanged { log("\(file.objectName) changed on the server while open: \(error.detail)") }
      if error.code == .timedOut || error.code == .retryLimitExceeded {
        file.lastTimeout.withLock { $0 = .now }
        log("reading \(file.objectName) at \(offset): \(error.detail)")
      }
      throw FSError(error)
    }
  }

  public func release(handle: UInt64) {
    guard let file = openFiles.withLock({ $0.files.removeValue(forKey: handle) }) else { return }
    staging?.release(file.objectName, generation: file.metadata.generation)
  }

  // MARK: answers from the caches, without a task hop (nil: ask the async function)

  public func lookupIfCached(parent: UInt64, name: String) -> Result<FileAttributes, FSError>? {
    guard let dir = inodes.node(parent), dir.isDirectory, Self.isValidName(name) else { return nil }
    let path = Self.join(dir.path, name)
    if let entries = listings.get(dir.path) {
      guard let e = entries.first(where: { $0.name == name }) else { return .failure(FSError(ENOENT)) }
      let node = InodeTable.Node(path: path, isDirectory: e.isDirectory, objectName: e.objectName)
      let ino = inodes.ino(for: node, lookup: true)
      return .success(attributes(ino: ino, directory: e.isDirectory, metadata: e.metadata))
    }
    if missing.get(path) != nil { return .failure(FSError(ENOENT)) }
    return nil
  }

  public func getattrIfCached(_ ino: UInt64) -> FileAttributes? {
    guard let node = inodes.node(ino) else { return nil }
    if node.isDirectory { return attributes(ino: ino, directory: true, metadata: nil) }
    guard let m = files.get(node.objectName ?? node.path) else { return nil }
    return attributes(ino: ino, directory: false, metadata: m)
  }

  public func xattrsIfCached(_ ino: UInt64) -> [(String, String)]? {
    guard let node = inodes.node(ino) else { return nil }
    if node.isDirectory { return Xattrs.forDirectory(gsURL: gsURL(node.path.isEmpty ? "" : node.path + "/")) }
    guard let m = files.get(node.objectName ?? node.path) else { return nil }
    return xattrs(node, m)
  }

  public func readIfCached(handle: UInt64, offset: Int64, count: Int) -> Data? {
    guard let file = openFiles.withLock({ $0.files[handle] }) else { return nil }
    let end = min(file.metadata.size, offset + Int64(count))
    guard offset < end else { return Data() }
    if let data = staging?.read(file.objectName, generation: file.metadata.generation, offset: offset, count: Int(end - offset)) {
      return data
    }
    if options.offline { return nil }
    guard let data = file.reader.readIfCached(offset: offset, count: Int(end - offset)) else { return nil }
    if file.metadata.size > Self.smallObject { startStaging(file) }
    return data
  }

  // MARK: extended attributes

  public func xattrs(_ ino: UInt64) async throws(FSError) -> [(String, String)] {
    guard let node = inodes.node(ino) else { throw FSError(ESTALE) }
    if node.isDirectory { return Xattrs.forDirectory(gsURL: gsURL(node.path.isEmpty ? "" : node.path + "/")) }
    return xattrs(node, try await fileMetadata(node))
  }

  private func xattrs(_ node: InodeTable.Node, _ m: StorageMetadata) -> [(String, String)] {
    let objectName = node.objectName ?? node.path
    let token = m.downloadTokens?.split(separator: ",").first.map(String.init)
    let url = token.map { client.downloadURL(name: prefix + objectName, token: $0) }
    let staged = staging?.status(prefix + objectName, generation: m.generation, size: m.size) ?? .none
    return Xattrs.forFile(metadata: m, gsURL: gsURL(objectName), downloadURL: url, staged: staged)
  }

}
