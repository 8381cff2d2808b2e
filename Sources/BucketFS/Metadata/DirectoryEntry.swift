import StorageCore

/// One name in a folder listing.
package struct DirectoryEntry: Sendable {
  package var name: String
  package var isDirectory: Bool
  /// For files: the object, relative to the mount prefix.
  package var objectName: String?
  /// The object's attributes, compact (a listing holds one per entry).
  package var summary: ObjectSummary?

  package init(name: String, isDirectory: Bool, objectName: String? = nil, metadata: StorageMetadata? = nil) {
    self.name = name
    self.isDirectory = isDirectory
    self.objectName = objectName
    self.summary = metadata.map { ObjectSummary($0, path: objectName) }
  }

  package init(name: String, isDirectory: Bool, objectName: String?, summary: ObjectSummary?) {
    self.name = name
    self.isDirectory = isDirectory
    self.objectName = objectName
    self.summary = summary
  }

  /// The attributes as `StorageMetadata` (made from the summary each time it is asked for).
  package var metadata: StorageMetadata? {
    get { summary?.metadata }
    set { summary = newValue.map { ObjectSummary($0, path: objectName) } }
  }

  /// Whether the attributes are known, without making them.
  package var hasMetadata: Bool { summary != nil }
}

/// Attributes as the bridge turns them into `struct stat`.
package struct FileAttributes: Sendable, Equatable {
  package var ino: UInt64
  /// The number `stat` shows, when it is not `ino`: a newer version's inode shows the one the
  /// name had (`InodeTable.detach`), as a file rewritten in place keeps its number, so that a
  /// program that checks it across stat and open (GNU cp) sees one file.
  package var statIno: UInt64?
  package var size: Int64
  package var isDirectory: Bool
  package var mode: UInt32
  package var uid: UInt32
  package var gid: UInt32
  package var mtime: Timestamp
  package var ctime: Timestamp
  /// nil: the mtime (an object has no access time of its own unless one was set).
  package var atime: Timestamp?
  package var nlink: UInt32 { isDirectory ? 2 : 1 }
  /// A symbolic link (`SymlinkObject`): its size is its target's length.
  package var isSymlink = false
  /// Attributes of a file changed through the mount and not yet in the bucket: the kernel must
  /// not keep them.
  package var volatile = false

  package init(
    ino: UInt64, size: Int64, isDirectory: Bool, mode: UInt32, uid: UInt32, gid: UInt32, mtime: Timestamp, ctime: Timestamp
  ) {
    self.ino = ino
    self.size = size
    self.isDirectory = isDirectory
    self.mode = mode
    self.uid = uid
    self.gid = gid
    self.mtime = mtime
    self.ctime = ctime
  }
}

extension FileAttributes {
  /// A link's attributes: every permission (a link's own mode means nothing on Linux) and,
  /// when the target is known from metadata, its length as the size (else the object's bytes
  /// are the target and its size is right already).
  mutating func becomeLink(target: String?) {
    isSymlink = true
    mode = 0o777
    if let target { size = Int64(target.utf8.count) }
  }
}
