// Writes through a writable mount (`-o writable`). A file opened for writing is a private local
// file (LocalEdits); each close queues a durable copy of its bytes (WriteBackQueue), which the
// queue's worker uploads with a precondition on the generation the bytes were based on. Until a
// change is in the bucket, the mount shows it from the queue: listings merge queued creates and
// deletes, and reads of a queued file read the queued bytes.
import Foundation
import StorageCore

extension BucketFilesystem {
  func writable() throws(FSError) -> WriteBack {
    guard let writeBack else { throw FSError(EROFS) }
    return writeBack
  }

  // MARK: the local view

  /// A name as this mount's own changes (open edits, queued changes) show it.
  enum LocalEntry {
    /// None is queued or open: the bucket's answer stands.
    case unchanged
    case removed
    case file(DirectoryEntry)
    case folder(DirectoryEntry)

    var isChanged: Bool {
      if case .unchanged = self { false } else { true }
    }
    /// What the name shows, when this mount put something there.
    var entry: DirectoryEntry? {
      switch self {
      case .file(let e), .folder(let e): e
      case .unchanged, .removed: nil
      }
    }
  }

  func localEntry(_ path: String) -> LocalEntry {
    guard let writeBack else { return .unchanged }
    let name = Namespace.split(path).name
    if let edit = writeBack.edits[path] {
      return .file(localFile(name: name, path: path, size: edit.size, mtime: edit.modified, custom: edit.custom))
    }
    let view = writeBack.queue.view(path)
    if let (size, mtime) = view?.fileAttributes {
      return .file(localFile(name: name, path: path, size: size, mtime: mtime, custom: writeBack.queue.queuedMetadata(path)?.custom))
    }
    // A folder this mount made or put something in (a queued upload under it) shows; one whose
    // placeholder it deleted, with nothing uploaded under it, does not.
    if writeBack.queue.hasUploads(under: path + "/") || !writeBack.edits.names(in: path + "/").isEmpty {
      return .folder(DirectoryEntry(name: name, isDirectory: true))
    }
    let placeholder = writeBack.queue.view(path + "/")
    if view == .deleted || placeholder == .deleted { return .removed }
    if placeholder == .folder { return .folder(DirectoryEntry(name: name, isDirectory: true)) }
    return .unchanged
  }

  private func localFile(name: String, path: String, size: Int64, mtime: Double, custom: [String: String]?) -> DirectoryEntry {
    let when = Date(timeIntervalSince1970: mtime)
    let metadata = StorageMetadata(dictionary: [
      "name": client.bucketName(path), "bucket": client.bucket, "size": String(size), "generation": "0",
      "updated": StorageMetadata.formatDate(when), "timeCreated": StorageMetadata.formatDate(when),
    ])
    // Only the POSIX and link entries and the access time: a kept `mtime` would hide the local
    // file's own time.
    let posix = PosixAttributes(custom: custom)
    var shown = PosixAttributes(mode: posix.mode, uid: posix.uid, gid: posix.gid, atime: posix.atime).custom
    if SymlinkObject.isLink(custom), let custom { shown.merge(custom.filter { $0.key == SymlinkObject.key || $0.key == SymlinkObject.targetKey }) { a, _ in a } }
    metadata.customMetadata = shown
    return DirectoryEntry(name: name, isDirectory: false, objectName: path, metadata: metadata)
  }

  /// Folder `dir`'s listing with this mount's own changes merged in. A listed sub-folder whose
  /// contents this mount is deleting (the bucket still has them until the queue gets there) is
  /// left out when nothing else is left in it and it has no placeholder of its own, so that
  /// `rm -r` and `mv` can remove it while a folder made with mkdir stays.
  func mergedListing(_ dir: String, _ listing: () async throws(FSError) -> [DirectoryEntry]) async throws(FSError) -> [DirectoryEntry] {
    let local = localChanges(in: dir)
    var (merged, deletedUnder) = Self.merge(try await listing(), local)
    // Listed by the bucket, touched here only by deletes: gone if nothing is left in it.
    for name in deletedUnder {
      let path = Namespace.join(dir, name)
      if try await mergedListing(path, { () async throws(FSError) in try await namespace.listing(path) }).isEmpty {
        await namespace.learnFolderObject(path)
        if namespace.folders.get(path)?.metadata == nil { merged.removeAll { $0.name == name && $0.isDirectory } }
      }
    }
    return merged
  }

  /// Folder `dir`'s listing (`known`: what the mount holds of it) with this mount's own changes
  /// merged in, without asking anything; and the listed sub-folders that this mount only deleted
  /// things in (whether any is left in them takes their own listing).
  func mergedLocally(_ dir: String, _ known: () -> [DirectoryEntry]) -> (entries: [DirectoryEntry], deletedUnder: [String]) {
    let local = localChanges(in: dir)
    return Self.merge(known(), local)
  }

  /// What this mount's changes (queued or being edited) show of the names in folder `dir`: the
  /// raw name (a folder's with its "/") and its local entry. Taken before the bucket's listing
  /// is read, never after: the queue lets a change go only once the mount's caches hold the
  /// bucket's answer, so a listing read after this holds every change that left the queue
  /// meanwhile, and this every change that has not. (Read the other way round, a change that
  /// lands between the two reads would be in neither: a file just written missing from `ls`,
  /// one just deleted back in it.)
  private func localChanges(in dir: String) -> [(raw: String, entry: LocalEntry)] {
    guard let writeBack else { return [] }
    let base = dir.isEmpty ? "" : dir + "/"
    var names = writeBack.queue.names(in: base)
    for name in writeBack.edits.names(in: base).keys { names.insert(name) }
    return names.sorted().compactMap { raw in
      let name = raw.hasSuffix("/") ? String(raw.dropLast()) : raw
      return name.isEmpty ? nil : (raw, localEntry(base + name))
    }
  }

