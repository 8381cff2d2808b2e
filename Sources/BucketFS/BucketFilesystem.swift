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
  public let metrics: Metrics
  let tokenRefreshes: @Sendable () -> Int

  final class OpenFile: Sendable {
    let objectName: String
    let metadata: StorageMetadata
    let reader: ObjectReader
    /// The staged copy being filled, which reads are answered from (nil: staging is off, the
    /// object is staged completely already, small or too large, or the copy broke).
    let copy: PartialCopy?
    /// Staging of a large object starts after the first read is answered, so that its download
    /// does not delay the first byte.
    let stagingStarted = Atomic<Bool>(false)
    /// When a read of this handle last ran out of time.
    let lastTimeout = Mutex<ContinuousClock.Instant?>(nil)
    init(objectName: String, metadata: StorageMetadata, reader: ObjectReader, copy: PartialCopy?) {
      self.objectName = objectName
      self.metadata = metadata
      self.reader = reader
      self.copy = copy
    }
  }

  /// Starts filling `file`'s staged copy once: the gaps its reads leave are fetched in the
  /// background, so that the whole object ends up staged.
  private func startStaging(_ file: OpenFile) {
    guard !file.stagingStarted.exchange(true, ordering: .acquiringAndReleasing) else { return }
    file.copy?.startFilling()
  }

  private let openFiles = Mutex<(next: UInt64, files: [UInt64: OpenFile])>((1, [:]))
  private let openDirs = Mutex<(next: UInt64, dirs: [UInt64: [DirectoryEntry]])>((1, [:]))
  private let reportedNames = Mutex<Set<String>>([])
  /// Names whose attributes are being fetched ahead of their lookup.
  private let attributeFetches = Mutex<Set<String>>([])
  /// The generation each inode had when last opened: when it is unchanged the kernel may keep
  /// its page cache across opens.
  private let openedGenerations = Mutex<[UInt64: Int64]>([:])
  /// How long a timed-out read makes the next reads of the handle fail at once.
  static let timeoutEcho: Duration = .seconds(1)
  /// Objects up to this size are fetched whole by the first read and staged from those bytes.
  static let smallObject = BlockCache.pageSize * 2

  public init(
    client: any ObjectClient, prefix: String, options: MountOptions, staging: StagingArea?,
    log: @escaping @Sendable (String) -> Void, metrics: Metrics = Metrics(), tokenRefreshes: @escaping @Sendable () -> Int = { 0 }
  ) {
    self.metrics = metrics
    self.tokenRefreshes = tokenRefreshes
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
    // Bytes, not Foundation's string search: this runs for every name of every listing.
    !name.isEmpty && name != "." && name != ".." && name.utf8.count <= 255
      && !name.utf8.contains(where: { $0 == UInt8(ascii: "/") || $0 == 0 })
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
    // Names first: the GCS list carries every object's attributes; the v0 list only names, and
    // their attributes are fetched when a lookup asks (see `attributesOf`).
    for (name, objectName) in shown {
      let m = given[prefix + objectName]
      if let m { self.files.set(objectName, m) }
      entries.append(DirectoryEntry(name: name, isDirectory: false, objectName: objectName, metadata: m ?? self.files.get(objectName)))
    }
    return entries
  }

  private func report(_ objectName: String, reason: String = "not a valid file name") {
    let first = reportedNames.withLock { $0.insert(objectName).inserted }
    if first { log("leaving out \(objectName.debugDescription): \(reason)") }
  }

  /// The entry of a listing with its attributes: a v0 listing has none, so they are fetched now,
  /// and those of the next entries in the background, concurrently, because `ls -l` asks for
  /// them one after another in listing order.
  private func withAttributes(_ entry: DirectoryEntry, dir: String, entries: [DirectoryEntry]) async throws(FSError)
    -> DirectoryEntry
  {
    guard !entry.isDirectory, entry.metadata == nil, let objectName = entry.objectName else { return entry }
    if let m = files.get(objectName) { return withMetadata(entry, m) }
    if let index = entries.firstIndex(where: { $0.name == entry.name }) {
      let following = entries[(index + 1)...].prefix(Self.attributeBatch).compactMap { e -> String? in
        guard !e.isDirectory, e.metadata == nil, let name = e.objectName, files.get(name) == nil else { return nil }
        return name
      }
      prefetchAttributes(following)
    }
    let node = InodeTable.Node(path: Self.join(dir, entry.name), isDirectory: false, objectName: objectName)
    return withMetadata(entry, try await fileMetadata(node))
  }

  private func withMetadata(_ entry: DirectoryEntry, _ m: StorageMetadata) -> DirectoryEntry {
    var e = entry
    e.metadata = m
    return e
  }

  /// How many entries after a looked-up one get their attributes fetched ahead.
  static let attributeBatch = 256

  /// Fetches the attributes of `names` (relative to the prefix) in the background, 32 at a time,
  /// each once however many lookups ask.
  private func prefetchAttributes(_ names: [String]) {
    let wanted = attributeFetches.withLock { inflight -> [String] in
      let new = names.filter { !inflight.contains($0) }
      inflight.formUnion(new)
      return new
    }
    guard !wanted.isEmpty else { return }
    Task { [self] in
      _ = try? await mapConcurrently(wanted, limit: 32) { name throws(StorageError) -> Bool in
        defer { _ = self.attributeFetches.withLock { $0.remove(name) } }
        if let m = try? await self.client.metadata(of: self.prefix + name) { self.files.set(name, m) }
        return true
      }
    }
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
      return try await withAttributes(e, dir: dir, entries: entries)
    }
    let path = Self.join(dir, name)
    if missing.get(path) != nil { throw FSError(ENOENT) }
    if options.offline { return try offlineEntry(dir: dir, name: name) }
    do {
      if let e = try await probe(path: path, name: name) { return e }
      // An alias of an object hidden behind a folder of the same name: which alias belongs to
      // which object depends on the whole folder, so ask its listing.
      if FolderNames.mayBeAlias(name) {
        let entries = try await listing(dir)
        if let e = entries.first(where: { $0.name == name }) { return try await withAttributes(e, dir: dir, entries: entries) }
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

  /// Hands out the entries from `offset` on, one by one, until `emit` says the reply is full;
  /// nothing is done for entries after that, so listing a folder in many replies stays linear.
  /// `linked` entries carry an inode the kernel may keep (readdirplus: the caller counts a kernel
  /// reference when it hands one out); the others carry a listed-only number and no attributes
  /// worth caching — names first: a v0 listing has no attributes, and `lookup` fetches them.
  public func readDirectory(
    _ ino: UInt64, handle: UInt64, offset: Int, plus: Bool,
    emit: (DirectoryEntry, FileAttributes, _ linked: Bool) -> Bool
  ) {
    guard let node = inodes.node(ino), let entries = openDirs.withLock({ $0.dirs[handle] }) else { return }
    guard offset < entries.count else { return }
    for e in entries[offset...] {
      let path = Self.join(node.path, e.name)
      let n = InodeTable.Node(path: path, isDirectory: e.isDirectory, objectName: e.objectName)
      let metadata = e.metadata ?? (e.isDirectory ? nil : files.get(e.objectName ?? path))
      if plus && (e.isDirectory || metadata != nil) {
        let (ino, created) = inodes.inoCreating(n)
        guard emit(e, attributes(ino: ino, directory: e.isDirectory, metadata: metadata), true) else {
          if created { inodes.dropIfUnreferenced(ino) }
          return
        }
      } else {
        let ino = inodes.existing(n) ?? InodeTable.listedIno(path)
        guard emit(e, attributes(ino: ino, directory: e.isDirectory, metadata: metadata), false) else { return }
      }
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
    var copy: PartialCopy? = nil
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
        } else {
          copy = staging.partialCopy(objectName, metadata: m, client: client)
        }
      }
    }
    let keep = openedGenerations.withLock { g -> Bool in
      let same = g[ino] == m.generation
      g[ino] = m.generation
      return same
    }
    let file = OpenFile(objectName: objectName, metadata: m, reader: reader, copy: copy)
    let fh = openFiles.withLock { s in
      let fh = s.next
      s.next += 1
      s.files[fh] = file
      return fh
    }
    if copy != nil {
      // Opened but not read soon (or read only after a while): stage anyway.
      Task {
        try? await Task.sleep(for: .milliseconds(300))
        startStaging(file)
      }
    }
    return (fh, keep)
  }

  public func read(handle: UInt64, offset: Int64, count: Int) async throws(FSError) -> ReadReply {
    guard let file = openFiles.withLock({ $0.files[handle] }) else { throw FSError(EBADF) }
    let size = file.metadata.size
    let end = min(size, offset + Int64(count))
    guard offset < end else { return .bytes(Data()) }
    if let reply = staging?.read(file.objectName, generation: file.metadata.generation, offset: offset, count: Int(end - offset)) {
      return reply
    }
    if let copy = file.copy, copy.holds(offset: offset, end: end) {
      return .file(copy.file, offset: offset, count: Int(end - offset))
    }
    if options.offline { throw FSError(EIO) }
    // A read that just failed for lack of an answer fails again at once for a moment: the
    // kernel retries a failed readahead page by page, and each retry would wait the whole
    // read_timeout again before the reader sees the error.
    if let failed = file.lastTimeout.withLock({ $0 }), ContinuousClock.now - failed < Self.timeoutEcho {
      throw FSError(EIO)
    }
    metrics.cacheMisses.add(1, ordering: .relaxed)
    do {
      let reply = try await ReadDeadline.run(seconds: options.readTimeout, object: file.objectName) { () async throws(StorageError) -> ReadReply in
        try await self.fetch(file, offset: offset, end: end)
      }
      startStaging(file)
      return reply
    } catch {
      if error.code == .objectChanged { log("\(file.objectName) changed on the server while open: \(error.detail)") }
      if error.code == .timedOut || error.code == .retryLimitExceeded {
        file.lastTimeout.withLock { $0 = .now }
        log("reading \(file.objectName) at \(offset): \(error.detail)")
      }
      throw FSError(error)
    }
  }

  /// Bytes `offset..<end` from the server: into the staged copy when there is one that works,
  /// else through the block cache.
  private func fetch(_ file: OpenFile, offset: Int64, end: Int64) async throws(StorageError) -> ReadReply {
    if let copy = file.copy {
      do {
        try await copy.wait(offset: offset, end: end)
        return .file(copy.file, offset: offset, count: Int(end - offset))
      } catch let error as StorageError {
        throw error
      } catch {
        // The copy cannot be used (the disk is full, say): read without it.
      }
    }
    return try await file.reader.reply(offset: offset, count: Int(end - offset))
  }

  public func release(handle: UInt64) {
    guard let file = openFiles.withLock({ $0.files.removeValue(forKey: handle) }) else { return }
    // Read-ahead of a closed file is wasted: stop it, unless another handle reads the object.
    let stillOpen = openFiles.withLock { s in
      s.files.values.contains { $0.objectName == file.objectName && $0.metadata.generation == file.metadata.generation }
    }
    if !stillOpen { file.reader.cancelFetches() }
    staging?.release(file.objectName, generation: file.metadata.generation)
  }

  // MARK: answers from the caches, without a task hop (nil: ask the async function)

  public func lookupIfCached(parent: UInt64, name: String) -> Result<FileAttributes, FSError>? {
    guard let dir = inodes.node(parent), dir.isDirectory, Self.isValidName(name) else { return nil }
    let path = Self.join(dir.path, name)
    if let entries = listings.get(dir.path) {
      guard let e = entries.first(where: { $0.name == name }) else { return .failure(FSError(ENOENT)) }
      let metadata = e.metadata ?? e.objectName.flatMap { files.get($0) }
      // A v0 listing's file without attributes yet: the async path fetches them.
      if !e.isDirectory && metadata == nil { return nil }
      let node = InodeTable.Node(path: path, isDirectory: e.isDirectory, objectName: e.objectName)
      let ino = inodes.ino(for: node, lookup: true)
      return .success(attributes(ino: ino, directory: e.isDirectory, metadata: metadata))
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

  public func readIfCached(handle: UInt64, offset: Int64, count: Int) -> ReadReply? {
    guard let file = openFiles.withLock({ $0.files[handle] }) else { return nil }
    let end = min(file.metadata.size, offset + Int64(count))
    guard offset < end else { return .bytes(Data()) }
    if let reply = staging?.read(file.objectName, generation: file.metadata.generation, offset: offset, count: Int(end - offset)) {
      metrics.cacheHits.add(1, ordering: .relaxed)
      return reply
    }
    if let copy = file.copy, copy.holds(offset: offset, end: end) {
      metrics.cacheHits.add(1, ordering: .relaxed)
      return .file(copy.file, offset: offset, count: Int(end - offset))
    }
    if options.offline || file.copy.map({ !$0.isBroken }) == true { return nil }
    guard let reply = file.reader.replyIfCached(offset: offset, count: Int(end - offset)) else { return nil }
    metrics.cacheHits.add(1, ordering: .relaxed)
    return reply
  }

  // MARK: metrics

  public func readings() -> Metrics.Readings {
    let (stagedBytes, stagedFiles) = staging?.totals ?? (0, 0)
    return Metrics.Readings(
      cacheBytes: cache.bytesCached, cacheEvictions: cache.evictions, stagingBytes: stagedBytes, stagingFiles: stagedFiles,
      openHandles: openFiles.withLock { $0.files.count }, retries: TransferCounters.retries.load(ordering: .relaxed),
      tokenRefreshes: tokenRefreshes())
  }

  /// The extended attribute of the mount's root that `bucketfs stats` reads.
  public static let statsAttribute = "user.bucketfs.stats"

  public func statsText() -> String {
    metrics.summary(readings()).map { "\($0.0)\t\($0.1)" }.joined(separator: "\n") + "\n"
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
