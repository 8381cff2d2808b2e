// One daemon per write-back queue. Two would append to one journal and each would take the
// other's edit files for those of a mount that ended (and remove them): both lose what they
// acknowledged. The lock is the kernel's (flock on a file in the queue's folder), so a daemon
// that was killed leaves none behind, and the next mount takes its queue over at once. A second
// mount of the same folder of the bucket with the same staging folder (two writers on one
// machine) queues in a folder of its own beside the first's (`queue.2`, …).
import Foundation

/// The queue is another running mount's (and so are the ones beside it).
package struct QueueInUse: Error, CustomStringConvertible {
  package let folder: String
  /// The daemon that holds it, as it wrote itself down (nil when unreadable).
  package let pid: Int32?

  package var description: String {
    "the write-back queues in \(folder) are in use by other writable mounts of this bucket folder"
      + (pid.map { " (bucketfs pid \($0) and more)" } ?? "") + ": unmount one first, or give this mount its own -o staging_dir"
  }
}

final class QueueLock: Sendable {
  private let fd: Int32
  private let disk: any QueueDisk

  /// Takes the lock of the queue in `folder` (made if missing) for as long as this lives.
  init(folder: URL, disk: any QueueDisk) throws {
    try PrivateFolder.make(folder)
    let path = folder.appendingPathComponent("lock").path
    let fd = disk.open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
    guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    guard disk.lock(fd) == 0 else {
      let failure = errno
      var buffer = [UInt8](repeating: 0, count: 32)
      let n = pread(fd, &buffer, buffer.count, 0)
      disk.close(fd)
      guard failure == EWOULDBLOCK else { throw POSIXError(POSIXErrorCode(rawValue: failure) ?? .EIO) }
      let pid = n > 0 ? Int32(String(decoding: buffer[..<n], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) : nil
      throw QueueInUse(folder: folder.path, pid: pid)
    }
    // Who holds it, for the next mount's message; the lock itself does not depend on it.
    let me = Array("\(getpid())\n".utf8)
    _ = disk.truncate(fd, to: 0)
    _ = me.withUnsafeBytes { disk.pwrite(fd, $0, at: 0) }
    self.fd = fd
    self.disk = disk
  }

  deinit { disk.close(fd) }

  /// How many mounts of one folder of the bucket may write back side by side through one
  /// staging folder.
  static let queuesBeside = 8

  /// The queue folder a mount takes, locked: the first of `base`, `base.2`, … that no running
  /// mount holds, one that holds changes a mount left before one that holds none (so that a
  /// mount alone carries out what a second mount queued and did not send).
  /// Whether the queue in `folder` holds changes (records in its log).
  static func holdsChanges(_ folder: URL) -> Bool {
    guard let data = FileManager.default.contents(atPath: folder.appendingPathComponent("changes.log").path) else { return false }
    return !ChangeLog.parse(data).records.isEmpty
  }

  static func take(_ base: URL, disk: any QueueDisk, log: @Sendable (String) -> Void) throws -> (folder: URL, lock: QueueLock) {
    let folders = [base] + (2...queuesBeside).map { URL(fileURLWithPath: base.path + ".\($0)", isDirectory: true) }
    // With no queue beside the first (a mount alone, as almost always), there is nothing to
    // prefer: its log is read once, by the queue that loads it.
    let besides = folders.dropFirst().contains { access($0.path, F_OK) == 0 }
    var firstRefusal: QueueInUse? = nil
    for leftFirst in besides ? [true, false] : [false] {
      for folder in folders where !leftFirst || holdsChanges(folder) {
        // A folder not there yet is made, and no running mount holds it.
        do {
          let lock = try QueueLock(folder: folder, disk: disk)
          if folder != base { log("write-back: another mount of this folder writes back through \(base.path); this one queues in \(folder.path)") }
          return (folder, lock)
        } catch let refusal as QueueInUse {
          firstRefusal = firstRefusal ?? refusal
        }
      }
    }
    throw firstRefusal ?? QueueInUse(folder: base.path, pid: nil)
  }
}