  private static func merge(_ entries: [DirectoryEntry], _ local: [(raw: String, entry: LocalEntry)]) -> (entries: [DirectoryEntry], deletedUnder: [String]) {
    guard !local.isEmpty else { return (entries, []) }
    var byName: [String: Int] = [:]
    for (i, e) in entries.enumerated() { byName[e.name] = i }
    var out = entries
    var removed = Set<Int>()
    var deletedUnder: [String] = []
    for (raw, entry) in local {
      let name = raw.hasSuffix("/") ? String(raw.dropLast()) : raw
      switch entry {
      case .file(let entry), .folder(let entry):
        if let i = byName[name] {
          out[i] = entry
          removed.remove(i)
        } else {
          byName[name] = out.count
          out.append(entry)
        }
      case .removed:
        if let i = byName[name] { removed.insert(i) }
      case .unchanged:
        if let i = byName[name], out[i].isDirectory, raw.hasSuffix("/") { deletedUnder.append(name) }
      }
    }
    return (out.enumerated().filter { !removed.contains($0.offset) }.map(\.element), deletedUnder)
  }

  // MARK: opening for writing

  /// A handle on `path` for writing (`truncate`: start empty), or for reading what this mount
  /// wrote and the bucket does not have yet. Nil when the path has nothing local to read.
  func openLocal(_ path: String, flags: Int32) async throws(FSError) -> UInt64? {
    let writing = flags & O_ACCMODE != O_RDONLY || flags & O_TRUNC != 0
    guard let writeBack else {
      if writing { throw FSError(EROFS) }
      return nil
    }
    if !writing {
      if let edit = writeBack.edits.join(path) { return fileHandles.add(.edit(edit)) }
      if case .file(let dataPath, _, _) = writeBack.queue.view(path) {
        let fd = Foundation.open(dataPath, O_RDONLY | O_CLOEXEC)
        if fd >= 0 { return fileHandles.add(.queued(FileDescriptor(fd))) }
      }
      return nil
    }
    let edit = try await edit(path, truncate: flags & O_TRUNC != 0)
    return fileHandles.add(.edit(edit))
  }

  /// The edit of `path`, opened (or joined) with its current bytes, unless `truncate`.
  func edit(_ path: String, truncate: Bool, created: Bool = false) async throws(FSError) -> LocalEdits.Edit {
    let writeBack = try writable()
    if let edit = writeBack.edits.join(path) { return try edit.truncated(truncate) }
    // What the bytes start from, and the generation the change will be based on.
    let (file, localPath) = try writeBack.edits.newFile()
    var base: PendingChange.Base = .generation(0)
    var dirty = truncate || created
    var startMetadata: (contentType: String?, custom: [String: String]?)? = nil
    var keptTime: Double? = nil
    do throws(FSError) {
      switch writeBack.queue.view(path) {
      case .file(let dataPath, _, let mtime):
        if !truncate { try Self.copy(from: dataPath, to: file.fd) }
        base = .previous
        startMetadata = writeBack.queue.queuedMetadata(path)
        // The time set on the queued bytes (touch, rsync) stays theirs while they are unchanged
        // (a chmod, a setxattr after them); 0: none was set.
        if !truncate && mtime > 0 { keptTime = mtime }
      case .copied(let source, _):
        base = .previous
        startMetadata = writeBack.queue.queuedMetadata(path)
        if !truncate { try await download(source.name, try await copySource(source), into: file.fd) }
      case .deleted:
        base = .previous
        dirty = true
      case .folder:
        throw FSError(EISDIR)
      case nil:
        // A create is for a name the kernel found absent a moment ago, which the listing or the
        // cache of missing names usually confirm without a request; but another process may
        // have made it since, and the bytes must then be based on what is there.
        let (dir, name) = Namespace.split(path)
        var knownAbsent = false
        if created, case .failure(let e)? = namespace.resolveIfCached(dir: dir, name: name), e.errno == ENOENT { knownAbsent = true }
        if !knownAbsent {
          let m: StorageMetadata?
          do throws(FSError) {
            m = try await namespace.fileMetadata(path)
          } catch where error.errno == ENOENT || (created && error.cause.map(ErrnoMapping.isServerGone) == true) {
            // A new file while the server is away is new as far as anyone here can tell; if
            // someone made it meanwhile, the upload's precondition fails and ours goes beside.
            m = nil
          }
          if let m {
            base = .generation(m.generation)
            // New bytes have a new time: a kept one (ours, Google's tools') would hide it.
            var custom = m.customMetadata ?? [:]
            custom.removeValue(forKey: "mtime")
            custom.removeValue(forKey: PosixAttributes.mtimeKey)
            // A chmod or setxattr queued and not applied yet is part of what the bytes go with.
            let pending = writeBack.queue.pendingMetadata(path)
            custom.merge(pending.custom) { _, queued in queued }
            startMetadata = (pending.contentType ?? m.contentType, custom)
            if !truncate { try await download(path, m, into: file.fd) }
          } else {
            dirty = true
          }
        }
      }
    } catch {
      Foundation.unlink(localPath)
      throw error
    }
    let fresh = LocalEdits.Edit(file: file, path: localPath, name: path, base: base, dirty: dirty)
    if let startMetadata { fresh.startMetadata(contentType: startMetadata.contentType, custom: startMetadata.custom, mtime: keptTime) }
    return try writeBack.edits.open(path) { () throws(FSError) -> LocalEdits.Edit in fresh }
  }

