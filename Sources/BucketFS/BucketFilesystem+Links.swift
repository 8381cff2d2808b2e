// Symbolic links (`SymlinkObject`): read from the bucket, written through the queue like any
// file. bucketfs never follows a link itself: the kernel resolves a target, relative to the
// link's folder, as on any filesystem.
import Foundation
import StorageCore

extension BucketFilesystem {
  /// The target of link `ino`: from its metadata when that holds it, else its bytes (this
  /// mount's own, while they are queued). EINVAL for anything but a link.
  package func readlink(_ ino: UInt64) async throws(FSError) -> String {
    guard let node = inodes.node(ino), !node.isDirectory else { throw FSError(EINVAL) }
    let path = node.objectName ?? node.path
    let bytes: Data
    if let local = try localLinkBytes(path) {
      bytes = local
    } else {
      var name = path
      let m: StorageMetadata
      // A link renamed on the server (a queued copy or move) is its source's version until that
      // lands: asking the bucket for the new name first answered ENOENT.
      if case .copied(let source, _)? = writeBack?.queue.view(path) {
        m = try await copySource(source)
        name = source.name
      } else {
        m = try await namespace.fileMetadata(path)
      }
      guard SymlinkObject.isLink(m.customMetadata) else { throw FSError(EINVAL) }
      if let target = SymlinkObject.target(in: m.customMetadata) { return target }
      guard m.size > 0, m.size <= SymlinkObject.maxTarget else { throw FSError(EIO) }
      // A staged (pinned) link reads offline too.
      if let staged = staging?.read(client.bucketName(name), generation: m.generation, offset: 0, count: Int(m.size))?.data(),
        staged.count == Int(m.size), let target = String(validating: staged, as: UTF8.self), !target.isEmpty
      {
        return target
      }
      let reader = ObjectReader(client: client.bucketWide, cache: cache, name: client.bucketName(name), generation: m.generation, size: m.size)
      do throws(BucketError) {
        bytes = try await reader.read(offset: 0, count: Int(m.size))
      } catch {
        throw FSError(error)
      }
    }
    guard let target = String(validating: bytes, as: UTF8.self), !target.isEmpty else { throw FSError(EIO) }
    return target
  }

  /// The bytes of link `path` when this mount holds them (an edit, a queued upload); nil when
  /// the bucket does. EINVAL when the local file is not a link.
  private func localLinkBytes(_ path: String) throws(FSError) -> Data? {
    guard let writeBack else { return nil }
    if let edit = writeBack.edits[path] {
      guard SymlinkObject.isLink(edit.custom) else { throw FSError(EINVAL) }
      let file = edit.file
      return withExtendedLifetime(file) { Self.readSmall(file.fd) }
    }
    guard case .file(let dataPath, _, _)? = writeBack.queue.view(path) else { return nil }
    guard SymlinkObject.isLink(writeBack.queue.queuedMetadata(path)?.custom ?? nil) else { throw FSError(EINVAL) }
    let fd = Foundation.open(dataPath, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { throw FSError(EIO) }
    defer { close(fd) }
    return Self.readSmall(fd)
  }

  private static func readSmall(_ fd: Int32) -> Data? {
    var buffer = [UInt8](repeating: 0, count: SymlinkObject.maxTarget + 1)
    let n = pread(fd, &buffer, buffer.count, 0)
    return n >= 0 && n <= SymlinkObject.maxTarget ? Data(buffer[0..<n]) : nil
  }

  /// symlink(2): link `name` in folder `parent` to `target`, queued as an object whose bytes
  /// are the target.
  package func symlink(target: String, parent: UInt64, name: String) async throws(FSError) -> FileAttributes {
    let writeBack = try writable()
    guard let dir = inodes.node(parent), dir.isDirectory else { throw FSError(ENOENT) }
    guard !target.isEmpty else { throw FSError(ENOENT) }
    guard target.utf8.count <= SymlinkObject.maxTarget else { throw FSError(ENAMETOOLONG) }
    let path = Namespace.join(dir.path, name)
    try await checkNewName(name, in: dir.path, isFolder: false)
    if (try? await resolveForChange(dir.path, name)) != nil { throw FSError(EEXIST) }
    let edit = try await edit(path, truncate: true, created: true)
    defer { writeBack.edits.close(edit) }
    let bytes = Array(target.utf8)
    try edit.writing.withLock { _ throws(FSError) in
      guard pwrite(try edit.ownFile().fd, bytes, bytes.count, 0) == bytes.count else { throw FSError(errno == 0 ? EIO : errno) }
    }
    edit.changed()
    edit.setMetadata(contentType: nil, custom: SymlinkObject.custom(target: target))
    try queue(edit)
    namespace.missing.remove(path)
    entriesChanged(in: dir.path)
    let node = InodeTable.Node(path: path, isDirectory: false, objectName: path)
    var a = attributes(ino: inodes.ino(for: node, lookup: true), directory: false, metadata: nil)
    a.becomeLink(target: target)
    a.volatile = true
    return a
  }
}
