import Foundation

/// Files that hold secrets (refresh tokens, the staging index with download tokens): written
/// atomically under a temporary name, readable by the owner only.
package enum PrivateFile {
  /// Replaces `path` with `data`; `sync` makes it durable before the rename.
  package static func write(_ data: Data, to path: String, sync: Bool = true) throws(StorageError) {
    // A name of its own for each write: two threads replacing one file (two adoptions of one
    // staged copy write its side file) shared `.tmp-PID`, and one unlinked and renamed the
    // other's, which then failed and its caller removed the copy it described.
    let tmp = path + ".tmp-\(getpid())-" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
    // Never written through a link someone left under the temporary name.
    unlink(tmp)
    let fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
    guard fd >= 0 else { throw StorageError(code: .unknown, object: path, detail: "cannot write \(tmp)") }
    let written = data.withUnsafeBytes { raw in raw.count == 0 || Foundation.write(fd, raw.baseAddress!, raw.count) == raw.count }
    let ok = written && (!sync || fsync(fd) == 0)
    close(fd)
    guard ok, rename(tmp, path) == 0 else {
      unlink(tmp)
      throw StorageError(code: .unknown, object: path, detail: "cannot replace the file")
    }
  }

  /// A warning when `path` can be read by others (as ssh warns of an open key file).
  static func exposure(_ path: String) -> String? {
    var st = stat()
    guard stat(path, &st) == 0, st.st_mode & 0o077 != 0 else { return nil }
    return "warning: \(path) is readable by other users (mode \(String(st.st_mode & 0o777, radix: 8))): chmod 600 \(path)"
  }
}