  /// The attributes of the version a queued copy puts under a name, for reading it meanwhile
  /// (from the server or a staged copy); ESTALE when the bucket has moved on from it.
  func copySource(_ source: PendingChange.Source) async throws(FSError) -> StorageMetadata {
    let m = try await namespace.fileMetadata(source.name)
    guard m.generation == source.generation else { throw FSError(ESTALE) }
    return m
  }

  private static func copy(from source: String, to fd: Int32) throws(FSError) {
    let input = Foundation.open(source, O_RDONLY | O_CLOEXEC)
    guard input >= 0 else { throw FSError(errno) }
    defer { close(input) }
    try DurableFile.copyAll(from: input, to: fd)
  }

  /// The object's bytes into `fd`: from its complete staged copy when there is one, else from
  /// the server (pinned to the generation the edit is based on).
  private func download(_ path: String, _ m: StorageMetadata, into fd: Int32) async throws(FSError) {
    let full = client.bucketName(path)
    if let staged = staging?.completeEntries()[full], staged.metadata.generation == m.generation,
      (try? Self.copy(from: staged.dataPath, to: fd)) != nil
    {
      return
    }
    // Offline, only a staged copy can give the bytes.
    if options.offline { throw FSError(EIO) }
    ftruncate(fd, 0)
    let chunk: Int64 = 8 << 20
    var offset: Int64 = 0
    while offset < m.size {
      let end = min(m.size, offset + chunk)
      let data: Data
      do throws(BucketError) {
        data = try await RangedGet.data(client, path, range: offset..<end, generation: m.generation)
      } catch {
        throw FSError(error)
      }
      let written = data.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(offset)) }
      guard written == data.count else { throw FSError(written < 0 ? errno : ENOSPC) }
      offset = end
    }
  }

  // MARK: the operations

  /// Creates file `name` in folder `parent` and opens it for writing.
  /// `mode` and `by` (the creator) are kept with the object where they differ from what the
  /// mount shows by default (`file_mode`, `uid`, `gid`), so that a file created executable, or by
  /// another user of an `allow_other` mount, stays so.
  package func create(
    parent: UInt64, name: String, flags: Int32, mode: UInt32 = 0o644, by creator: (uid: UInt32, gid: UInt32)? = nil
  ) async throws(FSError) -> (FileAttributes, UInt64, KernelIO) {
    let writeBack = try writable()
    guard let dir = inodes.node(parent), dir.isDirectory else { throw FSError(ENOENT) }
    let path = Namespace.join(dir.path, name)
    try await checkNewName(name, in: dir.path)
    // O_CREAT on a name another process made meanwhile opens it (truncated only with O_TRUNC);
    // a name this mount removed is made anew, with the mode and owner of this create.
    let exists = localEntry(path).entry != nil
    let edit = try await edit(path, truncate: !exists || flags & O_TRUNC != 0, created: !exists)
    if !exists && options.posix {
      let kept = PosixAttributes(
        mode: mode & 0o777 != options.fileMode ? mode & 0o777 : nil, uid: creator.flatMap { $0.uid != options.uid ? $0.uid : nil },
        gid: creator.flatMap { $0.gid != options.gid ? $0.gid : nil })
      if !kept.custom.isEmpty { edit.setMetadata(contentType: nil, custom: kept.custom) }
    }
    let handle = fileHandles.add(.edit(edit))
    namespace.missing.remove(path)
    if !exists { entriesChanged(in: dir.path) }
    let attrs = localAttributes(path, edit: edit, lookup: true)
    return (attrs, handle, kernelIO.open(attrs.ino, handle: handle, generation: nil, keepCache: false) { nil })
  }

  private func localAttributes(_ path: String, edit: LocalEdits.Edit, lookup: Bool) -> FileAttributes {
    let ino = inodes.ino(for: InodeTable.Node(path: path, isDirectory: false, objectName: path), lookup: lookup)
    let posix = posixAttributes(ino, edit.custom)
    var a = FileAttributes(
      ino: ino, size: edit.size, isDirectory: false, mode: posix.mode ?? options.fileMode, uid: posix.uid ?? options.uid,
      gid: posix.gid ?? options.gid, mtime: edit.modified, ctime: edit.modified)
    a.atime = posix.atime
    if SymlinkObject.isLink(edit.custom) { a.becomeLink(target: nil) }
    a.volatile = true
    return a
  }

  package func write(handle: UInt64, offset: Int64, data: UnsafeRawBufferPointer) throws(FSError) -> Int {
    guard let writeBack, case .edit(let edit) = fileHandles[handle] else { throw FSError(EBADF) }
    // Queued bytes are never evicted: past the staging budget a write fails, and nothing queued
    // is lost.
    if writeBack.queue.queuedBytes + max(edit.size, offset + Int64(data.count)) > options.stagingSize { throw FSError(ENOSPC) }
    let n = pwrite(edit.file.fd, data.baseAddress, data.count, off_t(offset))
    guard n >= 0 else { throw FSError(errno) }
    edit.changed()
    return n
  }

  /// A read of bytes this mount has and the bucket may not: an edit's or the queue's.
  func readLocal(_ opened: FileHandle, offset: Int64, count: Int) throws(FSError) -> ReadReply {
    let fd: Int32
    switch opened {
    case .edit(let edit): fd = edit.file.fd
    case .queued(let file): fd = file.fd
    case .read: throw FSError(EBADF)
    }
    var buffer = Data(count: count)
    let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, count, off_t(offset)) }
    guard n >= 0 else { throw FSError(errno) }
    return .bytes(buffer.prefix(n))
  }

  /// A close of a handle: the bytes written so far are queued (durably) before it returns.
  package func flush(handle: UInt64) throws(FSError) {
    guard let writeBack, case .edit(let edit) = fileHandles[handle] else { return }
    try queue(edit)
  }

  @discardableResult
  func queue(_ edit: LocalEdits.Edit) throws(FSError) -> UInt64? {
    // One close of a file at a time: two processes closing it at once must queue their copies
    // in the order they were taken, or an older copy could land last.
    try edit.closing.withLock { _ throws(FSError) -> UInt64? in
      guard let writeBack, var changes = edit.takeChanges() else { return edit.lastQueued }
      let name = changes.name
      // Bytes of this edit went to the queue before: these are based on what those produce.
      if edit.lastQueued != nil { changes.base = .previous }
      do throws(FSError) {
        let sequence = try writeBack.queue.upload(
          name, from: edit.file.fd, contentType: changes.contentType ?? ContentType.infer(fromName: name),
          mtime: changes.mtime ?? edit.modified, custom: changes.custom.isEmpty ? nil : changes.custom, base: changes.base)
        edit.queued(sequence)
        return sequence
      } catch {
        edit.undoTake()
        log("write-back: cannot queue \(name.debugDescription): errno \(error.errno); the file keeps its bytes until it is closed")
        throw error
      }
    }
  }

  func releaseLocal(_ opened: FileHandle) {
    guard let writeBack, case .edit(let edit) = opened else { return }
    _ = try? queue(edit)
    writeBack.edits.close(edit)
  }

  /// fsync: the file's bytes are queued, then its upload is waited for, for `read_timeout` at
  /// most (the bound of every request that waits on the server). With the server out of reach,
  /// slow, or busy with the changes before it, the bytes fsynced in the queue are what there is
  /// to wait for: they reach the bucket from there, across a crash too.
  package func fsync(handle: UInt64) async throws(FSError) {
    guard let writeBack, case .edit(let edit) = fileHandles[handle] else { return }
    guard let sequence = try queue(edit) else { return }
    switch await writeBack.queue.wait(for: sequence, within: options.readTimeout) {
    case .applied, .waiting: return
    case .conflict: throw FSError(ESTALE)
    case .failed: throw FSError(EIO)
    }
  }

  /// mknod of anything but a regular file (FIFOs, sockets, devices) and hard links: a bucket
  /// holds none of them. The errors a program checks for first come first, as on a disk:
  /// EROFS, ENAMETOOLONG, EEXIST; then EPERM, with nothing made.
  package func refuseSpecial(parent: UInt64, name: String) async -> Int32 {
    guard writeBack != nil else { return EROFS }
    if name.utf8.count > 255 { return ENAMETOOLONG }
    guard let dir = inodes.node(parent), dir.isDirectory else { return ENOENT }
    if (try? await resolveForChange(dir.path, name)) != nil { return EEXIST }
    return EPERM
  }

  /// mknod of a regular file: an empty file, made as create(2) makes one.
  package func makeFile(parent: UInt64, name: String, mode: UInt32, by creator: (uid: UInt32, gid: UInt32)) async throws(FSError) -> FileAttributes {
    let dir = inodes.node(parent)
    if let dir, (try? await resolveForChange(dir.path, name)) != nil { throw FSError(EEXIST) }
    let (attrs, handle, _) = try await create(parent: parent, name: name, flags: O_WRONLY | O_EXCL, mode: mode, by: creator)
    release(handle: handle)
    return attrs
  }

  /// chmod, chown and chgrp as the kernel asks them: what is asked and who asks.
  package struct OwnerChange: Sendable {
    package var mode: UInt32?
    package var uid: UInt32?
    package var gid: UInt32?
    package var caller: UInt32

    package init(mode: UInt32? = nil, uid: UInt32? = nil, gid: UInt32? = nil, caller: UInt32) {
      self.mode = mode
      self.uid = uid
      self.gid = gid
      self.caller = caller
    }

    var isEmpty: Bool { mode == nil && uid == nil && gid == nil }
  }

  /// Size, times, mode and owner. Mode and owner are kept in the object's custom metadata (the
  /// keys of Google's `--preserve-posix`), through the queue like any change; a change that
  /// cannot be kept is refused, never answered as done: with `-o posix=no`, of a folder (it has
  /// no object), set-id and sticky bits (Google's keys hold the permission bits only), and one
  /// the caller may not make (chown by anyone but root; chmod and chgrp by anyone but the owner).
  /// Asking for what a file already has succeeds on any mount.
  package func setattr(
    _ ino: UInt64, size: Int64?, mtime: Double?, atime: Double? = nil, owner: OwnerChange? = nil, handle: UInt64?
  ) async throws(FSError) -> FileAttributes {
    guard let node = inodes.node(ino) else { throw FSError(ESTALE) }
    if let owner, !owner.isEmpty {
      let current = node.isDirectory ? attributes(ino: ino, directory: true, metadata: nil) : try await getattr(ino)
      let change = PosixAttributes(
        mode: owner.mode.flatMap { $0 != current.mode ? $0 : nil }, uid: owner.uid.flatMap { $0 != current.uid ? $0 : nil },
        gid: owner.gid.flatMap { $0 != current.gid ? $0 : nil })
      if change != PosixAttributes() {
        guard writeBack != nil else { throw FSError(EROFS) }
        // Set-id bits are never kept (a program in a bucket must not run as its owner); a
        // folder's sticky bit is (the kernel enforces it), a file's means nothing on Linux.
        guard options.posix, (change.mode ?? 0) & (node.isDirectory ? 0o6000 : 0o7000) == 0 else { throw FSError(EPERM) }
        if change.uid != nil && owner.caller != 0 { throw FSError(EPERM) }
        if (change.mode != nil || change.gid != nil) && owner.caller != 0 && owner.caller != current.uid { throw FSError(EPERM) }
        if node.isDirectory {
          try keepFolder(node.path, change, custom: change.custom)
        } else {
          try await keepOwner(node.objectName ?? node.path, change)
        }
      }
    }
    let times = PosixAttributes(mtime: mtime, atime: atime)
    if (size != nil || times != PosixAttributes()) && writeBack == nil { throw FSError(EROFS) }
    if node.isDirectory {
      // tar -x, cp -a and rsync -a set every folder's times after filling it.
      if times != PosixAttributes(), options.posix { try keepFolder(node.path, times, custom: times.customWithExactTime) }
      return attributes(ino: ino, directory: true, metadata: nil)
    }
    guard size != nil || times != PosixAttributes() else { return try await getattr(ino) }
    let writeBack = try writable()
    let path = node.objectName ?? node.path
    // Only times, of a file whose bytes are the bucket's (touch opens it first, and writes
    // nothing): a metadata change, not an upload.
    var openEdit = writeBack.edits[path]
    if let handle, case .edit(let e) = fileHandles[handle] { openEdit = e }
    if size == nil, options.posix, writeBack.queue.view(path) == nil, !(openEdit?.isDirty ?? false) {
      try await queueMetadata(path, times, custom: times.customWithExactTime)
      return try await getattr(ino)
    }
    let edit: LocalEdits.Edit
    var opened = false
    if let handle, case .edit(let e) = fileHandles[handle] {
      edit = e
    } else {
      edit = try await self.edit(path, truncate: size == 0)
      opened = true
    }
    defer {
      if opened {
        _ = try? queue(edit)
        writeBack.edits.close(edit)
      }
    }
    if let size {
      guard ftruncate(edit.file.fd, off_t(size)) == 0 else { throw FSError(errno) }
      edit.changed()
    }
    if let mtime { edit.setMtime(mtime) }
    if times != PosixAttributes(), options.posix { edit.setMetadata(contentType: nil, custom: times.custom) }
    if opened { try queue(edit) }
    return localAttributes(path, edit: edit, lookup: false)
  }

  /// `change` of folder `path` (mode, owner, times), kept in its placeholder's metadata through
  /// the queue, and shown from now on for the mount's life: the entries this mount makes and
  /// removes in a folder move its times too, which are not written to the bucket at each one.
  /// The root has no placeholder: what is set of it holds for the mount's life only.
  private func keepFolder(_ path: String, _ change: PosixAttributes, custom: [String: String]) throws(FSError) {
    let writeBack = try writable()
    if !path.isEmpty { try writeBack.queue.folderMetadata(path, custom: custom) }
    posixChanges.queued(path, change, sequence: .max)
  }

  /// Mode and owner `change` of file `path`: with its bytes when they are being edited, else as a
  /// metadata change through the queue (shown from now on, over what the bucket says).
  private func keepOwner(_ path: String, _ change: PosixAttributes) async throws(FSError) {
    let writeBack = try writable()
    if let edit = writeBack.edits[path] {
      edit.setMetadata(contentType: nil, custom: change.custom)
      return
    }
    if localEntry(path).isChanged {
      // Bytes this mount queued: the new entries go with their upload, as setxattr's do.
      let edit = try await self.edit(path, truncate: false)
      edit.setMetadata(contentType: nil, custom: change.custom)
      defer { writeBack.edits.close(edit) }
      try queue(edit)
      return
    }
    try await queueMetadata(path, change, custom: change.custom)
  }

  /// `change` of file `path` as the bucket has it, as a metadata change (`custom`) through the
  /// queue, shown over what the bucket says until the queue applies it.
  private func queueMetadata(_ path: String, _ change: PosixAttributes, custom: [String: String]) async throws(FSError) {
    let writeBack = try writable()
    let (dir, name) = Namespace.split(path)
    let (entry, base) = try await resolveForChange(dir, name)
    guard !entry.isDirectory else { throw FSError(EPERM) }
    let sequence = try writeBack.queue.metadata(path, contentType: nil, custom: custom, base: base)
    posixChanges.queued(path, change, sequence: sequence)
  }

  package func unlink(parent: UInt64, name: String) async throws(FSError) {
    let writeBack = try writable()
    guard let dir = inodes.node(parent) else { throw FSError(ENOENT) }
    let path = Namespace.join(dir.path, name)
    let (entry, base) = try await resolveForChange(dir.path, name)
    guard !entry.isDirectory else { throw FSError(EISDIR) }
    if let edit = writeBack.edits[path] { writeBack.edits.detach(edit) }
    try writeBack.queue.delete(entry.objectName ?? path, base: base)
    entriesChanged(in: dir.path)
  }

  /// An entry was made or removed in folder `dir`: its mtime and ctime are now, for the mount's
  /// life (a folder has no object to keep them in).
  func entriesChanged(in dir: String) {
    if options.posix { posixChanges.folderChanged(dir) }
  }

  /// Refuses a name the bucket cannot hold exactly (`Namespace.refusal`), and a second spelling
  /// of a name folder `dir` has: Swift strings, and most tools, take NFC and NFD "café" for one
  /// name, the bucket for two objects (EILSEQ). An ASCII name has one spelling: only other names
  /// cost a look at the folder.
  func checkNewName(_ name: String, in dir: String) async throws(FSError) {
    if let errno = Namespace.refusal(ofNewName: name, at: Namespace.join(dir, name)) { throw FSError(errno) }
    guard !name.utf8.allSatisfy({ $0 < 0x80 }) else { return }
    // Another spelling this mount knows without the folder's listing: one it queued or is
    // editing (its upload may be done while a listing taken before it is still current), or
    // whose attributes it holds.
    let path = Namespace.join(dir, name)
    let known = [writeBack?.queue.otherSpelling(of: path), writeBack?.edits.otherSpelling(of: path), namespace.files.heldKey(path)]
    if known.contains(where: { $0.map { !Namespace.sameBytes($0, path) } ?? false }) { throw FSError(EILSEQ) }
    // A listing that fails is answered by the last one the mount has: never by nothing.
    let listed: [DirectoryEntry]
    do throws(FSError) {
      listed = try await mergedListing(dir) { () async throws(FSError) in try await namespace.listing(dir) }
    } catch {
      listed = mergedLocally(dir) { namespace.listings.lastKnown(dir) ?? [] }.entries
    }
    if listed.contains(where: { $0.name == name && !Namespace.sameBytes($0.name, name) }) { throw FSError(EILSEQ) }
  }

  /// What `name` in `dir` is now, this mount's own changes first, and what a change of it is
  /// based on: the generation the bucket has, or (for a name this mount changed) whatever the
  /// queue's changes of it leave.
  func resolveForChange(_ dir: String, _ name: String) async throws(FSError) -> (DirectoryEntry, PendingChange.Base) {
    let path = Namespace.join(dir, name)
    let local = localEntry(path)
    if local.isChanged {
      guard let entry = local.entry else { throw FSError(ENOENT) }
      return (entry, .previous)
    }
    // Attributes the kernel's lookup fetched a moment ago (a folder listing may be older).
    if let m = namespace.files.get(path) {
      return (DirectoryEntry(name: name, isDirectory: false, objectName: path, metadata: m), .generation(m.generation))
    }
    let entry = try await namespace.resolve(dir: dir, name: name)
    // Another spelling of the name (canonically equal, other bytes) is another object.
    guard Namespace.sameBytes(entry.name, name) else { throw FSError(ENOENT) }
    return (entry, .generation(entry.metadata?.generation ?? 0))
  }

  /// Makes folder `name` with the mode the kernel passes (the caller's umask applied) and the
  /// caller as owner, where they differ from the mount's defaults; like a chmod of a folder,
  /// they hold for the mount's life.
  package func mkdir(
    parent: UInt64, name: String, mode: UInt32? = nil, by creator: (uid: UInt32, gid: UInt32)? = nil
  ) async throws(FSError) -> FileAttributes {
    let writeBack = try writable()
    guard let dir = inodes.node(parent), dir.isDirectory else { throw FSError(ENOENT) }
    let path = Namespace.join(dir.path, name)
    try await checkNewName(name, in: dir.path)
    if (try? await resolveForChange(dir.path, name)) != nil { throw FSError(EEXIST) }
    // A folder of this name removed before keeps nothing for this one.
    posixChanges.forget(path)
    namespace.folders.set(path, .absent)
    if options.posix {
      // Set-id bits are never kept (setattr's rule); the sticky bit is.
      let now = Date().timeIntervalSince1970
      let kept = PosixAttributes(
        mode: mode.flatMap { $0 & 0o1777 != options.dirMode ? $0 & 0o1777 : nil },
        uid: creator.flatMap { $0.uid != options.uid ? $0.uid : nil }, gid: creator.flatMap { $0.gid != options.gid ? $0.gid : nil },
        mtime: now)
      try writeBack.queue.folder(path, custom: kept.customWithExactTime)
      // Shown whole, defaults too: what the queue learns later of an earlier folder of this name
      // (its chmod, its removal, applied after this mkdir) must not show through.
      let shown = PosixAttributes(mode: kept.mode ?? options.dirMode, uid: kept.uid ?? options.uid, gid: kept.gid ?? options.gid, mtime: now)
      posixChanges.queued(path, shown, sequence: .max)
    } else {
      try writeBack.queue.folder(path)
    }
    entriesChanged(in: dir.path)
    namespace.missing.remove(path)
    // Nothing was under it a moment ago (else it would exist): names looked up in it, as a copy
    // into it does for each file it creates, are answered without a request.
    namespace.listings.store(path, [])
    let ino = inodes.ino(for: InodeTable.Node(path: path, isDirectory: true), lookup: true)
    return attributes(ino: ino, directory: true, metadata: nil)
  }

  package func rmdir(parent: UInt64, name: String) async throws(FSError) {
    let writeBack = try writable()
    guard let dir = inodes.node(parent) else { throw FSError(ENOENT) }
    let path = Namespace.join(dir.path, name)
    let (entry, _) = try await resolveForChange(dir.path, name)
    guard entry.isDirectory else { throw FSError(ENOTDIR) }
    let inside = try await mergedListing(path) { () async throws(FSError) in try await namespace.listing(path) }
    guard inside.isEmpty else { throw FSError(ENOTEMPTY) }
    try writeBack.queue.delete(path + "/", base: .any)
    posixChanges.forget(path)
    namespace.folders.set(path, .absent)
    entriesChanged(in: dir.path)
  }

  /// Renames a file: its bytes go under the new name (based on what is there now) and the old
  /// name is deleted (based on what it was), both through the queue, in that order. A folder is
  /// renamed file by file the same way, up to `folderRenameLimit` files (beyond: EXDEV, and `mv`
  /// copies it). A file still open follows its rename, as on a disk.
  package func rename(parent: UInt64, name: String, newParent: UInt64, newName: String, flags: UInt32) async throws(FSError) {
    let writeBack = try writable()
    guard let from = inodes.node(parent), let to = inodes.node(newParent), to.isDirectory else { throw FSError(ENOENT) }
    try await checkNewName(newName, in: to.path)
    if flags & Self.renameExchange != 0 { throw FSError(EINVAL) }
    let source = Namespace.join(from.path, name)
    let target = Namespace.join(to.path, newName)
    if source == target { return }
    let (entry, sourceBase) = try await resolveForChange(from.path, name)
    let existing = try? await resolveForChange(to.path, newName)
    if existing != nil && flags & Self.renameNoReplace != 0 { throw FSError(EEXIST) }
    if entry.isDirectory {
      if target.hasPrefix(source + "/") { throw FSError(EINVAL) }
      if let (other, _) = existing {
        guard other.isDirectory else { throw FSError(ENOTDIR) }
        guard try await mergedListing(target, { () async throws(FSError) in try await namespace.listing(target) }).isEmpty else {
          throw FSError(ENOTEMPTY)
        }
      }
      try await renameFolder(source, to: target, writeBack)
    } else {
      // A file a process still has open over the target is unlinked by the rename, as on a disk.
      if let replaced = writeBack.edits[target] { writeBack.edits.detach(replaced) }
      var targetBase = PendingChange.Base.generation(0)
      if let (other, base) = existing {
        if other.isDirectory { throw FSError(EISDIR) }
        targetBase = base
      }
      try await moveFile(source, entry, sourceBase, to: target, targetBase, writeBack)
      inodes.move(path: source, to: target)
      namespace.missing.remove(target)
    }
    entriesChanged(in: from.path)
    entriesChanged(in: to.path)
  }

  /// The bytes of `source` (from the queue or the bucket) queued under `target`, then `source`
  /// queued for deletion.
  private func moveFile(
    _ source: String, _ entry: DirectoryEntry, _ sourceBase: PendingChange.Base, to target: String, _ targetBase: PendingChange.Base,
    _ writeBack: WriteBack
  ) async throws(FSError) {
    let mtime = entry.metadata?.customMetadata?["mtime"].flatMap(Self.parseTime) ?? entry.metadata?.updated?.timeIntervalSince1970
    var custom = entry.metadata?.customMetadata ?? [:]
    custom.removeValue(forKey: "mtime")
    // A file as the bucket has it, where the bucket copies: the server copies it, so nothing is
    // downloaded and the rename works with the server away too.
    if client.copiesOnServer, writeBack.edits[source] == nil, writeBack.queue.view(source) == nil, case .generation(let g) = sourceBase, g > 0,
      let m = entry.metadata
    {
      let from = PendingChange.Source(name: source, generation: g, size: m.size, crc32c: m.crc32c, md5Hash: m.md5Hash)
      try writeBack.queue.copy(target, from: from, contentType: m.contentType, mtime: mtime, custom: custom.isEmpty ? nil : custom, base: targetBase)
      try writeBack.queue.delete(source, base: sourceBase)
      return
    }
    // Bytes written and not yet queued (a close whose release has not come) go first.
    if let open = writeBack.edits[source] { try queue(open) }
    let edit = try await self.edit(source, truncate: false)
    defer { writeBack.edits.close(edit) }
    try writeBack.queue.upload(
      target, from: edit.file.fd, contentType: entry.metadata?.contentType ?? ContentType.infer(fromName: target), mtime: mtime ?? edit.modified,
      custom: custom.isEmpty ? nil : custom, base: targetBase)
    _ = edit.takeChanges()
    try writeBack.queue.delete(source, base: sourceBase)
    // Still open elsewhere: the open file follows the rename; else it is done with.
    if writeBack.edits.isShared(edit) {
      writeBack.edits.move(edit, from: source, to: target)
    } else {
      edit.unlinked()
    }
  }

  /// How many files a folder rename moves at most; a larger folder answers EXDEV, and `mv`
  /// copies it through the mount instead (the same uploads and deletes, one file at a time).
  package static let folderRenameLimit = 1000

  /// A folder renamed file by file: every folder under it gets its placeholder under the new
  /// name, every file is moved as `moveFile` moves one, and the old placeholders are deleted.
  /// Not atomic: another client listing both names meanwhile sees files in both.
  private func renameFolder(_ source: String, to target: String, _ writeBack: WriteBack) async throws(FSError) {
    var folders: [String] = []
    var files: [String] = []
    var pending = [source]
    while let dir = pending.popLast() {
      folders.append(dir)
      // All of the folder or nothing: the staged copies' part of a listing (the server away)
      // would move some files and delete placeholders over the rest.
      for entry in try await mergedListing(dir, { () async throws(FSError) in try await namespace.serverListing(dir) }) {
        let path = Namespace.join(dir, entry.name)
        if entry.isDirectory {
          pending.append(path)
        } else {
          files.append(path)
          if files.count > Self.folderRenameLimit { throw FSError(EXDEV) }
        }
      }
    }
    for dir in folders {
      // The new placeholder keeps what the old one kept of the folder, and what this mount set.
      let moved = target + dir.dropFirst(source.count)
      var custom: [String: String] = [:]
      if options.posix {
        await namespace.learnFolderObject(dir)
        custom = namespace.folders.keptEntries(dir)
        if let held = posixChanges.held({ dir }) { custom.merge(held.attributes.customWithExactTime) { _, set in set } }
      }
      try writeBack.queue.folder(moved, custom: custom)
      if let known = namespace.folders.get(dir) { namespace.folders.set(moved, known) }
    }
    namespace.folders.forget(under: source)
    for path in files {
      let (dir, name) = Namespace.split(path)
      let (entry, base) = try await resolveForChange(dir, name)
      try await moveFile(entry.objectName ?? path, entry, base, to: target + path.dropFirst(source.count), .generation(0), writeBack)
    }
    for dir in folders.reversed() { try writeBack.queue.delete(dir + "/", base: .any) }
    posixChanges.moveFolders(source, to: target)
    inodes.move(prefix: source, to: target)
    namespace.missing.remove(target)
  }

  /// renameat2(2)'s flags (not in Glibc's Swift module).
  static let renameNoReplace: UInt32 = 1
  static let renameExchange: UInt32 = 2

  /// RFC 3339 with any number of fractional digits (rclone and gcsfuse write nanoseconds, which
  /// ISO8601DateFormatter cannot read): the whole seconds by the formatter, the fraction added.
  static func parseTime(_ text: String) -> Double? {
    let f = ISO8601DateFormatter()
    f.formatOptions = [.withInternetDateTime]
    guard let dot = text.firstIndex(of: ".") else { return f.date(from: text)?.timeIntervalSince1970 }
    guard let zone = text[dot...].firstIndex(where: { $0 == "Z" || $0 == "+" || $0 == "-" }),
      let whole = f.date(from: String(text[..<dot]) + String(text[zone...])), let fraction = Double("0" + text[dot..<zone])
    else { return nil }
    return whole.timeIntervalSince1970 + fraction
  }

  /// `setfattr -n user.content_type` or `user.meta.KEY`: the object's metadata, through the
  /// queue. Other names are the object's own (size, hashes…: EPERM) or not ours (ENOTSUP).
  package func setXattr(_ ino: UInt64, name: String, value: String) async throws(FSError) {
    // Not ours (ACLs, security labels): not supported, on files and folders alike, so that
    // cp -a and rsync -a fall back to chmod as they do on any filesystem without ACLs.
    guard name.hasPrefix("user.") else { throw FSError(ENOTSUP) }
    let writeBack = try writable()
    guard let node = inodes.node(ino) else { throw FSError(ESTALE) }
    // A folder is a name prefix: it has no metadata of its own.
    guard !node.isDirectory else { throw FSError(EPERM) }
    var contentType: String? = nil
    var custom: [String: String] = [:]
    if name == "user.content_type" {
      guard !value.isEmpty else { throw FSError(EINVAL) }
      contentType = value
    } else if name.hasPrefix("user.meta."), name.count > "user.meta.".count {
      custom[String(name.dropFirst("user.meta.".count))] = value
    } else if name.hasPrefix("user.") {
      throw FSError(EPERM)
    } else {
      throw FSError(ENOTSUP)
    }
    let path = node.objectName ?? node.path
    if localEntry(path).isChanged {
      // The bytes are local: the metadata goes with their upload.
      let edit = try await self.edit(path, truncate: false)
      edit.setMetadata(contentType: contentType, custom: custom)
      defer { writeBack.edits.close(edit) }
      try queue(edit)
      return
    }
    let (dir, name) = Namespace.split(path)
    let (_, base) = try await resolveForChange(dir, name)
    try writeBack.queue.metadata(path, contentType: contentType, custom: custom, base: base)
  }

  /// `user.sync_state` and `user.sync_error` of `path`.
  func syncAttributes(_ path: String, _ metadata: StorageMetadata?) -> [(String, String)] {
    guard let writeBack else { return [] }
    if let (state, error) = writeBack.queue.syncState(path) {
      return [("user.sync_state", state)] + (error.map { [("user.sync_error", $0)] } ?? [])
    }
    if writeBack.edits[path] != nil { return [("user.sync_state", "pending")] }
    if metadata?.customMetadata?["bucketfs-conflict-of"] != nil { return [("user.sync_state", "conflict")] }
    return [("user.sync_state", "synced")]
  }

  /// The root's `user.bucketfs.queue`: how many changes wait, then one line per change.
  package static let queueAttribute = "user.bucketfs.queue"

  /// The same, answered once no change waits to go or after the milliseconds the name ends with
  /// (`user.bucketfs.queue.wait.2000`; at most `queueWaitLimit`): `bucketfs sync` learns that
  /// the queue emptied when it does, without asking over and over.
  package static let queueWaitPrefix = "user.bucketfs.queue.wait."
  package static let queueWaitLimit = 10.0

  package func queueTextOnceSynced(attribute: String) async -> String? {
    guard let ms = Int(attribute.dropFirst(Self.queueWaitPrefix.count)), ms >= 0 else { return nil }
    _ = await writeBack?.queue.waitUntilEmpty(within: min(Double(ms) / 1000, Self.queueWaitLimit))
    return queueText()
  }

  package func queueText() -> String {
    guard let writeBack else { return "0\n" }
    let t = writeBack.queue.totals
    return "\(t.changes) \(t.failed) \(t.damaged)\n" + writeBack.queue.describe()
      + (t.damaged > 0 ? "damaged\t\(t.damaged) records or bytes kept aside in \(writeBack.queue.damaged.folder.path), not carried out\n" : "")
  }
}

extension LocalEdits.Edit {
  func truncated(_ truncate: Bool) throws(FSError) -> LocalEdits.Edit {
    if truncate {
      guard ftruncate(file.fd, 0) == 0 else { throw FSError(errno) }
      changed()
    }
    return self
  }
}
