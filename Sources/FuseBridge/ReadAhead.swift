import Foundation

/// The kernel reads ahead of a sequential reader by the mount's `read_ahead_kb`, which is
/// 128 KiB for a new FUSE mount whatever the filesystem asks for in init (the lower of the two
/// wins). Read requests of 1 MiB instead of 128–256 KiB make a reader through the mount about a
/// third faster: set it before init, for this mount only. Only root may; others keep the default.
enum ReadAhead {
  static let kilobytes = 1024

  /// Widens the read-ahead of the mount at `mountpoint`; false when it could not.
  @discardableResult
  static func widen(mountpoint: String) -> Bool {
    guard let device = device(of: mountpoint) else { return false }
    let path = "/sys/class/bdi/\(device)/read_ahead_kb"
    guard let current = try? String(contentsOfFile: path, encoding: .utf8),
      let kb = Int(current.trimmingCharacters(in: .whitespacesAndNewlines))
    else { return false }
    if kb >= kilobytes { return true }
    return (try? "\(kilobytes)\n".write(toFile: path, atomically: false, encoding: .utf8)) != nil
  }

  /// The "major:minor" of the filesystem mounted at `mountpoint`, from /proc/self/mountinfo
  /// (asking stat would send a request to the mount before it serves any).
  static func device(of mountpoint: String) -> String? {
    guard let text = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8) else { return nil }
    guard let resolved = realpath(mountpoint, nil) else { return nil }
    let target = String(cString: resolved)
    free(resolved)
    var found: String? = nil
    for line in text.split(separator: "\n") {
      // id parent major:minor root mountpoint …; the last mount on a path is the one in use.
      let fields = line.split(separator: " ", maxSplits: 5)
      guard fields.count >= 5, unescape(fields[4]) == target else { continue }
      found = String(fields[2])
    }
    return found
  }

  /// mountinfo writes space, tab, newline and backslash in paths as octal escapes.
  static func unescape(_ field: Substring) -> String {
    var out = [UInt8]()
    var bytes = Array(field.utf8)[...]
    while let b = bytes.popFirst() {
      if b == UInt8(ascii: "\\"), bytes.count >= 3, let v = UInt8(String(decoding: bytes.prefix(3), as: UTF8.self), radix: 8) {
        out.append(v)
        bytes = bytes.dropFirst(3)
      } else {
        out.append(b)
      }
    }
    return String(decoding: out, as: UTF8.self)
  }
}
