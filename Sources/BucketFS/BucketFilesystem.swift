// The filesystem: plain async functions that return values or errno, free of C and of libfuse,
// so that it runs against an in-memory client in tests. FuseBridge decodes kernel requests, calls
// these, and replies. What a name is lives in Namespace; reading in ObjectReader (the block
// cache) and the staged copies; this type ties them to inodes and open handles.
//
// Each operation with a `…IfCached` twin (answers from memory, without a task hop) calls the
// twin first, so each caching rule is written once.
import Foundation
import StorageCore
import Synchronization

package final class BucketFilesystem: Sendable {
  /// The bucket as the mount sees it: names relative to the prefix (`bucketWide` for reads and
  /// staged copies, which go by names in the bucket, shared by every mount of it).
  package let client: any ObjectClient
  package let options: MountOptions
  package let inodes = InodeTable()
  let namespace: Namespace
  package let cache: BlockCache
  package let staging: StagingArea?
  let mountTime = Timestamp.now()
  package let log: @Sendable (String) -> Void
  package let metrics: Metrics
  let tokenRefreshes: @Sendable () -> Int
  let transferLoopAge: @Sendable () -> Double

  final class OpenFile: Sendable {
    let objectName: String
    let metadata: StorageMetadata
    let reader: ObjectReader
    /// The staged copy being filled, which reads are answered from (nil: staging is off, the
    /// object is staged completely already, small or too large, or the copy broke).
    let copy: PartialCopy?
    /// Where a rename this mount queued is copying these bytes (the name was opened before the
    /// copy landed): once the copy and the old name's delete are done, reads go there.
    let renamedTo: String?
    let opened = ContinuousClock.now
    /// Whether the version is settled: the open fetched its first bytes, or a read of it was
    /// answered. Until then it may still be swapped for the newest one (the open took a cached
    /// answer about a version someone else has replaced since), which a program that has read
    /// nothing cannot tell apart (`settled(_:)`, `moveToNewest`).
    let settled = Atomic<Bool>(false)
    init(objectName: String, metadata: StorageMetadata, reader: ObjectReader, copy: PartialCopy?, renamedTo: String? = nil) {
      self.objectName = objectName
      self.metadata = metadata
      self.reader = reader
      self.copy = copy
      self.renamedTo = renamedTo
    }
  }

  /// What each file handle the kernel holds reads or writes.
  enum FileHandle: Sendable {
    /// An object's version, read from the server, the block cache or its staged copy.
    case read(OpenFile)
    /// A file open for writing (or opened for reading while someone writes it).
    case edit(EditHandle)
    /// Bytes queued for the bucket and not there yet, read from the queue.
    case queued(FileDescriptor)

    var reading: OpenFile? {
      if case .read(let file) = self { file } else { nil }
    }

    /// The same open of an edit.
    func isSame(as other: FileHandle) -> Bool {
      if case .edit(let a) = self, case .edit(let b) = other { a === b } else { false }
    }
  }

  let fileHandles = HandleTable<FileHandle>()
  /// Changes through a writable mount (nil: read-only).
  let writeBack: WriteBack?
  /// Why a writable mount has no write-back queue (its folder cannot be used, or another mount
  /// writes back through it): the mount must not come up.
  package let writeBackRefusal: (any Error)?
  /// Folders and files kept available offline (nil: no staging).
  let pins: PinKeeper?
  private let folderReadAhead = FolderReadAhead()
  /// Read-ahead GETs across files in flight, across folders.
  private let readAheadSlots = ReadAheadSlots(FolderReadAhead.concurrency)
  private let openDirs = HandleTable<Namespace.OpenedListing>()
  /// The generation each inode had when last opened: when it is unchanged the kernel may keep
  /// its page cache across opens. Removed when the kernel must forget the inode
  /// (`forgetKernelCache`), so that its next open drops the pages.
  let openedGenerations = Mutex<[UInt64: Int64]>([:])
  /// Opens sent to a new inode lately, by name and process, and when (`sendToNewInode`).
  let reopened = Mutex<[Reopen: ContinuousClock.Instant]>([:])

  /// The edit handles of writers' opens sent to a new inode, kept until the kernel's second
  /// try has joined the edit again (`holdForSecondTry`).
  let heldForSecondTry = Mutex<[Reopen: FileHandle]>([:])

  /// A process whose open of a name was sent to a new inode.
  struct Reopen: Hashable {
    let name: ObjectName
    let opener: Int32
  }
  /// Whether the kernel reads each inode's opens through its page cache or by passthrough.
  let kernelIO: KernelIOModes
  /// Mode and owner changes this mount queued and the queue has not applied yet.
  let posixChanges = PosixChanges()
  /// Reads that just ran out of time make the next reads of the object fail at once, for 1 s.
  private let recentTimeouts = RecentTimeouts(echo: .seconds(1))
  /// Whether the log has said that lookups the server did not answer are taken as absent.
  private let saidLookupsTimeOut = Atomic<Bool>(false)
  /// The same for listings answered from what the mount knows.
  private let saidListingsTimeOut = Atomic<Bool>(false)
  /// Names the kernel was told are missing, within the negative TTL: a refresh tells it again.
  let kernelMisses: TTLCache<KernelEntry, Bool>
  let kernelNotifier = Hook<@Sendable (Forgotten) -> Void>()

  package init(
    client: any ObjectClient, prefix: String, options: MountOptions, staging: StagingArea?,
    log: @escaping @Sendable (String) -> Void, metrics: Metrics = Metrics(), tokenRefreshes: @escaping @Sendable () -> Int = { 0 },
    transferLoopAge: @escaping @Sendable () -> Double = { 0 }
  ) {
    self.metrics = metrics
    self.tokenRefreshes = tokenRefreshes
    self.transferLoopAge = transferLoopAge
    let view = PrefixedClient.view(client, below: prefix)
    self.client = view
    self.options = options
    cache = BlockCache(budget: options.cacheSize)
    self.staging = staging
    self.log = log
    namespace = Namespace(client: self.client, options: options, staging: staging, log: log)
    kernelMisses = TTLCache(ttl: options.missTTL, capacity: 50_000)
    kernelIO = KernelIOModes(log: log)
    var refusal: (any Error)? = nil
    // A read-only mount whose staging folder holds changes an earlier writable mount queued
    // shows them, and carries none out (they wait for a writable mount): without them, a
    // pinned folder renamed just before a kill -9 showed offline under both names, the old
    // one's files unreadable (issue 55 adversary F3).
    if let staging, options.writable || QueueLock.holdsChanges(staging.queueFolder(prefix: prefix)) {
      do {
        let disk: any QueueDisk = try options.queueDiskRecording.map { file throws(FSError) in try RecordedQueueDisk(file: file) } ?? SystemDisk()
        writeBack = try WriteBack(folder: staging.queueFolder(prefix: prefix), commit: options.commitInterval, disk: disk, log: log)
      } catch {
        writeBack = nil
        if options.writable { refusal = error }
      }
    } else {
      writeBack = nil
    }
    writeBackRefusal = refusal
    // What the queue has yet to put on the server or delete there (a rename's moves): named in
    // the bucket, asked of the queue by the name the mount shows.
    let queue = writeBack?.queue
    let queued: @Sendable (String) -> PinKeeper.Queued? = { name in
      guard let queue, let mine = view.viewName(name), let last = queue.view(mine) else { return nil }
      return last == .deleted ? .deleted : .version
    }
    let queuedUnder: @Sendable (String) -> Bool = { prefix in
      guard let queue else { return false }
      // A prefix above the mount's view holds all of it.
      return queue.hasQueued(under: view.viewName(prefix) ?? "")
    }
    pins = staging.map {
      PinKeeper(
        staging: $0, client: client, online: !options.offline, verifyEvery: options.pinVerifyInterval, queued: queued,
        queuedUnder: queuedUnder, log: log)
    }
    if let pins {
      namespace.offline.pins.set(pins)
      // Only when something is pinned: a mount with no pin sorts no queue at its start.
      if let queue, !pins.pins.isEmpty {
        let queued = queue.queued
        let bySequence = Dictionary(queued.map { ($0.sequence, $0) }, uniquingKeysWith: { a, _ in a })
        var renames: [(from: String, to: String)] = []
        for change in queued {
          if change.kind == .copy, let source = change.source { renames.append((source.name, change.name)) }
          if change.kind == .delete, let into = change.renamedInto.flatMap({ bySequence[$0] }) { renames.append((change.name, into.name)) }
        }
        pins.followQueued(renames: renames.map { (client.bucketName($0.from), client.bucketName($0.to)) })
      }
      pins.start(every: options.pinInterval)
    }
    namespace.listings.onEviction { [weak self] dir, names in self?.kernelForgets(evicted: dir, names) }
    // Inodes the kernel holds are paid for from the listings' share of the budget: evicting a
    // listing has the kernel forget its files' inodes.
    namespace.listings.countAlso { [inodes] in inodes.count * FolderListings.bytesPerInode }
    // An offline mount talks to no server: its changes wait in the queue for a mount that does.
    if let writeBack {
      let queue = writeBack.queue
      namespace.setQueuedNames { dir in queue.names(in: dir.isEmpty ? "" : dir + "/") }
    }
    writeBack?.queue.fillBases(from: baseFetcher)
    if let writeBack, options.writable, !options.offline {
      writeBack.queue.start(client: self.client) { [weak self, namespace, posixChanges] change, metadata in
        namespace.applied(change, metadata)
        switch change.life {
        case .done(.unknown), .failed:
          // The kernel's entry may be what the change would have left (a refused rename's
          // new name, a delete the bucket did not take): it looks the name up again.
          self?.kernelForgetsName(change.name)
          if change.isFailed { return }
        default: break
        }
        // The name holds someone else's version now (or theirs with our appended bytes after
        // it), not the bytes the kernel saw written.
        if change.conflictName != nil || change.wasMerged { self?.forgetKernelCache(ofObject: change.name) }
        // The bucket has what this mount set: its metadata answers from now on.
        posixChanges.applied(change.name, sequence: change.sequence)
        // A pinned file changed here: the pin keeps the new version (a v0 pass, which lists
        // names only, would not see that it changed).
        if let metadata, change.kind.putsVersion, change.conflictName == nil { namespace.noticePinned(change.name, metadata) }
        self?.pins?.refresh(overlapping: self?.client.bucketName(change.name) ?? change.name)
      }
    }
  }

  /// A folder's come from its placeholder object (`FolderObjects`) when it has one, as a file's
  /// from its object; without one, the mount's defaults and its start time.
  func attributes(ino: UInt64, directory: Bool, metadata given: StorageMetadata?) -> FileAttributes {
    var metadata = given
    if directory, metadata == nil, options.posix, let node = inodes.node(ino) {
      // A folder the mount could not ask about (offline, or the server away): a pin's listing.
      if let known = namespace.folders.get(node.path) { metadata = known.metadata } else { metadata = namespace.pinnedFolderObject(node.path) }
    }
    return attributes(
      ino: ino, directory: directory, size: metadata?.size, updated: metadata?.updated, created: metadata?.timeCreated,
      custom: metadata?.customMetadata)
  }

  /// A file open for writing, as `localFileEntry` shows it, from its edit: without a metadata
  /// object made and its time written out as text and read back (tar's chown and chmod each
  /// ask twice, and every getattr of a file being written once).
  func attributes(ino: UInt64, edit: LocalEdits.Edit) -> FileAttributes {
    let modified = edit.modified
    // To the millisecond, as a server's `updated` is.
    let updated = Date(timeIntervalSince1970: (modified.interval * 1000).rounded() / 1000)
    var a = attributes(ino: ino, directory: false, size: edit.size, updated: updated, created: updated, custom: edit.custom, kept: modified)
    a.volatile = true
    return a
  }

  /// A listed entry's attributes, from its summary (no `StorageMetadata` made per entry).
  func attributes(ino: UInt64, directory: Bool, summary: ObjectSummary?) -> FileAttributes {
    guard let summary, !directory else { return attributes(ino: ino, directory: directory, metadata: nil) }
    return attributes(
      ino: ino, directory: false, size: summary.size, updated: summary.updated, created: summary.timeCreated,
      custom: summary.customMetadata)
  }

  /// `kept`: the file's own time, instead of one kept in `custom`.
  private func attributes(
    ino: UInt64, directory: Bool, size: Int64?, updated: Date?, created: Date?, custom: [String: String]?, kept own: Timestamp? = nil
  ) -> FileAttributes {
    let (posix, pending, changedAt) = posixState(ino, custom)
    // A time this mount set and the bucket does not have yet; the time a writer kept in custom
    // metadata (ours and rclone's `mtime`, gcsfuse's `gcsfuse_mtime`, Google's tools' whole
    // seconds); else when the object was written.
    let kept = own ?? KeptTime.kept(in: custom)
    let mtime = pending?.mtime ?? kept ?? posix.mtime ?? updated.map(Timestamp.init) ?? mountTime
    // The last change of the object or its metadata (`updated` moves with both), or of what
    // this mount set and the bucket does not have yet.
    let ctime = max((updated ?? created).map(Timestamp.init) ?? mtime, changedAt ?? Timestamp(seconds: 0))
    var a = FileAttributes(
      ino: ino, size: directory ? 0 : size ?? 0, isDirectory: directory,
      mode: posix.mode ?? (directory ? options.dirMode : options.fileMode), uid: posix.uid ?? options.uid,
      gid: posix.gid ?? options.gid, mtime: mtime, ctime: ctime)
    a.atime = posix.atime
    a.statIno = inodes.statNumber(ino)
    if !directory, SymlinkObject.isLink(custom) { a.becomeLink(target: SymlinkObject.target(in: custom)) }
    return a
  }

  /// The POSIX attributes of file `ino`: what its object's metadata says, and over it what this
  /// mount set and has not seen applied yet (none with `-o posix=no`).
  func posixAttributes(_ ino: UInt64, _ custom: [String: String]?) -> PosixAttributes { posixState(ino, custom).attributes }

  /// `posixAttributes`; of them, what this mount set and the bucket does not have yet, and when
  /// it set that (nil: it did not).
  private func posixState(_ ino: UInt64, _ custom: [String: String]?) -> (attributes: PosixAttributes, pending: PosixAttributes?, changedAt: Timestamp?) {
    guard options.posix else { return (PosixAttributes(), nil, nil) }
    let stored = PosixAttributes(custom: custom)
    guard let mine = posixChanges.held({ inodes.node(ino).map { $0.objectName ?? $0.path } }) else { return (stored, nil, nil) }
    return (stored.overridden(by: mine.attributes), mine.attributes, mine.at)
  }

  func gsURL(_ objectPath: String) -> String { "gs://\(client.bucket)/\(client.bucketName(objectPath))" }

  /// The entries of folder `path` (relative to the mount root).
  package func listing(_ path: String) async throws(FSError) -> [DirectoryEntry] {
    try await namespace.listing(path)
  }

  /// Logs a failed operation once, with the object and the reason, when the failure has a cause
  /// worth a line (not a plain "no such file").
  package func failed(_ operation: String, _ error: FSError) {
    guard let cause = error.cause, cause.code != .objectNotFound, cause.code != .cancelled else { return }
    // A server that stopped answering for read_timeout fails the request at the same bound its
    // deadline would (which of the two comes first is a race): counted the same.
    if cause.isUnanswered { metrics.fuseTimeouts.add(1, ordering: .relaxed) }
    log("\(operation) \(cause.object.isEmpty ? "" : cause.object + ": ")\(cause.detail)")
  }

  /// How long the bridge lets a request that waits on the server go unanswered.
  package var requestTimeout: Double { options.readTimeout }

  // MARK: what the kernel is told to keep, and its references

  /// How long the kernel may keep `a`. A file changed here and not in the bucket yet changes
  /// only through this kernel (whose writes and setattrs update what it keeps) or by what the
  /// mount tells it to forget (`forgetKernelCache`): a second, so that the fstat after a
  /// create and the lookup of tar's utimensat after a close are answered by the kernel.
  package func cacheTime(_ a: FileAttributes) -> Double { a.volatile ? min(1, options.metadataTTL) : options.metadataTTL }

  /// How long the kernel may remember that a name is missing.
  package var missCacheTime: Double { options.missTTL }

  /// The kernel dropped `count` references to `ino` (forget), or never got one it was sent
  /// (a reply that came too late).
  package func forget(_ ino: UInt64, count: UInt64) { inodes.forget(ino, count: count) }

  /// The kernel got a reference to `ino` from a readdirplus entry.
  package func referenced(_ ino: UInt64) { inodes.addLookup(ino) }

  /// The attributes of folder `ino` as listings show "." and "..".
  package func folderAttributes(_ ino: UInt64) -> FileAttributes {
    var a = attributes(ino: ino, directory: true, metadata: nil)
    (a.mtime, a.ctime) = (Timestamp(seconds: 0), Timestamp(seconds: 0))
    return a
  }

  /// access(2): writing is refused on a read-only mount; the mode bits answer the rest.
  package func access(_ mask: Int32) -> Int32 { mask & W_OK != 0 && !takesChanges ? EROFS : 0 }

  /// What an operation a bucket cannot hold (links, device nodes) answers: `refusal` on a
  /// writable mount, EROFS on a read-only one.
  package func unsupported(_ refusal: Int32) -> Int32 { !takesChanges ? EROFS : refusal }

  /// Whether changes may be made through this mount (a read-only one may still show the
  /// changes an earlier writable mount queued in its staging folder).
  var takesChanges: Bool { options.writable && writeBack != nil }

  /// A request went unanswered for `seconds` and got EIO.
  /// A read of `handle` was answered EIO for passing read_timeout before the read itself was:
  /// the next reads of that object fail at once, as after the read's own timeout.
  package func readTimedOut(handle: UInt64) {
    if let file = fileHandles[handle]?.reading { readTimedOut(file) }
  }

  private func readTimedOut(_ file: OpenFile) {
    recentTimeouts.timedOut(file.objectName, generation: file.metadata.generation)
  }

  /// A FUSE request was answered, `seconds` after it arrived (the latency histograms).
  package func answered(_ operation: String, after seconds: Double) { metrics.fuse(operation, seconds: seconds) }

  package func timedOut(_ operation: String, seconds: Double) {
    metrics.fuseTimeouts.add(1, ordering: .relaxed)
    log("\(operation): no answer within \(seconds) s; answered EIO")
  }

  /// A lookup the server did not answer within its bound: on a writable mount the name is taken
  /// as absent (true), as an offline mount takes every name it has no copy of, so that a new file
  /// can be made with the server away (its upload is based on no object: if one exists after
  /// all, ours goes beside it). Read-only mounts answer EIO (false).
  package func absentAfterTimeout(parent: UInt64, name: String, seconds: Double) -> Bool {
    guard takesChanges, let dir = inodes.node(parent), dir.isDirectory, Namespace.isValidName(name) else { return false }
    let path = Namespace.join(dir.path, name)
    // A name this mount changed is answered from its changes, never from a timeout; one the
    // folder's last listing had is most likely still there (made anew, it would be a conflict).
    guard !localEntry(path).isChanged else { return false }
    if let known = namespace.listings.lastKnown(dir.path), known.contains(where: { Namespace.sameBytes($0.name, name) }) { return false }
    if namespace.heldWithoutServer(dir: dir.path, name: name) != nil { return false }
    metrics.fuseTimeouts.add(1, ordering: .relaxed)
    namespace.missing.add(path)
    if !saidLookupsTimeOut.exchange(true, ordering: .relaxed) {
      log("lookup: the server did not answer within \(seconds) s; names it did not answer for are taken as absent, so new files can be made (said once)")
    }
    return true
  }

  /// A lookup the server did not answer within its bound, answered as the folder's last
  /// listing or the server's last answer had the name, else as the staged copies and pins show
  /// it (`Namespace.heldWithoutServer`, what the lookup itself answers when the server is
  /// gone), with an inode that counts one kernel reference; nil when none knows it, or this
  /// mount changed the name (answered from its changes).
  package func lastListedAfterTimeout(parent: UInt64, name: String) -> FileAttributes? {
    guard let dir = inodes.node(parent), dir.isDirectory, Namespace.isValidName(name) else { return nil }
    guard !localEntry(Namespace.join(dir.path, name)).isChanged, let entry = namespace.heldWithoutServer(dir: dir.path, name: name) else {
      return nil
    }
    return linked(entry, in: dir.path)
  }

  // MARK: lookup and getattr

  /// Resolves `name` in folder `parent`; the returned inode counts one kernel reference.
  package func lookup(parent: UInt64, name: String) async throws(FSError) -> FileAttributes {
    if let cached = lookupIfCached(parent: parent, name: name) { return try cached.get() }
    guard let dir = inodes.node(parent) else { throw FSError(ESTALE) }
    guard dir.isDirectory else { throw FSError(ENOTDIR) }
    if name.utf8.count > 255 { throw FSError(ENAMETOOLONG) }
    guard Namespace.isValidName(name) else { throw FSError(ENOENT) }
    let local = localEntry(Namespace.join(dir.path, name))
    if local.isChanged {
      guard let entry = local.entry else { throw FSError(ENOENT) }
      return linked(entry, in: dir.path, local: true)
    }
    let entry: DirectoryEntry
    do {
      entry = try await namespace.resolve(dir: dir.path, name: name)
    } catch let error where error.cause?.isUnanswered == true {
      // The server stopped answering and no staged copy has the name: the same answer as when
      // the lookup's deadline runs out first (the two race when both are read_timeout).
      if let known = lastListedAfterTimeout(parent: parent, name: name) { return known }
      if absentAfterTimeout(parent: parent, name: name, seconds: options.readTimeout) { throw FSError(ENOENT) }
      throw error
    }
    // Found by Swift's string equality, which is canonical equivalence: another spelling of the
    // name (NFD for NFC) is another object.
    guard Namespace.sameBytes(entry.name, name) else { throw FSError(ENOENT) }
    return linked(entry, in: dir.path)
  }

  /// The entry's attributes, with an inode that counts one kernel reference.
  /// `local`: the entry is this mount's own change (nil: look).
  private func linked(_ entry: DirectoryEntry, in dir: String, local: Bool? = nil) -> FileAttributes {
    let node = InodeTable.Node(path: Namespace.join(dir, entry.name), isDirectory: entry.isDirectory, objectName: entry.objectName)
    if local != true { separateOlderOpens(node, naming: entry.summary?.generation) }
    let ino = inodes.ino(for: node, lookup: true)
    var a = attributes(ino: ino, directory: entry.isDirectory, summary: entry.summary)
    a.volatile = !entry.isDirectory && (local ?? localEntry(node.path).isChanged)
    return a
  }

  /// Attributes of a name this mount changed; a file's are volatile (the kernel keeps nothing).
  private func localAttributes(_ ino: UInt64, _ entry: DirectoryEntry) -> FileAttributes {
    var a = attributes(ino: ino, directory: entry.isDirectory, metadata: entry.metadata)
    a.volatile = !entry.isDirectory
    return a
  }

  package func getattr(_ ino: UInt64, handle: UInt64? = nil) async throws(FSError) -> FileAttributes {
    if let cached = getattrIfCached(ino, handle: handle) { return cached }
    guard let node = inodes.node(ino) else { throw FSError(ESTALE) }
    let local = localEntry(node.path)
    if local.isChanged {
      guard let entry = local.entry else {
        // Removed here while open: the kernel asks through the handle before each read, and
        // a file open on a disk reads on after an unlink (a read answered ENOENT).
        if let opened = openedAttributes(ino, handle: handle) { return opened }
        // The name went after the kernel looked it up: ESTALE has the caller look it up again,
        // once (a stat; an open's permission check, where ENOENT failed a `>>` beside `rm`,
        // which then makes the file anew), and find it missing, or made again.
        throw FSError(ESTALE)
      }
      return localAttributes(ino, entry)
    }
    if node.isDirectory {
      await namespace.learnFolderObject(node.path)
      return attributes(ino: ino, directory: true, metadata: nil)
    }
    let m: StorageMetadata
    do {
      m = try await namespace.fileMetadata(node.objectName ?? node.path)
    } catch let error where error.errno == ENOENT && openedAttributes(ino, handle: handle) != nil {
      // Gone from the bucket while open: what the handle reads, as above.
      return openedAttributes(ino, handle: handle)!
    } catch let error where error.cause?.isUnanswered == true {
      // The server stopped answering: the attributes it gave last, however old (a file looked
      // up a moment ago is not an I/O error to stat).
      guard let known = lastKnownAttributes(ino) else { throw error }
      return known
    }
    return attributes(ino: ino, directory: false, metadata: m)
  }

  /// What handle `handle` of `ino` reads (none given: any open handle of it, as for fstat):
  /// the version it opened, the edit it writes, the queued bytes it reads (nil: no handle).
  func openedAttributes(_ ino: UInt64, handle: UInt64?) -> FileAttributes? {
    guard let handle = handle ?? kernelIO.anyHandle(of: ino), let opened = fileHandles[handle] else { return nil }
    switch opened {
    case .read(let file):
      return attributes(ino: ino, directory: false, metadata: file.metadata)
    case .edit(let edit):
      return attributes(ino: ino, edit: edit.edit)
    case .queued(let file):
      var st = stat()
      guard withExtendedLifetime(file, { fstat(file.fd, &st) }) == 0 else { return nil }
      let modified = Timestamp(seconds: Int64(st.st_mtim.tv_sec), nanoseconds: Int64(st.st_mtim.tv_nsec))
      var a = FileAttributes(
        ino: ino, size: Int64(st.st_size), isDirectory: false, mode: options.fileMode, uid: options.uid, gid: options.gid, mtime: modified,
        ctime: modified)
      a.volatile = true
      return a
    }
  }

  /// A getattr the server did not answer within its bound: a file's attributes as the server
  /// last gave them, however old, else as its staged copy has them (`heldAttributes`, what
  /// getattr answers when the server is gone: a pinned file stat'ed fine with the server
  /// killed and EIO with it frozen); a folder's as `getattr` gives them when its placeholder
  /// cannot be asked about (a folder is a folder without the server); nil when the mount never
  /// had a file's (the caller answers EIO).
  package func lastKnownAttributes(_ ino: UInt64) -> FileAttributes? {
    guard let node = inodes.node(ino) else { return nil }
    if node.isDirectory {
      guard !localEntry(node.path).isChanged else { return nil }
      return attributes(ino: ino, directory: true, metadata: nil)
    }
    guard let m = namespace.heldAttributes(node.objectName ?? node.path) else { return nil }
    return attributes(ino: ino, directory: false, metadata: m)
  }

  // MARK: directories

  /// A folder the server did not list within its bound, opened with what the mount knows: its
  /// last listing from the server however old (else, with staging, the staged copies' part of
  /// it) and this mount's own changes; nil when it knows nothing of it (the caller answers EIO).
  /// Said once in the log.
  package func openDirectoryFromWhatIsKnown(_ ino: UInt64, seconds: Double) -> UInt64? {
    guard let node = inodes.node(ino), node.isDirectory else { return nil }
    guard let known = namespace.listingWithoutServer(node.path, because: "no answer within \(seconds) s") else { return nil }
    metrics.fuseTimeouts.add(1, ordering: .relaxed)
    if !saidListingsTimeOut.exchange(true, ordering: .relaxed) {
      log("listing: the server did not answer within \(seconds) s; folders are listed as last seen, with this mount's changes (said once)")
    }
    return openDirs.add(.whole(mergedLocally(node.path) { known }.entries))
  }

  package func openDirectory(_ ino: UInt64) async throws(FSError) -> UInt64 {
    guard let node = inodes.node(ino) else { throw FSError(ESTALE) }
    guard node.isDirectory else { throw FSError(ENOTDIR) }
    do throws(FSError) {
      // With no change of this mount in it, the folder is read as its pages arrive.
      guard hasLocalChanges(in: node.path) else {
        return openDirs.add(try await namespace.openListing(node.path, unansweredThrows: true))
      }
      return openDirs.add(
        .whole(
          try await mergedListing(node.path) { () async throws(FSError) in try await namespace.listing(node.path, unansweredThrows: true) }))
    } catch where error.cause?.isUnanswered == true {
      // The server stopped answering within read_timeout, the bound the request's deadline has
      // too: which of the two ends it first is a race, so both answer the same way.
      if let handle = openDirectoryFromWhatIsKnown(ino, seconds: options.readTimeout) { return handle }
      throw error
    }
  }

  /// What a `readDirectory` found past the entries it handed out.
  package enum DirectoryRead {
    /// Nothing more now: the end, or the reply is full.
    case done
    /// No entry at `offset` yet: more are arriving (wait, then read again).
    case waitFor(ListingStream, count: Int)
    /// The listing broke off at `offset` (the server failed after its first pages).
    case failed(FSError)
  }

  /// Hands out the entries from `offset` on, one by one, until `emit` says the reply is full;
  /// nothing is done for entries after that, so listing a folder in many replies stays linear.
  /// `linked` entries carry an inode the kernel may keep (readdirplus: the caller counts a kernel
  /// reference when it hands one out); the others carry a listed-only number and no attributes
  /// worth caching — names first: a v0 listing has no attributes, and `lookup` fetches them.
  @discardableResult
  package func readDirectory(
    _ ino: UInt64, handle: UInt64, offset: Int, plus: Bool,
    emit: (DirectoryEntry, FileAttributes, _ linked: Bool) -> Bool
  ) -> DirectoryRead {
    guard let node = inodes.node(ino), let opened = openDirs[handle] else { return .done }
    var index = offset
    switch opened {
    case .whole(let entries):
      while index < entries.count {
        guard emitEntry(entries[index], index, in: node.path, plus: plus, emit) else { return .done }
        index += 1
      }
      return .done
    case .arriving(let stream):
      // A few at a time: a reply holds tens of entries.
      while true {
        let (batch, count, phase) = stream.entries(from: index, limit: 64)
        for e in batch {
          guard emitEntry(e, index, in: node.path, plus: plus, emit) else { return .done }
          index += 1
        }
        guard batch.isEmpty else { continue }
        if index > offset { return .done }
        switch phase {
        case .arriving: return .waitFor(stream, count: count)
        case .complete: return .done
        case .failed(let error):
          log("listing \(node.path.isEmpty ? "/" : node.path) broke off after \(count) entries: \(error.detail)")
          return .failed(FSError(error))
        }
      }
    }
  }

  /// Hands entry `index` of folder `dir` to `emit`; false when the reply is full.
  private func emitEntry(
    _ e: DirectoryEntry, _ index: Int, in dir: String, plus: Bool, _ emit: (DirectoryEntry, FileAttributes, _ linked: Bool) -> Bool
  ) -> Bool {
    let path = Namespace.join(dir, e.name)
    let n = InodeTable.Node(path: path, isDirectory: e.isDirectory, objectName: e.objectName)
    let summary = e.summary ?? (e.isDirectory ? nil : namespace.files.summary(e.objectName ?? path))
    if plus && (e.isDirectory ? !namespace.folderUnknown(path) : summary != nil) && inodes.count < inodeLimit {
      separateOlderOpens(n, naming: summary?.generation)
      let (ino, created) = inodes.inoCreating(n)
      guard emit(e, attributes(ino: ino, directory: e.isDirectory, summary: summary), true) else {
        if created { inodes.dropIfUnreferenced(ino) }
        return false
      }
    } else {
      let ino = inodes.existing(n) ?? InodeTable.listedIno(dir: dir, index: index)
      guard emit(e, attributes(ino: ino, directory: e.isDirectory, summary: summary), false) else { return false }
    }
    return true
  }

  /// Past this many inodes, readdirplus hands out names only (the kernel looks a name up when
  /// a program asks for its attributes): every inode readdirplus gives the kernel is kept until
  /// the kernel forgets it, and a walk of millions of files would otherwise hold one each. A
  /// quarter of `metadata_cache_size`, at about 256 bytes an inode.
  var inodeLimit: Int { options.metadataCacheSize / 4 / FolderListings.bytesPerInode }

  package func releaseDirectory(_ handle: UInt64) {
    openDirs.remove(handle)
  }

  // MARK: files

  /// Whether this mount would open staged copies by passthrough (it has staging, and
  /// `-o passthrough=no` was not given): the bridge then offers `BackingFiles`.
  package var wantsPassthrough: Bool { options.passthrough && staging != nil }

  /// The bridge can register backing files; INIT says whether the kernel takes passthrough.
  package func offerPassthrough(_ files: BackingFiles) { kernelIO.offer(files) }

  package var passthroughOffered: Bool { kernelIO.offered }

  /// INIT's answer: whether a program may map a direct I/O open shared (`KernelIOModes`).
  package func directIOMapsStarted(_ on: Bool) { kernelIO.mapsDirectIO(on) }

  /// Where the staged copies live (nil: no staging), for the bridge's checks of its filesystem.
  package var stagingFolder: String? { staging?.folder.path }

  /// INIT's answer: passthrough is on, or the kernel does not offer it (said in the log).
  package func passthroughStarted(_ on: Bool) {
    kernelIO.started(on)
    if !on { log("passthrough: this kernel does not offer it (Linux 6.9 or later with CONFIG_FUSE_PASSTHROUGH); staged files are read through the daemon") }
  }

  /// Opens a file for reading: pins its generation (settled: `settled(_:)`) and starts staging
  /// it. Returns the handle and how the kernel reads it: by passthrough from a verified staged
  /// copy, or through its page cache, keeping pages from an earlier open of the same generation.
  /// `opener`: the process that opens (its second try after an ESTALE is never sent on again).
  /// `tries`: how many times the open starts again when this mount's own bytes of the name
  /// came while it opened a version (below).
  /// `secondTry`: whether it is the kernel's second try of an open sent to a new inode
  /// (`isSecondTry`, asked when nil).
  package func open(
    _ ino: UInt64, flags: Int32, opener: Int32 = 0, tries: Int = 3, secondTry: Bool? = nil
  ) async throws(FSError) -> (handle: UInt64, io: KernelIO) {
    guard let node = inodes.node(ino) else { throw FSError(ESTALE) }
    if node.isDirectory { throw FSError(EISDIR) }
    let secondTry = secondTry ?? isSecondTry(node, opener: opener)
    // Once this open joined the edit again (or did not), the first try's handle goes.
    defer { if secondTry { releaseHeld(node, opener: opener) } }
    let ownBefore = ownChanges(node.objectName ?? node.path)
    if let local = try await openLocal(node.objectName ?? node.path, ino: ino, flags: flags) {
      openedGenerations.withLock { _ = $0.removeValue(forKey: ino) }
      let (own, writes) = ownBytes(local)
      // Write-only: a program that also reads through its `O_APPEND` descriptor may map it
      // shared, which direct I/O refuses (ENODEV).
      let appends = EditHandle.access(flags: flags) == .appending && flags & O_ACCMODE == O_WRONLY
      let open = { (mayGoElsewhere: Bool) in
        self.kernelIO.open(
          ino, handle: local, version: nil, own: own, writes: writes, appends: appends, keepCache: false, mayGoElsewhere: mayGoElsewhere
        ) { nil }
      }
      var io = open(true)
      if io == nil {
        guard !sendToNewInode(ino, node, opener: opener, secondTry: secondTry) else {
          if let opened = fileHandles.remove(local) { holdForSecondTry(opened, node, opener: opener) }
          throw FSError(ESTALE)
        }
        io = open(false)
      }
      // A reader of bytes this mount queued, beside an edit of the name that opened meanwhile
      // (before this open counted among the inode's, so the writer did not go elsewhere): the
      // edit's writes size the inode, and a map of this open, made through the pages, was
      // filled with the queued bytes up to that size: zeros. It starts again and joins the edit.
      if tries > 1, case .queued? = fileHandles[local], ownChanges(node.objectName ?? node.path) != ownBefore {
        release(handle: local)
        return try await self.open(ino, flags: flags, opener: opener, tries: tries - 1, secondTry: secondTry)
      }
      return (local, io ?? .direct)
    }
    // A name this mount renamed, whose copy the bucket has not made yet, reads the source's bytes.
    var path = node.objectName ?? node.path
    let named: StorageMetadata
    var renamedTo: String?
    // The version an older inode's opens read is read as it is, never settled onto a newer one.
    var held = false
    if case .copied(let source, _)? = writeBack?.queue.view(path) {
      renamedTo = path
      if let carried = staging?.completeCopy(client.bucketName(path), generation: source.generation) {
        // Its copy carried to the new name (a pin follows a rename): read there, the server away too.
        named = carried
      } else {
        named = try await copySource(source)
        path = source.name
      }
    } else if let version = heldByOlderInode(ino) {
      named = version
      held = true
    } else {
      named = try await namespace.fileMetadata(path)
    }
    let objectName = client.bucketName(path)
    var file = openedVersion(objectName, named, renamedTo: renamedTo)
    if renamedTo == nil && !held { file = await settled(file) }
    // The version the handle reads: the one named, or the newest when that one is gone.
    let m = file.metadata
    let keep = openedGenerations.withLock { g -> Bool in
      let same = g[ino] == m.generation
      g[ino] = m.generation
      return same
    }
    let fh = fileHandles.add(.read(file))
    readAhead(after: node)
    let open = { (mayGoElsewhere: Bool) in
      self.kernelIO.open(ino, handle: fh, version: m, keepCache: keep, mayGoElsewhere: mayGoElsewhere) {
        self.staging?.verifiedFile(objectName, generation: m.generation)
      }
    }
    var opened = open(renamedTo == nil)
    if opened == nil {
      guard !sendToNewInode(ino, node, opener: opener, secondTry: secondTry) else {
        _ = fileHandles.remove(fh)
        file.reader.cancelFetches()
        staging?.release(objectName, generation: m.generation)
        throw FSError(ESTALE)
      }
      opened = open(false)
    }
    let io = opened ?? .direct
    // An edit of the name opened (and its kernel writes sized the inode) or its bytes were
    // queued while this open named a version: the kernel would read that version's bytes up to
    // the size the writes gave the inode, and fill the rest with zeros. The open starts again
    // and reads the mount's own bytes, as an open after the close does. (Where the inode moved
    // on, the writer went to a new one: this one keeps the version.)
    if tries > 1, renamedTo == nil, !held, ownChanges(node.objectName ?? node.path) != ownBefore, inodes.standsForItsPath(ino) {
      release(handle: fh)
      return try await self.open(ino, flags: flags, opener: opener, tries: tries - 1, secondTry: secondTry)
    }
    // The inode's pages are still the older version's: the next cached open must drop them.
    if io == .direct { openedGenerations.withLock { _ = $0.removeValue(forKey: ino) } }
    if let shown = kernelIO.pinned(ino) { kernelHoldsSize(of: shown, ino) }
    if case .passthrough(_, directIO: false) = io { metrics.passthroughOpens.add(1, ordering: .relaxed) }
    return (fh, io)
  }

  /// What of this mount's own bytes of `path` there is: whether an edit of it is open, and the
  /// queued change whose result it shows.
  private func ownChanges(_ path: String) -> OwnChanges {
    guard let writeBack else { return OwnChanges(editOpen: false, queued: nil) }
    return OwnChanges(editOpen: writeBack.edits[path] != nil, queued: writeBack.queue.viewed(path))
  }

  private struct OwnChanges: Equatable {
    let editOpen: Bool
    let queued: UInt64?
  }

  /// When `node` was opened right after the entry before it in its folder's listing, fetches
  /// the next small files whole into the block cache, so that their opens find them there. Only
  /// files a first read stages whole (or, without staging, up to 1 MiB): larger ones are read
  /// into their staged copies instead.
  private func readAhead(after node: InodeTable.Node) {
    guard !options.offline, node.objectName != nil else { return }
    let (dir, name) = Namespace.split(node.path)
    guard let found = namespace.position(dir: dir, name: name) else { return }
    let (entries, index) = (found.entries, found.index)
    let wanted = folderReadAhead.opened(dir: dir, index: index, count: entries.count)
    guard !wanted.isEmpty else { return }
    let largest = StagingArea.readAheadLimit(staging: staging)
    let candidates = entries[wanted].filter { !$0.isDirectory && $0.objectName != nil && ($0.metadata?.size ?? 0) <= largest }
    metrics.readAheadFiles.add(candidates.count, ordering: .relaxed)
    Task { [self] in
      await withTaskGroup(of: Void.self) { group in
        for entry in candidates {
          // A slot first: a few GETs at a time, across every folder being read.
          await readAheadSlots.acquire()
          group.addTask { [self] in
            defer { readAheadSlots.release() }
            guard let entryName = entry.objectName else { return }
            var known = entry.metadata
            if known == nil { known = try? await namespace.fileMetadata(entryName) }
            guard let m = known, m.size <= largest else { return }
            let fullName = client.bucketName(entryName)
            // Staged already, or cached: nothing to fetch.
            if staging?.status(fullName, generation: m.generation, size: m.size).isComplete == true { return }
            if cache.cached(BlockCache.Key(name: fullName, generation: m.generation, page: 0)) != nil { return }
            await ObjectReader(client: client.bucketWide, cache: cache, name: fullName, generation: m.generation, size: m.size).fetchAhead()
          }
        }
      }
    }
  }

  /// A read that `readIfCached` could not answer at once: down the same sources
  /// (`ReadSource`), waiting for the server where they must, within `read_timeout`.
  package func read(handle: UInt64, offset: Int64, count: Int) async throws(FSError) -> ReadReply {
    guard let opened = fileHandles[handle] else { throw FSError(EBADF) }
    guard case .read(let file) = opened else { return try await readLocal(opened, offset: offset, count: count) }
    let range = readRange(file, offset: offset, count: count)
    if range.isEmpty { return .bytes(Data()) }
    if options.offline {
      // Only what is here answers.
      guard let reply = answerNow(file, range) else { throw FSError(EIO) }
      return reply
    }
    if recentTimeouts.isFresh(file.objectName, generation: file.metadata.generation, openedAt: file.opened) { throw FSError(EIO) }
    metrics.cacheMisses.add(1, ordering: .relaxed)
    do {
      let reply = try await answer(file, range, by: ReadDeadline(seconds: options.readTimeout, object: file.objectName))
      staging?.served(file.copy)
      file.settled.store(true, ordering: .relaxed)
      return reply
    } catch where error.code == .objectChanged && file.renamedTo == nil && !file.settled.load(ordering: .relaxed) {
      // Opened while the server did not answer its first bytes, from an answer about a version
      // someone else has replaced since: nothing was read from it, so the handle reads the
      // newest version instead, where it can (a new open never fails because the object
      // changed; only a handle that read the old one may).
      guard await moveToNewest(handle, from: file) else { throw FSError(error) }
      return try await read(handle: handle, offset: offset, count: count)
    } catch where (error.code == .objectNotFound || error.code == .objectChanged) && file.renamedTo != nil {
      // The rename's copy landed and the old name went: the same bytes are under the new name.
      guard let moved = await renamedCopy(of: file) else { throw FSError(error) }
      fileHandles.replace(handle, with: .read(moved))
      staging?.release(file.objectName, generation: file.metadata.generation)
      return try await read(handle: handle, offset: offset, count: count)
    } catch {
      if error.code == .timedOut || error.code == .retryLimitExceeded { readTimedOut(file) }
      throw FSError(error)
    }
  }

  /// The generation a read handle reads (nil: not one reading an object's version).
  package func handleGeneration(_ handle: UInt64) -> Int64? {
    if case .read(let file)? = fileHandles[handle] { file.metadata.generation } else { nil }
  }

  /// `file`'s bytes where the rename this mount queued put them, when the bucket has them there
  /// (the same size and hash): nil when it does not.
  private func renamedCopy(of file: OpenFile) async -> OpenFile? {
    guard let target = file.renamedTo, let m = try? await namespace.fileMetadata(target) else { return nil }
    let source = PendingChange.Source(
      name: file.objectName, generation: file.metadata.generation, size: file.metadata.size, crc32c: file.metadata.crc32c,
      md5Hash: file.metadata.md5Hash)
    guard m.holdsBytes(of: source) else { return nil }
    let name = client.bucketName(target)
    let reader = ObjectReader(client: client.bucketWide, cache: cache, name: name, generation: m.generation, size: m.size)
    return OpenFile(objectName: name, metadata: m, reader: reader, copy: nil)
  }

  package func release(handle: UInt64) {
    kernelIO.release(handle)
    guard let opened = fileHandles.remove(handle) else { return }
    guard case .read(let file) = opened else { return releaseLocal(opened) }
    // Read-ahead of a closed file is wasted: stop it, unless another handle reads the object.
    let stillOpen = fileHandles.contains {
      $0.reading.map { $0.objectName == file.objectName && $0.metadata.generation == file.metadata.generation } == true
    }
    if !stillOpen { file.reader.cancelFetches() }
    staging?.release(file.objectName, generation: file.metadata.generation)
  }

  // MARK: answers from the caches, without a task hop (nil: ask the async function)

  package func lookupIfCached(parent: UInt64, name: String) -> Result<FileAttributes, FSError>? {
    guard let dir = inodes.node(parent), dir.isDirectory, Namespace.isValidName(name) else { return nil }
    let local = localEntry(Namespace.join(dir.path, name))
    if local.isChanged {
      guard let entry = local.entry else { return .failure(FSError(ENOENT)) }
      return .success(linked(entry, in: dir.path, local: true))
    }
    return namespace.resolveIfCached(dir: dir.path, name: name)?.flatMap { entry in
      Namespace.sameBytes(entry.name, name) ? .success(linked(entry, in: dir.path)) : .failure(FSError(ENOENT))
    }
  }

  /// `handle`: the open handle the kernel asks through (before a read, lseek to the end), if any.
  package func getattrIfCached(_ ino: UInt64, handle: UInt64? = nil) -> FileAttributes? {
    guard let node = inodes.node(ino) else { return nil }
    // An inode the name moved on from (a newer version, this mount's edit of it) describes
    // what its opens read, never what the name holds now.
    if !node.isDirectory, !inodes.standsForItsPath(ino), let version = shownVersion(ino, handle: handle) {
      return attributes(ino: ino, directory: false, metadata: version)
    }
    if let edit = writeBack?.edits[node.path] { return attributes(ino: ino, edit: edit) }
    let local = localEntry(node.path)
    if local.isChanged {
      // Removed here: the async path answers ENOENT.
      return local.entry.map { localAttributes(ino, $0) }
    }
    if node.isDirectory {
      // A folder whose placeholder is not known yet: the async path asks.
      if namespace.folderUnknown(node.path) { return nil }
      return attributes(ino: ino, directory: true, metadata: nil)
    }
    if let version = shownVersion(ino, handle: handle) { return attributes(ino: ino, directory: false, metadata: version) }
    guard let m = namespace.files.get(node.objectName ?? node.path) else { return nil }
    return attributes(ino: ino, directory: false, metadata: m)
  }

  package func xattrsIfCached(_ ino: UInt64) -> [(String, String)]? {
    guard let node = inodes.node(ino) else { return nil }
    if !node.isDirectory, case let local = localEntry(node.path), local.isChanged {
      guard local.entry != nil else { return nil }
      return [("user.gs_url", gsURL(node.path))] + syncAttributes(node.objectName ?? node.path, nil)
    }
    if node.isDirectory { return Xattrs.forDirectory(gsURL: gsURL(node.path.isEmpty ? "" : node.path + "/")) + pinXattrs(node) }
    guard let m = namespace.files.get(node.objectName ?? node.path) else { return nil }
    return xattrs(node, m)
  }

  /// The bytes when they are at hand: in a complete staged copy, in the copy being filled, or
  /// in the block cache. Nil when the async path must fetch them.
  package func readIfCached(handle: UInt64, offset: Int64, count: Int) -> ReadReply? {
    guard let opened = fileHandles[handle] else { return nil }
    guard case .read(let file) = opened else { return readLocalIfReady(opened, offset: offset, count: count) }
    let range = readRange(file, offset: offset, count: count)
    if range.isEmpty { return .bytes(Data()) }
    guard let reply = answerNow(file, range) else { return nil }
    metrics.cacheHits.add(1, ordering: .relaxed)
    file.settled.store(true, ordering: .relaxed)
    return reply
  }

  // MARK: metrics

  package func readings() -> Metrics.Readings {
    let (stagedBytes, stagedFiles) = staging?.totals ?? (0, 0)
    let (pinnedBytes, pinnedFiles) = staging?.pinnedTotals ?? (0, 0)
    var readings = Metrics.Readings(
      cacheBytes: cache.bytesCached, cacheEvictions: cache.evictions, stagingBytes: stagedBytes, stagingFiles: stagedFiles,
      stagingEvicted: staging?.evicted.load(ordering: .relaxed) ?? 0, stagingDropped: staging?.dropped.load(ordering: .relaxed) ?? 0,
      openHandles: fileHandles.count { $0.reading != nil }, retries: TransferCounters.retries.load(ordering: .relaxed),
      tokenRefreshes: tokenRefreshes(), transferLoopAge: transferLoopAge(),
      stagingBuffersFree: staging?.buffersFree ?? StagingWriter.poolSize, queue: writeBack?.queue.totals)
    readings.pins = pins?.pins.filter { !$0.isRefused }.count ?? 0
    (readings.metadataEntries, readings.metadataBytes, readings.metadataEvictions) = namespace.heldMetadata
    readings.metadataBudget = options.metadataCacheSize
    readings.foldersListedAhead = namespace.foldersListedAhead.load(ordering: .relaxed)
    readings.listingsFromLast = namespace.listingsFromLast.load(ordering: .relaxed)
    readings.inodes = inodes.count
    (readings.pinnedFiles, readings.pinnedBytes) = (pinnedFiles, pinnedBytes)
    readings.pinPasses = pins?.passTotals ?? PinKeeper.PassTotals()
    return readings
  }

  /// The extended attribute of the mount's root that `bucketfs stats` reads.
  package static let statsAttribute = "user.bucketfs.stats"

  package func statsText() -> String {
    metrics.summary(readings()).map { "\($0.0)\t\($0.1)" }.joined(separator: "\n") + "\n"
  }

  // MARK: extended attributes

  package func xattrs(_ ino: UInt64) async throws(FSError) -> [(String, String)] {
    if let cached = xattrsIfCached(ino) { return cached }
    guard let node = inodes.node(ino) else { throw FSError(ESTALE) }
    return xattrs(node, try await namespace.fileMetadata(node.objectName ?? node.path))
  }

  private func xattrs(_ node: InodeTable.Node, _ m: StorageMetadata) -> [(String, String)] {
    let objectName = node.objectName ?? node.path
    let token = m.downloadTokens?.split(separator: ",").first.map(String.init)
    let url = token.map { client.downloadURL(name: objectName, token: $0) }
    let staged = staging?.status(client.bucketName(objectName), generation: m.generation, size: m.size) ?? .none
    return Xattrs.forFile(metadata: m, gsURL: gsURL(objectName), downloadURL: url, staged: staged) + syncAttributes(objectName, m)
      + pinXattrs(node)
  }
}
