// Group commit of the write-back queue, as a local file system's journal commits: a close puts
// its change's files in place through the page cache (which `kill -9` cannot undo) and notes
// them here; one commit every `-o commit=SECONDS` fsyncs all of them and the folder at once,
// instead of four fsyncs per close. `fsync(2)` and `bucketfs sync` ask for a commit now and wait
// for it. The records of replaced uploads are unlinked only once the ones that replaced them
// lasted: an fsynced version is never lost to a newer one that had not.
import Foundation
import Synchronization

final class GroupCommit: Sendable {
  private struct Pending {
    /// Files written and renamed in place, not fsynced yet.
    var files: [String] = []
    /// Files to remove once the files before them last.
    var unlinks: [String] = []
    /// What to do once they last (before the unlinks): a replaced change's removal appended.
    var after: [@Sendable () -> Void] = []
    /// How many notes were taken; a commit covers those taken before it began.
    var noted: UInt64 = 0
  }

  private let pending = Mutex(Pending())
  /// Held across a commit's fsyncs (one commit at a time, so that a commit asked for never returns
  /// before the one already running has made its files last): the last note a finished commit
  /// covered. Only commits wait on it (docs/design.md, "Locks").
  private let committing = Mutex<UInt64>(0)
  private let disk: any QueueDisk
  private let folder: String

  init(folder: String, disk: any QueueDisk) {
    self.folder = folder
    self.disk = disk
  }

  /// Files now in place (a record, an upload's bytes) and files to remove after them.
  func note(files: [String], unlinks: [String] = [], after: (@Sendable () -> Void)? = nil) {
    pending.withLock { p in
      p.files += files
      p.unlinks += unlinks
      if let after { p.after.append(after) }
      p.noted += 1
    }
  }

  /// Makes everything noted before the call last across a power loss: each file fsynced, then the
  /// folder; then the removals held back, and the folder again. An fsync that fails is EIO, and
  /// the files stay noted for the next commit.
  func commit() throws(FSError) {
    try committing.withLock { (done: inout UInt64) throws(FSError) in
      let (files, unlinks, after, through) = pending.withLock { p in
        defer {
          p.files.removeAll()
          p.unlinks.removeAll()
          p.after.removeAll()
        }
        return (p.files, p.unlinks, p.after, p.noted)
      }
      guard through > done else { return }
      do throws(FSError) {
        for path in Set(files) {
          let fd = disk.open(path, O_RDONLY | O_CLOEXEC, 0)
          // Gone meanwhile (carried out and removed, replaced): nothing of it to keep.
          if fd < 0 {
            if errno == ENOENT { continue }
            throw FSError(errno)
          }
          defer { disk.close(fd) }
          guard disk.fsync(fd) == 0 else { throw FSError(errno) }
        }
        try disk.syncFolder(folder)
      } catch {
        pending.withLock { p in
          p.files += files
          p.unlinks += unlinks
          p.after += after
        }
        throw FSError(EIO)
      }
      for action in after { action() }
      for path in unlinks { _ = disk.unlink(path) }
      if !unlinks.isEmpty { try? disk.syncFolder(folder) }
      done = through
    }
  }
}
