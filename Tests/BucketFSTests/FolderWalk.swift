import BucketFS
import Foundation

extension BucketFilesystem {
  /// The inode of `folder`, looked up component by component from the root.
  func folderIno(_ folder: String) async throws(FSError) -> UInt64 {
    var ino = InodeTable.rootIno
    for part in folder.split(separator: "/") {
      let attrs = try await lookup(parent: ino, name: String(part))
      guard attrs.isDirectory else { throw FSError(ENOTDIR) }
      ino = attrs.ino
    }
    return ino
  }
}
