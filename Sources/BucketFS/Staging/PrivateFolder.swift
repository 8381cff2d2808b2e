// The staging folder holds copies of objects and their index, which carries download tokens
// (a token is enough to fetch the object): nobody but the owner may list, read or traverse it.
// The daemon often runs as root, and `staging_dir` may sit in a shared place such as /tmp, so a
// folder another user could have prepared is refused: every folder on the way must belong to
// root or to us and be writable by nobody else (unless sticky, as /tmp is), a symlink on the
// way must belong to root or to us, and the folders we keep files in must be ours, 0700 and
// not symlinks. Files inside are created and opened with O_NOFOLLOW, so nothing in them is
// followed elsewhere.
import Foundation

enum PrivateFolder {
  static let folderMode: mode_t = 0o700
  static let fileMode: mode_t = 0o600

  typealias Refused = PrivateFolderRefusal

  /// Creates `folder` (and missing parents), checking each folder on the way; the last one is
  /// ours and private. Throws when someone else controls any of them.
  static func make(_ folder: URL) throws {
    let me = geteuid()
    var path = ""
    let parts = folder.standardizedFileURL.path.split(separator: "/").map(String.init)
    for (i, part) in parts.enumerated() {
      guard part != ".." else { throw Refused.unsafe("\(folder.path): a staging folder path may not contain ..") }
      path += "/" + part
      let isLast = i == parts.count - 1
      var st = stat()
      if lstat(path, &st) != 0 {
        guard errno == ENOENT else { throw Refused.unsafe("\(path): \(String(cString: strerror(errno)))") }
        if mkdir(path, folderMode) != 0 && errno != EEXIST {
          throw Refused.unsafe("cannot create \(path): \(String(cString: strerror(errno)))")
        }
        guard lstat(path, &st) == 0 else { throw Refused.unsafe("\(path): \(String(cString: strerror(errno)))") }
      }
      if st.st_mode & S_IFMT == S_IFLNK {
        guard st.st_uid == me || st.st_uid == 0 else {
          throw Refused.unsafe("\(path) is a symlink owned by another user (uid \(st.st_uid)); refusing it as a staging folder")
        }
        guard let real = realpath(path, nil) else { throw Refused.unsafe("\(path): \(String(cString: strerror(errno)))") }
        path = String(cString: real)
        free(real)
        guard stat(path, &st) == 0 else { throw Refused.unsafe("\(path): \(String(cString: strerror(errno)))") }
      }
      guard st.st_mode & S_IFMT == S_IFDIR else { throw Refused.unsafe("\(path) is not a folder") }
      guard st.st_uid == me || (st.st_uid == 0 && !isLast) else {
        throw Refused.unsafe(
          "\(path) belongs to another user (uid \(st.st_uid)); refusing a staging folder someone else controls")
      }
      if !isLast && st.st_mode & 0o022 != 0 && st.st_mode & S_ISVTX == 0 {
        throw Refused.unsafe("\(path) can be changed by other users; refusing a staging folder under it")
      }
    }
    // Made private through a descriptor of the folder itself, never through a name that could
    // be swapped for a symlink meanwhile.
    let fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
    guard fd >= 0 else { throw Refused.unsafe("\(path): \(String(cString: strerror(errno)))") }
    defer { close(fd) }
    var st = stat()
    guard fstat(fd, &st) == 0, st.st_uid == me else { throw Refused.unsafe("\(path) changed hands while it was checked") }
    if st.st_mode & 0o7777 != folderMode { fchmod(fd, folderMode) }
  }

  /// Makes every file in `folder` readable by its owner only (copies staged by older versions
  /// were 0644); symlinks, which nothing of ours makes, are removed rather than followed.
  static func tightenFiles(in folder: URL) {
    for file in (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? [] {
      let path = folder.appendingPathComponent(file).path
      var st = stat()
      guard lstat(path, &st) == 0 else { continue }
      if st.st_mode & S_IFMT == S_IFLNK {
        unlink(path)
        continue
      }
      let isDir = st.st_mode & S_IFMT == S_IFDIR
      let fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | (isDir ? O_DIRECTORY : 0))
      guard fd >= 0 else { continue }
      let wanted = isDir ? folderMode : fileMode
      if fstat(fd, &st) == 0, st.st_uid == geteuid(), st.st_mode & 0o777 != wanted { fchmod(fd, wanted) }
      close(fd)
    }
  }

  /// True when every entry of `folder` is a per-bucket staging folder (16 hex digits): then the
  /// folder is ours to make private, not a shared place such as /tmp that someone pointed us at.
  static func holdsOnlyStaging(_ folder: URL) -> Bool {
    var st = stat()
    guard lstat(folder.path, &st) == 0, st.st_uid == getuid(), st.st_mode & S_ISVTX == 0 else { return false }
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
    return entries.allSatisfy { $0.count == 16 && $0.allSatisfy(\.isHexDigit) }
  }
}

/// Why a staging folder was refused, in words a person can act on.
package enum PrivateFolderRefusal: Error, CustomStringConvertible {
  case unsafe(String)
  package var description: String {
    switch self { case .unsafe(let why): return why }
  }
}
