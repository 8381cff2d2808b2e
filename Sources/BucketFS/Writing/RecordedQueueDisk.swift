// `SystemDisk`, writing down every operation it makes as it makes it, for a test that replays the
// states a power loss could leave of a whole mount's queue (`WholeMountCrashStateTests`). Off
// unless the mount command is started with `BUCKETFS_RECORD_QUEUE_DISK=FILE` in its environment
// (not a mount option: no user needs it, and the recording is slow).
//
// FILE gets one JSON object a line, in the order the operations were made (each made and written
// down under one lock, so two threads' operations are in the order they took effect):
//
//   {"op":"create","path":P,"file":N}        a new file (N: its identity, as `CrashStateTests`
//                                            models it: a name's file, whatever it is renamed to)
//   {"op":"contents","file":N,"sha256":H,"size":S}  the file's whole contents now; the bytes are
//                                            in FILE.blobs/H
//   {"op":"fsync","file":N}
//   {"op":"rename","from":P,"to":Q}   {"op":"link","from":P,"to":Q}   {"op":"unlink","path":P}
//   {"op":"mkdir","path":P}   {"op":"rmdir","path":P}   {"op":"syncFolder","path":P}
//   {"op":"lock","file":N}                   (no lasting effect; for whoever reads the file)
//
// A file is known by its inode, so a descriptor this disk did not open (a fill's `dup`) is known
// too. A program's writes into an edit's file, and the kernel's by passthrough, never come here:
// the file's contents are taken before every link, rename and fsync of it, when they are handed
// on or made to last. Only what the staging folder holds is written down: paths and bytes of the
// queue's files, never a credential (none is kept there).
import Foundation
import StorageCore
import Synchronization

final class RecordedQueueDisk: QueueDisk, @unchecked Sendable {
  private struct Inode: Hashable {
    let device: UInt64
    let number: UInt64
    init(_ st: stat) {
      device = UInt64(st.st_dev)
      number = UInt64(st.st_ino)
    }
  }

  private struct State {
    var files: [Inode: Int] = [:]
    /// The digest of each file's contents as last written down.
    var recorded: [Int: String] = [:]
    var nextFile = 1
  }

  private let system = SystemDisk()
  private let out: Int32
  private let blobs: String
  /// Held while an operation is made and written down.
  private let state = Mutex(State())

