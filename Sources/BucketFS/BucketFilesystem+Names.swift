// Changes of names through a writable mount (`-o writable`): unlink, mkdir, rmdir, rename, each
// queued (WriteBackQueue) after its name is checked and what it is based on resolved.
import Foundation
import StorageCore

extension BucketFilesystem {
  func writable() throws(FSError) -> WriteBack {
    guard takesChanges, let writeBack else { throw FSError(EROFS) }
    return writeBack
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
  func checkNewName(_ name: String, in dir: String, isFolder: Bool) async throws(FSError) {
    let objectName = client.bucketName(Namespace.join(dir, name))
    if let errno = Namespace.refusal(ofNewName: name, objectName: objectName, isFolder: isFolder) { throw FSError(errno) }
    guard !name.utf8.allSatisfy({ $0 < 0x80 }) else { return }
    // Another spelling this mount knows without the folder's listing: one it queued or is
    // editing (its upload may be done while a listing taken before it is still current), or
    // whose attributes it holds.
    let path = Namespace.join(dir, name)
    let known = [writeBack?.queue.otherSpelling(of: path), writeBack?.edits.otherSpelling(of: path), namespace.files.otherSpelling(of: path)]
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
      // Changed only by an edit still open that has queued nothing: a change now is based on
      // the version that edit started from (a rename of a file a process holds open, an
      // editor's save over one), not on a queued change that is not there.
      if let edit = writeBack?.edits[path], edit.lastQueued == nil, writeBack?.queue.view(path) == nil, case .generation = edit.base {
        return (entry, edit.base)
      }
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
    try await checkNewName(name, in: dir.path, isFolder: true)
    if (try? await resolveForChange(dir.path, name)) != nil { throw FSError(EEXIST) }
    // A folder of this name removed before keeps nothing for this one.
    posixChanges.forget(path)
    namespace.folders.set(path, .absent)
    if options.posix {
      // Set-id bits are never kept (setattr's rule); the sticky bit is.
      let now = Timestamp.now()
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
    if await holdsMoreOnServer(path, writeBack) { throw FSError(ENOTEMPTY) }
    try writeBack.queue.delete(path + "/", base: .any)
    posixChanges.forget(path)
    namespace.folders.set(path, .absent)
    entriesChanged(in: dir.path)
  }

  /// Renames a file: its bytes go under the new name (based on what is there now) and the old
  /// name is deleted (based on what it was), both through the queue, in that order. A folder is
  /// renamed file by file the same way, up to `folderRenameFiles` files (beyond: EXDEV, and `mv`
  /// copies it); on a hierarchical bucket, in one `folders.rename` on the server when it can
  /// (`renameFolderOnServer`). A file still open follows its rename, as on a disk.
  package func rename(parent: UInt64, name: String, newParent: UInt64, newName: String, flags: UInt32) async throws(FSError) {
    let writeBack = try writable()
    guard let from = inodes.node(parent), let to = inodes.node(newParent), to.isDirectory else { throw FSError(ENOENT) }
    try await checkNewName(newName, in: to.path, isFolder: false)
    if flags & Self.renameExchange != 0 { throw FSError(EINVAL) }
    let source = Namespace.join(from.path, name)
    let target = Namespace.join(to.path, newName)
    if source == target { return }
    let (entry, sourceBase) = try await resolveForChange(from.path, name)
    if entry.isDirectory, client.bucketName(target).utf8.count + 1 > Namespace.maxObjectName { throw FSError(ENAMETOOLONG) }
    // From before its moves are queued until the pins follow: no pass records the old names
    // gone meanwhile (`PinKeeper.renameStarting`).
    let end = entry.isDirectory ? "/" : ""
    let renaming = pins?.renameStarting(from: client.bucketName(source) + end, to: client.bucketName(target) + end)
    defer { if let renaming { pins?.renameEnded(renaming) } }
    let existing = try? await resolveForChange(to.path, newName)
    if existing != nil && flags & Self.renameNoReplace != 0 { throw FSError(EEXIST) }
    if entry.isDirectory {
      if target.hasBytePrefix(source + "/") { throw FSError(EINVAL) }
      if let (other, _) = existing {
        guard other.isDirectory else { throw FSError(ENOTDIR) }
        guard try await mergedListing(target, { () async throws(FSError) in try await namespace.listing(target) }).isEmpty else {
          throw FSError(ENOTEMPTY)
        }
      }
      // On a hierarchical bucket, one step on the server when nothing of ours waits there.
      let onServer = existing == nil ? try await renameFolderOnServer(source, to: target, writeBack) : .perObject
      if onServer == .perObject { try await renameFolder(source, to: target, writeBack) }
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
    pinsFollow(renameOf: source, to: target, isFolder: entry.isDirectory)
    entriesChanged(in: from.path)
    entriesChanged(in: to.path)
  }

  /// The bytes of `source` (from the queue or the bucket) queued under `target`, then `source`
  /// queued for deletion.
  private func moveFile(
    _ source: String, _ entry: DirectoryEntry, _ sourceBase: PendingChange.Base, to target: String, _ targetBase: PendingChange.Base,
    _ writeBack: WriteBack, batch: QueueBatch? = nil
  ) async throws(FSError) {
    // The file as the mount shows it: what the bucket has, under the metadata changes this mount
    // queued of it (rsync sets a file's time and mode after its upload may have landed, then
    // renames it; those go with it, or the new name shows the upload's time).
    let pending = writeBack.queue.pendingMetadata(source)
    var custom = entry.metadata?.customMetadata ?? [:]
    custom.merge(pending.custom) { _, queued in queued }
    var contentType = pending.contentType ?? entry.metadata?.contentType
    let mtime = KeptTime.kept(in: custom) ?? PosixAttributes(custom: custom).mtime ?? entry.metadata?.updated.map(Timestamp.init)
    custom.removeValue(forKey: "mtime")
    // A file as the bucket has it, where the bucket copies: the server copies it, so nothing is
    // downloaded and the rename works with the server away too.
    if client.copiesOnServer, writeBack.edits[source] == nil, writeBack.queue.view(source) == nil, case .generation(let g) = sourceBase, g > 0,
      let m = entry.metadata
    {
      let from = PendingChange.Source(name: source, generation: g, size: m.size, crc32c: m.crc32c, md5Hash: m.md5Hash)
      try writeBack.queue.copy(
        target, from: from, contentType: contentType, mtime: mtime, custom: custom.isEmpty ? nil : custom, base: targetBase,
        deleting: (source, sourceBase), batch: batch)
      return
    }
    // Bytes written and not yet queued (a close whose release has not come) go first; the old
    // name's delete then follows them, not the version read before.
    var sourceBase = sourceBase
    if let open = writeBack.edits[source], try queue(open) != nil, writeBack.queue.view(source) != nil { sourceBase = .previous }
    // Bytes this mount queued go with all the metadata their upload carries (a setxattr after
    // the close amended it): the entry shows only their POSIX keys and time.
    if let queued = writeBack.queue.queuedMetadata(source) {
      let later = writeBack.queue.pendingMetadata(source, sinceLastVersion: true)
      var kept = queued.custom ?? [:]
      kept.merge(custom) { mine, _ in mine }
      kept.merge(later.custom) { _, set in set }
      kept.removeValue(forKey: "mtime")
      custom = kept
      contentType = later.contentType ?? queued.contentType ?? contentType
    }
    let edit = try await self.edit(source, truncate: false)
    // Done once the move is queued (with the rest of its batch): the edit's changes went with
    // it, and an edit still open elsewhere follows the rename; else it is done with.
    var movedInto: UInt64?
    func moved(_ queued: Bool) {
      if queued {
        // Under the close lock: a close taking the edit's changes under the old name while it
        // moved queued them there again, as held bytes no one dropped (the old name came back).
        let held = edit.closing.withLock { _ -> UInt64? in
          _ = edit.takeChanges()
          // Bytes the kernel still writes, held under the old name: they went under the new one.
          let held = edit.openUpload
          if writeBack.edits.isShared(edit) {
            writeBack.edits.move(edit, from: source, to: target)
          } else {
            edit.unlinked()
          }
          return held
        }
        if let held, let movedInto { writeBack.queue.dropWritten(held, movedInto: movedInto) }
      }
      writeBack.edits.close(edit)
    }
    do throws(FSError) {
      // The bytes are copied under the new name: whole, an overlay's holes filled first.
      if let fill = edit.fill {
        do throws(BucketError) {
          try await fill.ready()
        } catch {
          throw FSError(error)
        }
      }
      let file = edit.file
      movedInto = try withExtendedLifetime(file) { () throws(FSError) -> UInt64 in
        try writeBack.queue.upload(
          target, from: file.fd, contentType: contentType ?? ContentType.infer(fromName: target), mtime: mtime ?? edit.modified,
          custom: custom.isEmpty ? nil : custom, base: targetBase, deleting: (source, sourceBase), batch: batch)
      }
    } catch {
      writeBack.edits.close(edit)
      throw error
    }
    if let batch {
      batch.whenQueued(moved)
    } else {
      moved(true)
    }
  }

  /// How many files a folder rename moves at most; a larger folder answers EXDEV, and `mv`
  /// copies it through the mount instead (the same uploads and deletes, one file at a time).
  /// Where the bucket copies, each file is a queued move (no bytes read within the rename), all
  /// in one journal frame (~500 bytes a file); over Firebase REST each file's bytes are read
  /// within the rename, so fewer.
  package static let folderRenameLimit = 1000
  package static let folderMoveLimit = 50_000
  var folderRenameFiles: Int { client.copiesOnServer ? Self.folderMoveLimit : Self.folderRenameLimit }

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
          if files.count > folderRenameFiles { throw FSError(EXDEV) }
        }
      }
    }
    // One batch: a crash keeps the whole rename queued or none of it (each file under one name,
    // and all of them under the same one).
    try await writeBack.queue.queueTogether { batch throws(FSError) in
      for dir in folders {
        // The new placeholder keeps what the old one kept of the folder, and what this mount set.
        let moved = target + dir.droppingBytes(source.utf8.count)
        var custom: [String: String] = [:]
        if options.posix {
          await namespace.learnFolderObject(dir)
          custom = namespace.folders.keptEntries(dir)
          if let held = posixChanges.held({ dir }) { custom.merge(held.attributes.customWithExactTime) { _, set in set } }
        }
        try writeBack.queue.folder(moved, custom: custom, batch: batch)
      }
      for path in files {
        let (dir, name) = Namespace.split(path)
        let (entry, base) = try await resolveForChange(dir, name)
        try await moveFile(entry.objectName ?? path, entry, base, to: target + path.droppingBytes(source.utf8.count), .generation(0), writeBack, batch: batch)
      }
      for dir in folders.reversed() { try writeBack.queue.delete(dir + "/", base: .any, batch: batch) }
    }
    for dir in folders {
      if let known = namespace.folders.get(dir) { namespace.folders.set(target + dir.droppingBytes(source.utf8.count), known) }
    }
    namespace.folders.forget(under: source)
    posixChanges.moveFolders(source, to: target)
    inodes.move(prefix: source, to: target)
    namespace.missing.remove(target)
  }

  /// renameat2(2)'s flags (not in Glibc's Swift module).
  static let renameNoReplace: UInt32 = 1
  static let renameExchange: UInt32 = 2
}
