// Writing files that must survive `kill -9` and a power loss: the queue's records and bytes, and
// the notes kept beside damaged ones. A file is written under a name of its own, fsynced, and
// renamed; the folder is fsynced so that the rename lasts too.
import Foundation

enum DurableFile {
  /// `data` in a new file at `path`, fsynced.
  static func write(_ data: Data, to path: String) throws(FSError) {
    unlink(path)
    let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
    guard fd >= 0 else { throw FSError(errno) }
    defer { close(fd) }
    let written = data.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
    guard written == data.count else { throw FSError(written < 0 ? errno : ENOSPC) }
    guard fsync(fd) == 0 else { throw FSError(errno) }
  }

  /// `data` at `path` in place of what was there: under a temporary name of this writer's own
  /// (two threads may write one path at once), fsynced, renamed, and the folder fsynced.
  static func replace(_ path: String, with data: Data) throws(FSError) {
    let temporary = path + "." + String(UInt64.random(in: 0...UInt64.max), radix: 36) + ".tmp"
    do throws(FSError) {
      try write(data, to: temporary)
    } catch {
      unlink(temporary)
      throw error
    }
    guard rename(temporary, path) == 0 else {
      let e = errno
      unlink(temporary)
      throw FSError(e)
    }
    syncFolder(of: path)
  }

  /// What `fd` holds, copied into a new file at `path` and fsynced; returns its size.
  @discardableResult
  static func copy(from fd: Int32, to path: String) throws(FSError) -> Int64 {
    unlink(path)
    let out = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
    guard out >= 0 else { throw FSError(errno) }
    defer { close(out) }
    let size: Int64
    do throws(FSError) {
      size = try copyAll(from: fd, to: out)
    } catch {
      unlink(path)
      throw error
    }
    guard fsync(out) == 0 else {
      let e = errno
      unlink(path)
      throw FSError(e)
    }
    return size
  }

  /// Everything `input` holds into `output` from its start (in the kernel: sendfile); returns
  /// how many bytes that was.
  @discardableResult
  static func copyAll(from input: Int32, to output: Int32) throws(FSError) -> Int64 {
    var st = stat()
    guard fstat(input, &st) == 0 else { throw FSError(errno) }
    guard ftruncate(output, 0) == 0, lseek(output, 0, SEEK_SET) == 0 else { throw FSError(errno) }
    var offset = off_t(0)
    var left = Int64(st.st_size)
    while left > 0 {
      let n = sendfile(output, input, &offset, Int(min(left, 1 << 30)))
      if n < 0 && errno == EINTR { continue }
      guard n > 0 else { throw FSError(n < 0 ? errno : EIO) }
      left -= Int64(n)
    }
    return Int64(st.st_size)
  }

  /// Makes the names in `path`'s folder (a rename into it, say) last.
  static func syncFolder(of path: String) {
    let fd = open((path as NSString).deletingLastPathComponent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    guard fd >= 0 else { return }
    fsync(fd)
    close(fd)
  }
}