  init(file: String) throws(FSError) {
    out = Glibc.open(file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
    guard out >= 0 else { throw FSError(errno) }
    blobs = file + ".blobs"
    guard Glibc.mkdir(blobs, 0o700) == 0 || errno == EEXIST else { throw FSError(errno) }
  }

  deinit { _ = Glibc.close(out) }

  private func note(_ fields: [String: Any]) {
    guard var line = try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys]) else { return }
    line.append(0x0A)
    _ = line.withUnsafeBytes { system.write(out, $0) }
  }

  private static func inode(fd: Int32) -> Inode? {
    var st = stat()
    return fstat(fd, &st) == 0 ? Inode(st) : nil
  }

  private static func inode(path: String) -> Inode? {
    var st = stat()
    return lstat(path, &st) == 0 ? Inode(st) : nil
  }

  /// A new identity for the file at `inode`, named `path`.
  private func created(_ s: inout State, _ inode: Inode, _ path: String) -> Int {
    let file = s.nextFile
    s.nextFile += 1
    s.files[inode] = file
    note(["op": "create", "path": path, "file": file])
    return file
  }

  /// The identity of the file at `path`: one made now (with its creation) for a file this disk
  /// has not seen made.
  private func identify(_ s: inout State, path: String) -> Int? {
    guard let inode = Self.inode(path: path) else { return nil }
    return s.files[inode] ?? created(&s, inode, path)
  }

  /// The file's contents, written down when they changed since the last time.
  private func contents(_ s: inout State, _ file: Int, reading path: String) {
    let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return }
    defer { _ = Glibc.close(fd) }
    var data = Data()
    var buffer = [UInt8](repeating: 0, count: 1 << 20)
    var offset: off_t = 0
    while true {
      let n = Glibc.pread(fd, &buffer, buffer.count, offset)
      if n <= 0 { break }
      data.append(contentsOf: buffer[0..<n])
      offset += off_t(n)
    }
    let digest = Digest(.sha256)
    digest.update(data)
    let hex = Digest.hex(digest.finalize())
    guard s.recorded[file] != hex else { return }
    s.recorded[file] = hex
    let blob = blobs + "/" + hex
    if access(blob, F_OK) != 0 {
      let fd = Glibc.open(blob + ".tmp", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
      if fd >= 0 {
        _ = data.withUnsafeBytes { system.write(fd, $0) }
        _ = Glibc.close(fd)
        _ = Glibc.rename(blob + ".tmp", blob)
      }
    }
    note(["op": "contents", "file": file, "sha256": hex, "size": data.count])
  }

  /// The contents of the file `fd` is open on, if this disk knows it.
  private func contents(_ s: inout State, fd: Int32) {
    guard let inode = Self.inode(fd: fd), let file = s.files[inode] else { return }
    contents(&s, file, reading: "/proc/self/fd/\(fd)")
  }

  func open(_ path: String, _ flags: Int32, _ mode: mode_t) -> Int32 {
    state.withLock { s in
      let existed = Self.inode(path: path)
      let fd = system.open(path, flags, mode)
      guard fd >= 0 else { return fd }
      let saved = errno
      defer { errno = saved }
      if let inode = Self.inode(fd: fd), existed == nil || s.files[inode] == nil {
        let file = created(&s, inode, path)
        contents(&s, file, reading: "/proc/self/fd/\(fd)")
      } else if flags & O_TRUNC != 0 {
        contents(&s, fd: fd)
      }
      return fd
    }
  }

  func write(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Int {
    state.withLock { s in
      let n = system.write(fd, bytes)
      let saved = errno
      contents(&s, fd: fd)
      errno = saved
      return n
    }
  }

  func pwrite(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, at offset: Int64) -> Int {
    state.withLock { s in
      let n = system.pwrite(fd, bytes, at: offset)
      let saved = errno
      contents(&s, fd: fd)
      errno = saved
      return n
    }
  }

  func truncate(_ fd: Int32, to size: Int64) -> Int32 {
    state.withLock { s in
      let result = system.truncate(fd, to: size)
      let saved = errno
      contents(&s, fd: fd)
      errno = saved
      return result
    }
  }

  func copyAll(from input: Int32, to output: Int32) throws(FSError) -> Int64 {
    try state.withLock { s throws(FSError) -> Int64 in
      let n = try system.copyAll(from: input, to: output)
      contents(&s, fd: output)
      return n
    }
  }

  func fsync(_ fd: Int32) -> Int32 {
    state.withLock { s in
      // What the program or the kernel wrote since: this fsync makes it last.
      contents(&s, fd: fd)
      let result = system.fsync(fd)
      let saved = errno
      if result == 0, let inode = Self.inode(fd: fd), let file = s.files[inode] { note(["op": "fsync", "file": file]) }
      errno = saved
      return result
    }
  }

  func close(_ fd: Int32) { system.close(fd) }

  /// `from`'s contents as they are now, before a rename or link hands them on.
  private func handOn(_ s: inout State, _ from: String) {
    if let file = identify(&s, path: from) { contents(&s, file, reading: from) }
  }

  func rename(_ from: String, _ to: String) -> Int32 {
    state.withLock { s in
      handOn(&s, from)
      let result = system.rename(from, to)
      let saved = errno
      if result == 0 { note(["op": "rename", "from": from, "to": to]) }
      errno = saved
      return result
    }
  }

  func link(_ from: String, _ to: String) -> Int32 {
    state.withLock { s in
      handOn(&s, from)
      let result = system.link(from, to)
      let saved = errno
      if result == 0 { note(["op": "link", "from": from, "to": to]) }
      errno = saved
      return result
    }
  }

  func unlink(_ path: String) -> Int32 {
    state.withLock { s in
      let result = system.unlink(path)
      let saved = errno
      if result == 0 { note(["op": "unlink", "path": path]) }
      errno = saved
      return result
    }
  }

  func makeFolder(_ path: String, _ mode: mode_t) -> Int32 {
    state.withLock { s in
      let result = system.makeFolder(path, mode)
      let saved = errno
      if result == 0 { note(["op": "mkdir", "path": path]) }
      errno = saved
      return result
    }
  }

  func removeFolder(_ path: String) -> Int32 {
    state.withLock { s in
      let result = system.removeFolder(path)
      let saved = errno
      if result == 0 { note(["op": "rmdir", "path": path]) }
      errno = saved
      return result
    }
  }

  func lock(_ fd: Int32) -> Int32 {
    state.withLock { s in
      let result = system.lock(fd)
      let saved = errno
      if result == 0, let inode = Self.inode(fd: fd), let file = s.files[inode] { note(["op": "lock", "file": file]) }
      errno = saved
      return result
    }
  }

  func syncFolder(_ dir: String) throws(FSError) {
    try state.withLock { s throws(FSError) in
      try system.syncFolder(dir)
      note(["op": "syncFolder", "path": dir])
    }
  }
}
