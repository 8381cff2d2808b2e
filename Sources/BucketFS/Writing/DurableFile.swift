// Writing files that must survive `kill -9` and a power loss: the queue's records and bytes, and
// the notes kept beside damaged ones. A file is written under a name of its own, fsynced, and
// renamed; the folder is fsynced so that the rename lasts too. Every operation goes through
// `QueueDisk`, which a test records and replays.
import Foundation

struct DurableFile: Sendable {
  let disk: any QueueDisk

  init(disk: any QueueDisk = SystemDisk()) { self.disk = disk }

  /// How a file put in place lasts.
  enum Placed: Equatable {
    /// Across a power loss.
    case durable
    /// It is in place, but the fsync of its folder failed (errno): it lasts across `kill -9`,
    /// and a power loss may undo it.
    case folderNotSynced(Int32)
  }

  /// `data` in a new file at `path`, fsynced (unless not `sync`: a group commit will).
  func write(_ data: Data, to path: String, sync: Bool = true) throws(FSError) {
    let fd = try create(path)
    defer { disk.close(fd) }
    let written = data.withUnsafeBytes { disk.write(fd, $0) }
    guard written == data.count else { throw FSError(written < 0 ? errno : ENOSPC) }
    guard !sync || disk.fsync(fd) == 0 else { throw FSError(errno) }
  }

  /// `data` at `path` in place of what was there: under a temporary name of this writer's own
  /// (two threads may write one path at once), fsynced, renamed, and the folder fsynced. Throws
  /// when the file is not in place; says when it is but its folder could not be synced. Not
  /// `sync`: in place through the page cache only, for a group commit to make last.
  func replace(_ path: String, with data: Data, sync: Bool = true) throws(FSError) -> Placed {
    let temporary = path + "." + String(UInt64.random(in: 0...UInt64.max), radix: 36) + ".tmp"
    do throws(FSError) {
      try write(data, to: temporary, sync: sync)
    } catch {
      _ = disk.unlink(temporary)
      throw error
    }
    guard disk.rename(temporary, path) == 0 else {
      let e = errno
      _ = disk.unlink(temporary)
      throw FSError(e)
    }
    return sync ? syncFolder(of: path) : .durable
  }

  /// What `fd` holds, copied into a new file at `path` and fsynced (unless not `sync`); returns
  /// its size.
  @discardableResult
  func copy(from fd: Int32, to path: String, sync: Bool = true) throws(FSError) -> Int64 {
    let out = try create(path)
    defer { disk.close(out) }
    let size: Int64
    do throws(FSError) {
      size = try disk.copyAll(from: fd, to: out)
    } catch {
      _ = disk.unlink(path)
      throw error
    }
    guard !sync || disk.fsync(out) == 0 else {
      let e = errno
      _ = disk.unlink(path)
      throw FSError(e)
    }
    return size
  }

  /// A new file at `path`, open for writing; one left there (by a crash) is replaced.
  private func create(_ path: String) throws(FSError) -> Int32 {
    let flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC
    var fd = disk.open(path, flags, 0o600)
    if fd < 0 && errno == EEXIST {
      _ = disk.unlink(path)
      fd = disk.open(path, flags, 0o600)
    }
    guard fd >= 0 else { throw FSError(errno) }
    return fd
  }

  /// Makes the names in `path`'s folder (a rename into it, an unlink) last.
  func syncFolder(of path: String) -> Placed {
    do throws(FSError) {
      try disk.syncFolder(URL(fileURLWithPath: path).deletingLastPathComponent().path)
      return .durable
    } catch {
      return .folderNotSynced(error.errno)
    }
  }
}
