import StorageCore

/// One name in a folder listing.
public struct DirectoryEntry: Sendable {
  public var name: String
  public var isDirectory: Bool
  /// For files: the object, relative to the mount prefix.
  public var objectName: String?
  public var metadata: StorageMetadata?
}

/// Attributes as the bridge turns them into `struct stat`.
public struct FileAttributes: Sendable, Equatable {
  public var ino: UInt64
  public var size: Int64
  public var isDirectory: Bool
  public var mode: UInt32
  public var uid: UInt32
  public var gid: UInt32
  public var mtime: Double
  public var ctime: Double
  public var nlink: UInt32 { isDirectory ? 2 : 1 }
  /// Attributes of a file changed through the mount and not yet in the bucket: the kernel must
  /// not keep them.
  public var volatile = false

  public init(
    ino: UInt64, size: Int64, isDirectory: Bool, mode: UInt32, uid: UInt32, gid: UInt32, mtime: Double, ctime: Double
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
