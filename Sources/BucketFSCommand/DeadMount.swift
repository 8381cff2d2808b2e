import ChildProcess
import Foundation

/// A mountpoint left behind by a bucketfs daemon that died (killed, crashed): the kernel still
/// has the mount, and every access fails with ENOTCONN ("Transport endpoint is not connected").
/// Only that exact state is cleaned up, and only for our own filesystem type.
enum DeadMount {
  /// The /proc/mounts entry type of bucketfs mounts.
  static let type = "fuse.bucketfs"

  /// The filesystem type mounted at `path`, from /proc/mounts (the last mount there wins).
  static func mountedType(at path: String) -> String? {
    guard let table = try? String(contentsOfFile: "/proc/mounts", encoding: .utf8) else { return nil }
    var found: String?
    for line in table.split(separator: "\n") {
      let fields = line.split(separator: " ")
      guard fields.count >= 3 else { continue }
      if unescape(String(fields[1])) == path { found = String(fields[2]) }
    }
    return found
  }

  /// /proc/mounts writes space, tab, newline and backslash as octal escapes (`\040`).
  static func unescape(_ field: String) -> String {
    let bytes = Array(field.utf8)
    var out: [UInt8] = []
    var i = 0
    while i < bytes.count {
      if bytes[i] == UInt8(ascii: "\\"), i + 4 <= bytes.count, let code = UInt8(String(decoding: bytes[(i + 1)..<(i + 4)], as: UTF8.self), radix: 8)
      {
        out.append(code)
        i += 4
      } else {
        out.append(bytes[i])
        i += 1
      }
    }
    return String(decoding: out, as: UTF8.self)
  }

  /// The absolute path of `path` without touching it (it cannot be stat'ed while dead).
  static func absolute(_ path: String) -> String {
    let url = URL(fileURLWithPath: path).standardizedFileURL
    let parent = url.deletingLastPathComponent().path
    var resolved = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    guard realpath(parent, &resolved) != nil else { return url.path }
    let base = String(decoding: resolved.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    return (base == "/" ? "" : base) + "/" + url.lastPathComponent
  }

  /// True when a bucketfs mount sits at `path` and its daemon is gone. statvfs (statfs(2)) always reaches
  /// the daemon (stat may be answered from the kernel's attribute cache), so it tells.
  static func isDead(_ path: String) -> Bool {
    guard mountedType(at: absolute(path)) == type else { return false }
    var fs = statvfs()
    return statvfs(path, &fs) != 0 && errno == ENOTCONN
  }

  /// Unmounts a dead bucketfs mount at `path`; true when `path` was one and is now clean.
  static func cleanUp(_ path: String) -> Bool {
    let absolutePath = absolute(path)
    guard mountedType(at: absolutePath) == type else { return false }
    _ = try? ChildProcess.run(
      "/bin/fusermount3", ["-u", "-z", absolutePath], environment: ProcessInfo.processInfo.environment,
      errors: .null, timeout: .seconds(10))
    if mountedType(at: absolutePath) == type {
      // Without fusermount3 (or as root), the kernel's lazy unmount does the same.
      _ = umount2(absolutePath, Int32(MNT_DETACH))
    }
    var st = stat()
    return lstat(absolutePath, &st) == 0
  }
}
