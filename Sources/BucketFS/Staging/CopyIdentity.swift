// What a complete copy's data file was on disk when it was last verified. Reads this daemon
// serves check the blocks they touch; reads the kernel serves by itself (passthrough) cannot be
// checked one by one, so a copy is handed to the kernel only while its file is still the one
// verified. A write to it through the kernel moves its change time, which no program can set
// back, so a copy whose identity differs is verified whole again before it is handed over.
import Foundation

struct CopyIdentity: Equatable, Sendable {
  let device: UInt64
  let inode: UInt64
  let size: Int64
  let modified: Int64  // ns
  let changed: Int64  // ns

  init(_ st: stat) {
    device = UInt64(st.st_dev)
    inode = UInt64(st.st_ino)
    size = Int64(st.st_size)
    modified = Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec)
    changed = Int64(st.st_ctim.tv_sec) * 1_000_000_000 + Int64(st.st_ctim.tv_nsec)
  }

  static func of(_ file: FileDescriptor) -> CopyIdentity? {
    var st = stat()
    return fstat(file.fd, &st) == 0 ? CopyIdentity(st) : nil
  }

  static func of(path: String) -> CopyIdentity? {
    var st = stat()
    return lstat(path, &st) == 0 && st.st_mode & S_IFMT == S_IFREG ? CopyIdentity(st) : nil
  }

  /// As kept in the copy's side file.
  var encoded: String { "\(device):\(inode):\(size):\(modified):\(changed)" }

  init?(encoded: String) {
    let parts = encoded.split(separator: ":").compactMap { Int64($0) }
    guard parts.count == 5, parts.allSatisfy({ $0 >= 0 }) else { return nil }
    device = UInt64(parts[0])
    inode = UInt64(parts[1])
    size = parts[2]
    modified = parts[3]
    changed = parts[4]
  }
}
