// Attributes through a writable mount: mode, owner and times (setattr) and custom metadata
// (setxattr), kept in the object's custom metadata through the queue; the sync state of a name
// and of the whole queue as extended attributes.
import Foundation
import StorageCore

extension BucketFilesystem {
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
    _ ino: UInt64, size: Int64?, mtime: Timestamp?, atime: Timestamp? = nil, owner: OwnerChange? = nil, handle: UInt64?
  ) async throws(FSError) -> FileAttributes {
    guard let node = inodes.node(ino) else { throw FSError(ESTALE) }
    if let owner, !owner.isEmpty {
      let current = node.isDirectory ? attributes(ino: ino, directory: true, metadata: nil) : try await getattr(ino)
      let change = PosixAttributes(
        mode: owner.mode.flatMap { $0 != current.mode ? $0 : nil }, uid: owner.uid.flatMap { $0 != current.uid ? $0 : nil },
        gid: owner.gid.flatMap { $0 != current.gid ? $0 : nil })
      if change != PosixAttributes() {
        guard takesChanges else { throw FSError(EROFS) }
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
    if (size != nil || times != PosixAttributes()) && !takesChanges { throw FSError(EROFS) }
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
    if let handle, case .edit(let e) = fileHandles[handle] { openEdit = e.edit }
    if size == nil, options.posix, writeBack.queue.view(path) == nil, !(openEdit?.isDirty ?? false) {
      try await queueMetadata(path, times, custom: times.customWithExactTime)
      return try await getattr(ino)
    }
    // Only times, after a close whose upload waits its turn (rsync, cp -p): they go with it.
    if size == nil, options.posix, openEdit == nil, try writeBack.queue.amend(path, custom: times.custom, mtime: mtime) {
      return try await getattr(ino)
    }
    // Times of a file the kernel writes, set by path or by a descriptor the kernel does not
    // name (tar's futimens before its close): its writers' closes take them with the bytes.
    if handle == nil, size == nil, let held = openEdit,
      held.whileKernelWrites({
        if let mtime { held.setMtime(mtime) }
        if times != PosixAttributes(), options.posix { held.setMetadata(contentType: nil, custom: times.custom) }
        recordQueued(held, writeBack.queue)
      })
    {
      return localAttributes(path, edit: held, lookup: false)
    }
    let edit: LocalEdits.Edit
    var opened = false
    if let handle, case .edit(let e) = fileHandles[handle] {
      edit = e.edit
      // ftruncate, futimens: the handle changed the file, and its close queues it.
      e.markChanged()
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
      // A file made longer takes its new length of the budget, as a write would.
      if size > edit.size, writeBack.queue.queuedBytes + writeBack.edits.room.bytes - edit.countedBytes + size > options.stagingSize {
        log("write-back: no room for \(path.debugDescription) to grow to \(size) bytes within staging_size (\(options.stagingSize) bytes): ENOSPC")
        throw FSError(ENOSPC)
      }
      try edit.truncate(to: size)
      // A file the kernel writes, whose record a close wrote: its record has the new length too.
      if edit.openUpload != nil { recordQueued(edit, writeBack.queue) }
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
      if !edit.whileKernelWrites({
        edit.setMetadata(contentType: nil, custom: change.custom)
        recordQueued(edit, writeBack.queue)
      }) {
        edit.setMetadata(contentType: nil, custom: change.custom)
        recordQueued(edit, writeBack.queue)
      }
      return
    }
    // Bytes this mount queued and waiting their turn: the entries go with their upload.
    if try writeBack.queue.amend(path, custom: change.custom) { return }
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

  /// Metadata just set on a file open for writing whose bytes a close already queued (tar's,
  /// cp's and a shell's chmod after the close, before the release): the queued record says it
  /// now, so that what the call returned outlasts a kill -9 before the release takes it.
  /// Bytes written since the close are not queued here; their writer's close does that.
  func recordQueued(_ edit: LocalEdits.Edit, _ queue: WriteBackQueue) {
    guard let changes = edit.pendingChanges else { return }
    if let open = edit.openUpload {
      _ = try? queue.rewriteWritten(open, contentType: changes.uploadContentType, custom: changes.uploadCustom, mtime: changes.mtime ?? edit.modified)
    } else if edit.lastQueued != nil, edit.bytesAreQueued {
      _ = try? queue.amend(changes.name, contentType: changes.contentType, custom: changes.custom, mtime: changes.mtime)
    }
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

  /// `setfattr -n user.content_type` or `user.meta.KEY`: the object's metadata, through the
  /// queue. Other names are the object's own (size, hashes…: EPERM) or not ours (ENOTSUP).
  package func setXattr(_ ino: UInt64, name: String, value: String) async throws(FSError) {
    // Not ours (ACLs, security labels): not supported, on files and folders alike, so that
    // cp -a and rsync -a fall back to chmod as they do on any filesystem without ACLs.
    guard name.hasPrefix("user.") else { throw FSError(ENOTSUP) }
    if name == Self.pinAttribute { return try await setPinXattr(ino, value: value) }
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
    if writeBack.edits[path] == nil, try writeBack.queue.amend(path, contentType: contentType, custom: custom) { return }
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
    guard let writeBack else { return queueText() }
    let within = min(Double(ms) / 1000, Self.queueWaitLimit)
    let deadline = ContinuousClock.now + .milliseconds(Int(within * 1000))
    try? writeBack.queue.commit()
    // What was queued when sync asked; what writers that go on queue meanwhile is not waited
    // for, as sync(1) does not wait for it.
    let mark = writeBack.queue.newest
    var left = await writeBack.queue.waitUntilDone(through: mark, within: within)
    if left.stillWritten > 0 {
      // Files closed and still open for writing elsewhere (a descriptor passed on, dup'd; a
      // script's output), which the kernel writes itself: what they hold now goes, as a copy,
      // as an fsync would send it, in place of the upload that waits for their writers.
      for edit in writeBack.edits.all where edit.openUpload != nil { _ = try? queue(edit, copying: true) }
      try? writeBack.queue.commit()
      left = await writeBack.queue.waitUntilDone(through: mark, within: Self.seconds(until: deadline))
    }
    return queueText(outstanding: left)
  }

  private static func seconds(until deadline: ContinuousClock.Instant) -> Double {
    let left = deadline - ContinuousClock.now
    return max(0, Double(left.components.seconds) + Double(left.components.attoseconds) / 1e18)
  }

  /// The mount is ending: a `bucketfs sync` waiting on it is answered with the queue as it is.
  package func stopping() { writeBack?.queue.endWaits() }

  /// `outstanding`: what is left of the changes `bucketfs sync` waits for (default: all).
  package func queueText(outstanding: (changes: Int, stillWritten: Int)? = nil) -> String {
    guard let writeBack else { return "0\n" }
    let t = writeBack.queue.totals
    let left = outstanding ?? (t.changes, t.stillWritten)
    // Within an extended attribute's 64 KiB (10,000 queued moves took more: E2BIG).
    return "\(left.changes) \(t.failed) \(t.damaged) \(left.stillWritten)\n" + writeBack.queue.describe(within: 60_000)
      + (t.damaged > 0 ? "damaged\t\(t.damaged) records or bytes kept aside in \(writeBack.queue.damaged.folder.path), not carried out\n" : "")
  }
}
