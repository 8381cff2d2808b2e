// Group commit of the write-back queue, as a local file system's journal commits: a close puts
// its change's files in place through the page cache (which `kill -9` cannot undo) and notes
// them here; one commit every `-o commit=SECONDS` fsyncs all of them and the folder at once,
// instead of four fsyncs per close. `fsync(2)` and `bucketfs sync` ask for a commit now and wait
// for it.
//
// The order within a commit is the queue's promise that a record never lasts without the bytes
// it vouches for: the bytes first (every noted file but the journal), then the folder (their
// names), then the journal. Anything else that makes the journal last (a record written at
// once, a compaction) goes through here too (`commit`, `flushBytes`), never around it. Files are
// removed only after the journal that says they may go has lasted.
import Foundation
import Synchronization

final class GroupCommit: Sendable {
  private struct Pending {
    /// Files written and renamed in place, not fsynced yet.
    var files: [String] = []
    /// Files to remove once the files before them last.
    var unlinks: [String] = []
    /// What to do once the unlinks are made: a replaced change's removal appended (its record
    /// already says it was replaced, so the removal only tidies the journal).
    var after: [@Sendable () -> Void] = []
    /// How many notes were taken; a commit covers those taken before it began.
    var noted: UInt64 = 0
    /// The last note of each name's records.
    var lastNote: [[UInt8]: UInt64] = [:]
  }

  private let pending = Mutex(Pending())
  /// Held across a commit's fsyncs (one commit at a time, so that a commit asked for never returns
  /// before the one already running has made its files last): the last note a finished commit
  /// covered. Only commits wait on it (docs/design.md, "Locks").
  private let committing = Mutex<UInt64>(0)
  private let disk: any QueueDisk
  private let folder: String
  /// The journal: fsynced after every other file, so that its records never last before their bytes.
  private let journal: String

  init(folder: String, journal: String, disk: any QueueDisk) {
    self.folder = folder
    self.journal = journal
    self.disk = disk
  }

  /// Files now in place (a record, an upload's bytes) and files to remove after them; the
  /// note's number, which a commit that covers it makes last (`commit(covering:)`).
  /// `names`: the records written, by name (`commit(coveringNamesOf:)`).
  @discardableResult
  func note(files: [String], unlinks: [String] = [], after: (@Sendable () -> Void)? = nil, names: [String] = []) -> UInt64 {
    pending.withLock { p in
      p.files += files
      p.unlinks += unlinks
      if let after { p.after.append(after) }
      p.noted += 1
      for name in names { p.lastNote[Array(name.utf8)] = p.noted }
      // Names written long ago need no entry; the map stays as small as what was written
      // since the last commits (emptied, a name without an entry gets a full commit).
      if p.lastNote.count > 10_000 { p.lastNote.removeAll() }
      return p.noted
    }
  }

  /// Makes the records of `names` last, and all noted before them: a commit that ran since they
  /// were written is enough (the workers carrying changes out share one), and a name with no
  /// entry gets a commit of all that is noted.
  func commit(coveringNamesOf names: [String]) throws(FSError) {
    let needed = pending.withLock { p -> UInt64? in
      var most: UInt64 = 0
      for name in names {
        guard let n = p.lastNote[Array(name.utf8)] else { return nil }
        most = max(most, n)
      }
      return most
    }
    try commit(covering: needed)
  }

  /// Makes every noted file but the journal last, and the folder: what the journal may then be
  /// made to last vouching for (a compaction rewrites it durably). The files stay noted.
  func flushBytes() throws(FSError) {
    let files = pending.withLock { $0.files }
    try syncBytes(of: files)
  }

  private func syncBytes(of files: [String]) throws(FSError) {
    for path in Set(files) where path != journal { try sync(path) }
    try disk.syncFolder(folder)
  }

  /// fsync of `path`. An upload's bytes are noted under their temporary name before their
  /// record is written, then renamed: a name gone meanwhile is looked for under the other.
  private func sync(_ path: String) throws(FSError) {
    var fd = disk.open(path, O_RDONLY | O_CLOEXEC, 0)
    if fd < 0 && errno == ENOENT && path.hasSuffix(".tmp") { fd = disk.open(String(path.dropLast(4)), O_RDONLY | O_CLOEXEC, 0) }
    // Gone meanwhile (carried out and removed, replaced): nothing of it to keep.
    if fd < 0 {
      if errno == ENOENT { return }
      throw FSError(errno)
    }
    defer { disk.close(fd) }
    guard disk.fsync(fd) == 0 else { throw FSError(errno) }
  }

  /// Makes everything noted before the call last across a power loss: the bytes, the folder, then
  /// the journal; then the removals held back, and the folder again. An fsync that fails is EIO,
  /// and the files stay noted for the next commit.
  ///
  /// `covering`: only what note that number was needs to last: a commit that ran (or is
  /// running) since it was taken is enough, so that workers waiting on one commit do not each
  /// run another for what came in meanwhile.
  func commit(covering needed: UInt64? = nil) throws(FSError) {
    try committing.withLock { (done: inout UInt64) throws(FSError) in
      if let needed, done >= needed { return }
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
        try syncBytes(of: files)
        try sync(journal)
      } catch {
        pending.withLock { p in
          p.files += files
          p.unlinks += unlinks
          p.after += after
        }
        throw FSError(EIO)
      }
      for path in unlinks { _ = disk.unlink(path) }
      for action in after { action() }
      if !unlinks.isEmpty { try? disk.syncFolder(folder) }
      done = through
    }
  }
}
