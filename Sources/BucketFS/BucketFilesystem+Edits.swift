// Files open for writing: a private local file per name (LocalEdits) that every handle shares,
// started from the queued bytes, the staged copy or a download; each close queues a durable copy
// of its bytes (WriteBackQueue), which the queue uploads with a precondition on the generation the
// bytes were based on.
import Foundation
import StorageCore

extension BucketFilesystem {
  /// A handle on inode `ino` (`path`) for writing (`truncate`: start empty), or for reading what
  /// this mount wrote and the bucket does not have yet. Nil when the path has nothing local to
  /// read.
  func openLocal(_ path: String, ino: UInt64, flags: Int32) async throws(FSError) -> UInt64? {
    let access = EditHandle.access(flags: flags)
    if access != .reading && !takesChanges { throw FSError(EROFS) }
    guard let writeBack else { return nil }
    if access == .reading {
      // A reader of a file being written reads the writer's bytes, and queues nothing.
      if let edit = writeBack.edits.join(path) { return fileHandles.add(.edit(EditHandle(edit, access: .reading, ino: ino, changed: false))) }
      if case .file(let dataPath, _, _) = writeBack.queue.view(path) {
        try await writeBack.queue.wholeBytes(path)
        let fd = Foundation.open(dataPath, O_RDONLY | O_CLOEXEC)
        if fd >= 0 { return fileHandles.add(.queued(FileDescriptor(fd))) }
      }
      return nil
    }
    let truncate = flags & O_TRUNC != 0
    let edit = try await edit(path, truncate: truncate)
    edit.writerOpened(appending: access == .appending)
    // The kernel may hold the size and pages of another version than the one the edit starts
    // from (the bucket's moved on, a conflict sent ours aside): it forgets the size before this
    // open returns, and the pages as the open returns (it opens without FOPEN_KEEP_CACHE).
    forgetKernelCache(of: ino)
    // A writer of a file the kernel writes is one of its writers: its writes come here (its
    // open joins with direct I/O) into that same file.
    let joinsKernel = edit.joinKernelWriters()
    return fileHandles.add(.edit(EditHandle(edit, access: access, ino: ino, changed: truncate, writesByKernel: joinsKernel)))
  }

