// Where new edit files are made: a folder of their own inside the queue's folder, a new one
// every `filesPerFolder` files. On ext4 without a journal (as on many VMs) a new inode is never
// one freed in the last minute or more: finding one scans past every such inode of the folder's
// block group, and the queue frees one for every file it carries out. An untar into the mount
// then spent a third of the daemon's time in that scan (`recently_deleted`). The queue's folder
// is marked as a top of a hierarchy (FS_TOPDIR_FL), so that ext4 spreads its folders over block
// groups, and each new folder starts in a group with inodes nobody freed lately. Elsewhere the
// flag is refused or means nothing, and the folders cost a mkdir each.
import Foundation
import Synchronization

final class EditFolders: Sendable {
  let parent: URL
  private struct Current {
    var path: String
    var made = 0
    var files = 0
    /// Earlier folders, removed once their last edit file is gone.
    var earlier: [String] = []
  }
  private let current: Mutex<Current>
  private let disk: any QueueDisk
  static let filesPerFolder = 1024

  init(in parent: URL, disk: any QueueDisk) {
    self.parent = parent
    self.disk = disk
    Self.spreadFolders(under: parent.path)
    // Edits of a mount that ended: their bytes were queued at each close, or never closed.
    let fm = FileManager.default
    for name in (try? fm.contentsOfDirectory(atPath: parent.path)) ?? [] where name.hasPrefix("edit-") || name.hasPrefix("edits-") {
      let path = parent.appendingPathComponent(name).path
      guard name.hasPrefix("edits-") else {
        _ = disk.unlink(path)
        continue
      }
      for file in (try? fm.contentsOfDirectory(atPath: path)) ?? [] { _ = disk.unlink(path + "/" + file) }
      // Anything else in it (not made by a mount) goes as before.
      if disk.removeFolder(path) != 0 { try? fm.removeItem(atPath: path) }
    }
    current = Mutex(Current(path: Self.make(in: parent.path, number: 0, disk: disk)))
  }

  /// The folder for the next edit file.
  func next() -> String {
    current.withLock { c in
      c.files += 1
      guard c.files > Self.filesPerFolder else { return c.path }
      c.made += 1
      if c.path != parent.path { c.earlier.append(c.path) }
      c.path = Self.make(in: parent.path, number: c.made, disk: disk)
      c.files = 1
      // A folder whose files are all gone (carried out, or closed unchanged) goes.
      c.earlier.removeAll { disk.removeFolder($0) == 0 || errno == ENOENT }
      return c.path
    }
  }

  /// A new folder for edit files (named by this process and a count, so that its name, which
  /// ext4 hashes to pick a block group, differs from the last); the parent where it cannot be made.
  private static func make(in parent: String, number: Int, disk: any QueueDisk) -> String {
    let path = parent + "/edits-\(getpid())-\(number)"
    return disk.makeFolder(path, 0o700) == 0 || errno == EEXIST ? path : parent
  }

  /// FS_IOC_GETFLAGS / FS_IOC_SETFLAGS with FS_TOPDIR_FL.
  private static func spreadFolders(under path: String) {
    let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    guard fd >= 0 else { return }
    defer { close(fd) }
    var flags: Int32 = 0
    guard ioctl(fd, 0x8008_6601, &flags) == 0, flags & 0x0002_0000 == 0 else { return }
    flags |= 0x0002_0000
    _ = ioctl(fd, 0x4008_6602, &flags)
  }
}
