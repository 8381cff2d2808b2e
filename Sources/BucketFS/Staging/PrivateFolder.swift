// The staging folder holds copies of objects and their index, which carries download tokens
// (a token is enough to fetch the object): nobody but the owner may list, read or traverse it.
import Foundation

enum PrivateFolder {
  static let folderMode: mode_t = 0o700
  static let fileMode: mode_t = 0o600

  /// Creates `folder` (and missing parents) private to its owner, and makes an existing one private.
  static func make(_ folder: URL) throws {
    try FileManager.default.createDirectory(
      at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: Int(folderMode)])
    chmod(folder.path, folderMode)
  }

  /// Makes every file in `folder` readable by its owner only (copies staged by older versions
  /// were 0644).
  static func tightenFiles(in folder: URL) {
    for file in (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? [] {
      let path = folder.appendingPathComponent(file).path
      var st = stat()
      guard lstat(path, &st) == 0 else { continue }
      let isDir = st.st_mode & S_IFMT == S_IFDIR
      let wanted = isDir ? folderMode : fileMode
      if st.st_mode & 0o777 != wanted { chmod(path, wanted) }
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