  /// The edit of `path`, opened (or joined) with its current bytes, unless `truncate`.
  func edit(_ path: String, truncate: Bool, created: Bool = false) async throws(FSError) -> LocalEdits.Edit {
    let writeBack = try writable()
    if let edit = writeBack.edits.join(path) {
      try edit.truncated(truncate)
      // A file the kernel writes, whose record a close wrote: its record has the new length
      // too (else a crash leaves it "shorter than its last close said", set aside as damaged).
      if truncate && edit.openUpload != nil { recordQueued(edit, writeBack.queue) }
      return edit
    }
    // What the bytes start from, and the generation the change will be based on.
    let (file, localPath) = try writeBack.edits.newFile()
    var base: PendingChange.Base = .generation(0)
    var dirty = truncate || created
    var startMetadata: (contentType: String?, custom: [String: String]?)? = nil
    var keptTime: Timestamp? = nil
    var fill: BaseFill? = nil
    // The queued change whose result the bytes start from, for telling whether the writes only
    // append to them; a queued delete leaves nothing to start from.
    let startedOn = writeBack.queue.viewed(path)
    var fromNothing = false
    do throws(FSError) {
      switch writeBack.queue.view(path) {
      case .file(let dataPath, _, let mtime):
        if !truncate {
          // Bytes still an overlay make this edit one too, filled from them as they fill; where
          // an edit cannot be linked into the queue, it waits for them here, at the open.
          if !writeBack.edits.linksIntoQueue { try await writeBack.queue.wholeBytes(path) }
          if let queued = try writeBack.queue.overlaid(path) {
            fill = try queued.copy(into: file.fd)
          } else {
            try Self.copy(from: dataPath, to: file.fd, disk: writeBack.edits.disk)
          }
        }
        base = .previous
        startMetadata = queuedMetadata(path, writeBack.queue)
        // The time set on the queued bytes (touch, rsync) stays theirs while they are unchanged
        // (a chmod, a setxattr after them); 0: none was set.
        if !truncate && mtime > Timestamp(seconds: 0) { keptTime = mtime }
      case .copied(let source, _):
        base = .previous
        startMetadata = queuedMetadata(path, writeBack.queue)
        if !truncate {
          do throws(FSError) {
            try await download(source.name, try await copySource(source), into: file.fd)
          } catch where error.errno == ESTALE || error.errno == ENOENT {
            // The rename's move landed while its source was read: the bytes are under this
            // name now (the queue learns so when the move's answer comes).
            let m = try await namespace.latestFileMetadata(path)
            guard m.holdsBytes(of: source) else { throw error }
            try await download(path, m, into: file.fd)
          }
        }
      case .deleted:
        base = .previous
        dirty = true
        fromNothing = true
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
          var m: StorageMetadata?
          do throws(FSError) {
            m = try await namespace.fileMetadata(path)
          } catch where error.errno == ENOENT || (created && error.cause.map(ErrnoMapping.isServerGone) == true) {
            // A new file while the server is away is new as far as anyone here can tell; if
            // someone made it meanwhile, the upload's precondition fails and ours goes beside.
            m = nil
          }
          if var m {
            if !truncate {
              do throws(FSError) {
                fill = try await startBytes(path, m, into: file.fd)
              } catch where error.errno == ESTALE {
                // The version the cache named was replaced by someone else: a new open starts
                // from the newest one, never fails for it.
                m = try await namespace.latestFileMetadata(path)
                fill = try await startBytes(path, m, into: file.fd)
              }
            }
            base = .generation(m.generation)
            // New bytes have a new time: a kept one (ours, Google's tools') would hide it.
            var custom = m.customMetadata ?? [:]
            custom.removeValue(forKey: "mtime")
            custom.removeValue(forKey: PosixAttributes.mtimeKey)
            // A chmod or setxattr queued and not applied yet is part of what the bytes go with.
            let pending = writeBack.queue.pendingMetadata(path)
            custom.merge(pending.custom) { _, queued in queued }
            startMetadata = (pending.contentType ?? m.contentType, custom)
          } else {
            dirty = true
          }
        }
        fromNothing = base == .generation(0)
      }
    } catch {
      _ = writeBack.edits.disk.unlink(localPath)
      throw error
    }
    let fresh = LocalEdits.Edit(
      file: file, path: localPath, name: path, base: base, dirty: dirty, fill: fill, disk: writeBack.edits.disk, room: writeBack.edits.room)
    if let startMetadata { fresh.startMetadata(contentType: startMetadata.contentType, custom: startMetadata.custom, mtime: keptTime) }
    fresh.watchAppends(startLength: truncate ? (fromNothing ? 0 : nil) : fileLength(file.fd), startedOn: base == .previous ? startedOn : nil)
    // Another edit of the name may have opened, queued its bytes and closed while this one read
    // what it starts from (a large object's bytes take a while): those are then stale, and a
    // close of this one would replace that change with bytes lacking what it wrote (a line
    // another process appended was lost). Asked as the edit becomes the name's: start again.
    let opened = try writeBack.edits.open(path, current: { writeBack.queue.viewed(path) == startedOn }) {
      () throws(FSError) -> LocalEdits.Edit in fresh
    }
    guard let edit = opened else {
      fill?.abandon()
      return try await self.edit(path, truncate: truncate, created: created)
    }
    if edit !== fresh {
      fill?.abandon()
      return edit
    }
    edit.countLength()
    return edit
  }

  /// The length of an edit's starting bytes (an overlay's is its base version's).
  private func fileLength(_ fd: Int32) -> Int64 {
    var st = stat()
    return fstat(fd, &st) == 0 ? Int64(st.st_size) : 0
  }

  /// What an edit of `path` starts from when the queue puts bytes there: the metadata its last
  /// upload goes with, and what metadata changes queued after it set (a chmod or setxattr made
  /// once that upload had started is a change of its own; the next version keeps it, as a
  /// truncated file keeps its mode on a disk).
  private func queuedMetadata(_ path: String, _ queue: WriteBackQueue) -> (contentType: String?, custom: [String: String]?) {
    let last = queue.queuedMetadata(path)
    let pending = queue.pendingMetadata(path, sinceLastVersion: true)
    guard !pending.custom.isEmpty || pending.contentType != nil else { return last ?? (nil, nil) }
    var custom = last?.custom ?? [:]
    custom.merge(pending.custom) { _, later in later }
    return (pending.contentType ?? last?.contentType, custom)
  }

  /// Objects from this size on are edited as an overlay (`EditOverlay`): the open returns at
  /// once, and the bytes not written come from the base version in the background. Smaller ones
  /// are copied at the open, which costs less than the fill's bookkeeping.
  static let overlaidFrom: Int64 = 4 << 20

  /// The bytes of object version `m` as an edit of `path` starts from them, in `fd`: cloned from
  /// a complete staged copy where the file system shares extents, else (a large object) an
  /// overlay whose fill is returned, started; else copied or downloaded now.
  private func startBytes(_ path: String, _ m: StorageMetadata, into fd: Int32) async throws(FSError) -> BaseFill? {
    if let staged = staging?.verifiedFile(client.bucketName(path), generation: m.generation), SystemDisk.clone(from: staged.fd, to: fd) {
      return nil
    }
    guard m.size >= Self.overlaidFrom, let writeBack, writeBack.edits.linksIntoQueue else {
      try await download(path, m, into: fd)
      return nil
    }
    // Offline, only a staged copy can give the bytes: without one the open fails now, as the
    // download would, rather than at the close.
    if options.offline && staging?.status(client.bucketName(path), generation: m.generation, size: m.size).isComplete != true {
      throw FSError(EIO)
    }
    guard writeBack.edits.disk.truncate(fd, to: m.size) == 0 else { throw FSError(errno) }
    let base = PendingChange.Source(name: path, generation: m.generation, size: m.size, crc32c: m.crc32c, md5Hash: m.md5Hash)
    let fill = BaseFill(file: fd, overlay: EditOverlay(base: base), disk: writeBack.edits.disk, fetch: baseFetcher)
    fill.start()
    return fill
  }

  /// `fetchBase` for a fill, which may outlive the mount.
  var baseFetcher: BaseFill.Fetch {
    { [weak self] base, range throws(BucketError) in
      guard let self else { throw BucketError(code: .cancelled, object: base.name, detail: "the mount ended") }
      return try await self.fetchBase(base, range)
    }
  }

  /// Bytes `range` of base version `base` (an overlaid edit's holes): from a complete staged
  /// copy of it (checked), else from the bucket, pinned to its generation.
  private func fetchBase(_ base: PendingChange.Source, _ range: Range<Int64>) async throws(BucketError) -> Data {
    if let staged = staging?.read(client.bucketName(base.name), generation: base.generation, offset: range.lowerBound, count: range.count)?.data(),
      staged.count == range.count
    {
      return staged
    }
    if options.offline {
      throw BucketError(code: .unknown, object: base.name, detail: "the mount is offline and the version it was edited from is not staged")
    }
    return try await RangedGet.data(client, base.name, range: range, generation: base.generation)
  }

  /// The attributes of the version a queued copy puts under a name, for reading it meanwhile
  /// (from the server or a staged copy); ESTALE when the bucket has moved on from it.
  func copySource(_ source: PendingChange.Source) async throws(FSError) -> StorageMetadata {
    let m = try await namespace.fileMetadata(source.name)
    guard m.generation == source.generation else { throw FSError(ESTALE) }
    return m
  }

  private static func copy(from source: String, to fd: Int32, disk: any QueueDisk) throws(FSError) {
    let input = Foundation.open(source, O_RDONLY | O_CLOEXEC)
    guard input >= 0 else { throw FSError(errno) }
    defer { close(input) }
    _ = try disk.copyAll(from: input, to: fd)
  }

  /// The object's bytes into `fd`: from its complete staged copy when there is one, else from
  /// the server (pinned to the generation the edit is based on).
  private func download(_ path: String, _ m: StorageMetadata, into fd: Int32) async throws(FSError) {
    let full = client.bucketName(path)
    if let staged = staging?.completeEntries()[ObjectName(full)], staged.metadata.generation == m.generation,
      (try? Self.copy(from: staged.dataPath, to: fd, disk: writeBack?.edits.disk ?? SystemDisk())) != nil
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

  /// Creates file `name` in folder `parent` and opens it for writing.
  /// `mode` and `by` (the creator) are kept with the object where they differ from what the
  /// mount shows by default (`file_mode`, `uid`, `gid`), so that a file created executable, or by
  /// another user of an `allow_other` mount, stays so.
  package func create(
    parent: UInt64, name: String, flags: Int32, mode: UInt32 = 0o644, by creator: (uid: UInt32, gid: UInt32)? = nil
  ) async throws(FSError) -> (FileAttributes, UInt64, KernelIO) {
    _ = try writable()
    guard let dir = inodes.node(parent), dir.isDirectory else { throw FSError(ENOENT) }
    let path = Namespace.join(dir.path, name)
    try await checkNewName(name, in: dir.path, isFolder: false)
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
    namespace.missing.remove(path)
    if !exists { entriesChanged(in: dir.path) }
    let attrs = localAttributes(path, edit: edit, lookup: true)
    let access = EditHandle.access(flags: flags) == .appending ? EditHandle.Access.appending : .writing
    edit.writerOpened(appending: access == .appending)
    let changed = !exists || flags & O_TRUNC != 0
    // A new, empty file, open nowhere else, with room to grow in: the kernel writes its edit's
    // file itself (passthrough), so that cp, tar and a program's output cost no request per
    // write. Its closes and releases still come here.
    if mayWriteByKernel(edit), edit.beginKernelWrites(room: Self.kernelWriteRoom) {
      let handle = fileHandles.add(.edit(EditHandle(edit, access: access, ino: attrs.ino, changed: changed, writesByKernel: true)))
      if let io = kernelIO.openEditing(attrs.ino, handle: handle, file: edit.file) {
        metrics.passthroughWrites.add(1, ordering: .relaxed)
        return (attrs, handle, io)
      }
      edit.endKernelWrites()
      _ = fileHandles.remove(handle)
    }
    let handle = fileHandles.add(.edit(EditHandle(edit, access: access, ino: attrs.ino, changed: changed)))
    // Never sent elsewhere: a new file's inode has no readers of a version of it.
    let own = OwnBytes(.edit(ObjectIdentifier(edit)))
    return (attrs, handle, kernelIO.open(attrs.ino, handle: handle, version: nil, own: own, writes: true, keepCache: false) { nil } ?? .direct)
  }

  /// Room a file written by the kernel may take, which the daemon cannot refuse write by write:
  /// the queue's budget (`staging_size`) and the staging disk must both have this much left,
  /// else a new file is written through the daemon, which refuses a write past the budget.
  static let kernelWriteRoom: Int64 = 1 << 30

  /// Whether `edit`, just made for a create, may be written by the kernel: new and empty, open
  /// by this create alone, and with room left.
  private func mayWriteByKernel(_ edit: LocalEdits.Edit) -> Bool {
    guard kernelIO.writesByPassthrough, let writeBack, !writeBack.edits.isShared(edit), edit.fill == nil, edit.size == 0 else { return false }
    // Every file the kernel writes has its room set aside (`StagingRoom`), so that several at
    // once cannot take more than the budget or the disk has between them.
    let taken = writeBack.edits.room.bytes
    guard writeBack.queue.queuedBytes + taken + Self.kernelWriteRoom <= options.stagingSize else { return false }
    var fs = statvfs()
    guard statvfs(writeBack.edits.folder.path, &fs) == 0 else { return false }
    return Int64(fs.f_bavail) * Int64(fs.f_frsize) >= taken + Self.kernelWriteRoom
  }

  func localAttributes(_ path: String, edit: LocalEdits.Edit, lookup: Bool) -> FileAttributes {
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
    guard let writeBack, case .edit(let opened) = fileHandles[handle] else { throw FSError(EBADF) }
    let edit = opened.edit
    opened.markChanged()
    func write(at offset: Int64) throws(FSError) -> Int {
      // Queued bytes are never evicted: past the staging budget (the queue's bytes, and what
      // every file open for writing takes) a write fails, and nothing queued is lost.
      let length = max(edit.size, offset + Int64(data.count))
      let others = writeBack.edits.room.bytes - edit.countedBytes
      if writeBack.queue.queuedBytes + others + length > options.stagingSize {
        noRoom(for: edit, length: length, others: others)
        edit.writeFailed(ENOSPC)
        throw FSError(ENOSPC)
      }
      let n: Int
      do throws(FSError) {
        n = try edit.put(data, at: offset)
      } catch {
        edit.writeFailed(error.errno)
        throw error
      }
      guard n == data.count else {
        let e = n < 0 ? errno : ENOSPC
        edit.writeFailed(e)
        throw FSError(e)
      }
      edit.wrote(data, at: offset)
      edit.changed()
      if offset + Int64(n) > edit.countedBytes { edit.countLength() }
      return n
    }
    // The kernel put an append at the size it cached, which may be another version's (the mount
    // moved on since, or someone else's bytes came in): the end is the edit's own.
    let (n, end) = try edit.writing.withLock { _ throws(FSError) -> (Int, Int64) in
      let end = opened.access == .appending ? edit.size : offset
      return (try write(at: end), end)
    }
    if end != offset { forgetKernelCache(of: opened.ino) }
    // A version's reader opening the inode next must have the kernel drop that size (a reader
    // of 17 bytes was read as 18, the last a zero, after an append's write sized the inode).
    inodes.sizedByKernel(opened.ino)
    return n
  }

  /// Says once per file why its writes fail for want of room (a program sees only ENOSPC).
  private func noRoom(for edit: LocalEdits.Edit, length: Int64, others: Int64) {
    guard edit.failedWrite == nil, let writeBack else { return }
    log(
      "write-back: no room for \(edit.name.debugDescription) to grow to \(length) bytes: staging_size is \(options.stagingSize) bytes, and \(writeBack.queue.queuedBytes) are queued and \(others) open for writing in other files; its writes fail with ENOSPC until changes are carried out"
    )
  }

  /// A read of bytes this mount has and the bucket may not: an edit's or the queue's. Holes of
  /// an overlaid edit in the range are waited for (their fill restarted if it had stopped).
  func readLocal(_ opened: FileHandle, offset: Int64, count: Int) async throws(FSError) -> ReadReply {
    if case .edit(let handle) = opened, let fill = handle.edit.fill {
      do throws(BucketError) {
        try await fill.ready(offset..<offset + Int64(count))
      } catch {
        throw FSError(error)
      }
    }
    return try readLocalNow(opened, offset: offset, count: count)
  }

  /// `readLocal` when the bytes are here now: nil while an overlaid edit waits for some.
  func readLocalIfReady(_ opened: FileHandle, offset: Int64, count: Int) -> ReadReply? {
    if case .edit(let handle) = opened, let fill = handle.edit.fill, (try? fill.isReady(offset..<offset + Int64(count))) != true { return nil }
    return try? readLocalNow(opened, offset: offset, count: count)
  }

  private func readLocalNow(_ opened: FileHandle, offset: Int64, count: Int) throws(FSError) -> ReadReply {
    // The descriptor is held while it is read: an edit's write after a close moves the edit to
    // a copy of its own, and the file it leaves is closed with its last holder. Read by number
    // alone, a read racing that got EBADF, or another file opened meanwhile under the same
    // number (a reader of a log beside `>>` read the queue's journal).
    let file: FileDescriptor
    switch opened {
    case .edit(let handle): file = handle.edit.file
    case .queued(let queued): file = queued
    case .read: throw FSError(EBADF)
    }
    var buffer = Data(count: count)
    let n = withExtendedLifetime(file) { buffer.withUnsafeMutableBytes { pread(file.fd, $0.baseAddress, count, off_t(offset)) } }
    guard n >= 0 else { throw FSError(errno) }
    return .bytes(buffer.prefix(n))
  }

  /// A close of a handle: the bytes it wrote are queued (durably) before it returns. A handle
  /// that changed nothing (a reader, a writer that has not written) queues nothing.
  package func flush(handle: UInt64) throws(FSError) {
    guard writeBack != nil, case .edit(let opened) = fileHandles[handle], opened.changed else { return }
    if opened.writesByKernel { opened.edit.mayHaveChangedByKernel() }
    try queue(opened.edit)
  }

  /// `copying`: a file the kernel still writes goes as a copy of what it holds now, an upload
  /// like any (fsync, `bucketfs sync`), instead of held until its last writer is gone; what the
  /// kernel wrote since its last close is not seen here, so it counts as changed.
  @discardableResult
  func queue(_ edit: LocalEdits.Edit, copying: Bool = false) throws(FSError) -> UInt64? {
    // A write that failed leaves bytes no program meant: they never become a version, and
    // what this edit's closes queued before it (dd's O_TRUNC, closed once by a dup) is
    // withdrawn while it has not started, so the version before stays. Once an fsync of the
    // edit returned, what is queued stays: a failed write drops only what came after it.
    if let failed = edit.failedWrite {
      if let queued = edit.withdrawable, writeBack?.queue.withdraw(queued) == true {
        log("write-back: \(edit.name.debugDescription) not uploaded: a write to it failed (errno \(failed))")
      }
      throw FSError(failed)
    }
    // One close of a file at a time: two processes closing it at once must queue their versions
    // in the order they were taken, or an older one could land last.
    return try edit.closing.withLock { _ throws(FSError) -> UInt64? in
      // Marked under `closing`: a close between the mark and the take (a forked child's exit)
      // would take it, and an fsync be left waiting on that close's upload, which goes only
      // when the file's last writer is gone.
      if copying && edit.writtenByKernel { edit.mayHaveChangedByKernel() }
      guard let writeBack, var changes = edit.takeChanges() else { return edit.lastQueued }
      let name = changes.name
      // Bytes of this edit went to the queue before: these are based on what those produce.
      if edit.lastQueued != nil { changes.base = .previous }
      do throws(FSError) {
        // Only times or metadata changed since the bytes were queued (tar, `cp -p` and rsync
        // set them between the close and the release): they go with that upload while it
        // waits its turn, with no second change of the same bytes.
        if let last = edit.lastQueued, edit.bytesAreQueued,
          try writeBack.queue.amend(name, contentType: changes.contentType, custom: changes.custom, mtime: changes.mtime)
        {
          return last
        }
        let mtime = changes.mtime ?? edit.modified
        if edit.writtenByKernel {
          let sequence = try queueWrittenByKernel(edit, changes, mtime: mtime, copying: copying, into: writeBack.queue)
          edit.queued(sequence)
          return sequence
        }
        // The edit's file itself goes into the queue (linked, no copy); a later write copies it.
        // An overlay is only made where it links (`LocalEdits.linksIntoQueue`): a close never
        // waits for its holes, which come from the network, on a libfuse thread under these locks.
        let sequence = try edit.handOver { file, path, fill throws(FSError) in
          try writeBack.queue.upload(
            name, from: file.fd, linking: path, written: { edit.writtenCRC32C(size: $0) }, fill: fill,
            contentType: changes.uploadContentType, mtime: mtime, custom: changes.uploadCustom, base: changes.base,
            appended: edit.takeAppended())
        }
        edit.queued(sequence)
        return sequence
      } catch {
        edit.undoTake()
        log("write-back: cannot queue \(name.debugDescription): errno \(error.errno); the file keeps its bytes until it is closed")
        throw error
      }
    }
  }

  /// A close of a file the kernel writes: the file itself goes into the queue (linked) as an
  /// upload no worker takes while the kernel may still write it, its record rewritten at each
  /// later close; or, `copying`, a copy of what it holds now goes as an upload like any.
  private func queueWrittenByKernel(
    _ edit: LocalEdits.Edit, _ changes: LocalEdits.Edit.Changes, mtime: Timestamp, copying: Bool, into queue: WriteBackQueue
  ) throws(FSError) -> UInt64 {
    let (contentType, custom) = (changes.uploadContentType, changes.uploadCustom)
    if copying {
      let file = edit.file
      let sequence = try withExtendedLifetime(file) { () throws(FSError) -> UInt64 in
        try queue.upload(
          changes.name, from: file.fd, contentType: contentType, mtime: mtime, custom: custom, base: changes.base, appended: edit.takeAppended())
      }
      edit.setOpenUpload(nil)
      return sequence
    }
    if let open = edit.openUpload, try queue.rewriteWritten(open, contentType: contentType, custom: custom, mtime: mtime) { return open }
    let sequence = try edit.handOver { file, path, _ throws(FSError) in
      try queue.upload(
        changes.name, from: file.fd, linking: path, stillWritten: true, contentType: contentType, mtime: mtime, custom: custom, base: changes.base,
        appended: edit.takeAppended())
    }
    edit.setOpenUpload(sequence)
    return sequence
  }

  func releaseLocal(_ opened: FileHandle) {
    guard let writeBack, case .edit(let handle) = opened else { return }
    let edit = handle.edit
    defer { writeBack.edits.close(edit) }
    // The last of the kernel's writers is gone: what the file holds now is what goes up, with
    // what was set on it since its last close (tar's chown, chmod and times).
    if handle.writesByKernel, let (uploads, current) = edit.leaveWriter(), !uploads.isEmpty {
      edit.closing.withLock { _ in
        let changes = edit.takeChanges()
        for upload in uploads {
          guard upload == current, let changes else {
            writeBack.queue.sealWritten(upload)
            continue
          }
          writeBack.queue.sealWritten(upload, metadata: (changes.uploadContentType, changes.uploadCustom, changes.mtime ?? edit.modified))
        }
      }
      return
    }
    // The last handle queues what none queued (a chmod made while the file was open): no
    // writer is left, so the bytes are whole.
    if handle.changed || !writeBack.edits.isShared(edit) { _ = try? queue(edit) }
  }

  /// fsync: the file's bytes are queued, then its upload is waited for, for `read_timeout` at
  /// most (the bound of every request that waits on the server). With the server out of reach,
  /// slow, or busy with the changes before it, the bytes fsynced in the queue are what there is
  /// to wait for: they reach the bucket from there, across a crash too.
  ///
  /// As on a local disk, any descriptor of the file will do (one opened for reading, a handle
  /// of queued bytes): the file's edit, when another handle has it open, is queued as if its
  /// own writer fsynced it, and what closes queued is committed.
  package func fsync(handle: UInt64, ino: UInt64? = nil) async throws(FSError) {
    guard let writeBack else { return }
    let edit: LocalEdits.Edit?
    if case .edit(let opened) = fileHandles[handle] {
      edit = opened.edit
    } else {
      edit = ino.flatMap { inodes.node($0) }.flatMap { $0.isDirectory ? nil : writeBack.edits[$0.path] }
    }
    guard let edit else {
      // Nothing of it is open for writing: what its closes queued lasts once committed.
      try writeBack.queue.commit()
      return
    }
    // A file the kernel writes goes as a copy of what it holds: its writers may go on.
    let sequence = try queue(edit, copying: true)
    // What closes queued lasts once the group commit has run: now, for this fsync.
    try writeBack.queue.commit()
    edit.fsynced()
    guard let sequence else { return }
    switch await writeBack.queue.wait(for: sequence, within: options.readTimeout) {
    case .applied, .waiting: return
    case .conflict: throw FSError(ESTALE)
    case .failed: throw FSError(EIO)
    }
  }

  /// fsync of a folder: the names made, removed and renamed in it are queue records, which last
  /// once committed (the kernel takes a missing handler for success, which kept nothing).
  package func fsyncFolder() throws(FSError) {
    try writeBack?.queue.commit()
  }

  /// The pin passes still running after `unmounted` have given up (or `seconds` passed): the
  /// process may end. Each records and removes nothing once the mount ended.
  package func pinPassesEnded(within seconds: Double) async {
    guard let pins, await !pins.passesEnded(within: seconds) else { return }
    log("pins: a pass still ran \(seconds) s after the unmount; it records nothing")
  }

  /// The mount ended: the group commit runs once more, so that what closes queued lasts.
  package func unmounted() {
    pins?.stop()
    do throws(FSError) {
      try writeBack?.queue.commit()
    } catch {
      log("write-back: the last group commit failed (errno \(error.errno)): changes closed in the last second may not outlast a power loss")
    }
  }

  /// mknod of anything but a regular file (FIFOs, sockets, devices) and hard links: a bucket
  /// holds none of them. The errors a program checks for first come first, as on a disk:
  /// EROFS, ENAMETOOLONG, EEXIST; then EPERM, with nothing made.
  package func refuseSpecial(parent: UInt64, name: String) async -> Int32 {
    guard takesChanges else { return EROFS }
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
}

extension LocalEdits.Edit {
  func truncated(_ truncate: Bool) throws(FSError) {
    if truncate { try self.truncate(to: 0) }
  }
}
