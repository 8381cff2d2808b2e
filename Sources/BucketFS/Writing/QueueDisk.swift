// The file operations the write-back queue's durability rests on, in one small layer: the
// journal, `DurableFile`, the edits' files and folders (`LocalEdits`, `EditFolders`), the
// overlay fill's writes into queued bytes (`BaseFill`), the queue's lock (`QueueLock`) and the
// damaged folder (`DamagedRecords`) make every create, write, fsync, rename and unlink of the
// queue's folder through it, so that a test can record them and replay every state a power loss
// could leave (`CrashStateTests`; a mount records them with `RecordedQueueDisk`), instead of
// trusting the order by reading the code. A program's own writes into an edit's file (and the
// kernel's, by passthrough) do not come here: what they made is taken by a recording at the
// link, rename or fsync that hands it on.
import Foundation

protocol QueueDisk: Sendable {
  /// `open(2)`: a descriptor, or -1 with `errno` set.
  func open(_ path: String, _ flags: Int32, _ mode: mode_t) -> Int32
  /// `write(2)` of all of `bytes` at the descriptor's offset: how many were written, or -1.
  func write(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Int
  /// `pwrite(2)` of `bytes` at `offset`: what it returned (-1 with `errno` set).
  func pwrite(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, at offset: Int64) -> Int
  /// `ftruncate(2)`: 0, or -1 with `errno` set.
  func truncate(_ fd: Int32, to size: Int64) -> Int32
  /// Everything `input` holds into `output` from its start; how many bytes that was.
  func copyAll(from input: Int32, to output: Int32) throws(FSError) -> Int64
  /// `fsync(2)`: 0, or -1 with `errno` set.
  func fsync(_ fd: Int32) -> Int32
  func close(_ fd: Int32)
  func rename(_ from: String, _ to: String) -> Int32
  /// `link(2)`: `to` names the file `from` names.
  func link(_ from: String, _ to: String) -> Int32
  func unlink(_ path: String) -> Int32
  /// `mkdir(2)`: 0, or -1 with `errno` set (EEXIST when it is there).
  func makeFolder(_ path: String, _ mode: mode_t) -> Int32
  /// `rmdir(2)`: 0, or -1 with `errno` set.
  func removeFolder(_ path: String) -> Int32
  /// `flock(LOCK_EX | LOCK_NB)`: 0, or -1 with `errno` set (EWOULDBLOCK: another holds it).
  func lock(_ fd: Int32) -> Int32
  /// Makes the names in folder `dir` (creates, renames and unlinks in it) last: fsync of the
  /// folder. Its error is the caller's to report.
  func syncFolder(_ dir: String) throws(FSError)
}

/// The machine's own file system.
struct SystemDisk: QueueDisk {
  /// FICLONE (`_IOW(0x94, 9, int)`): `output` becomes a reflink of all of `input`.
  private static let ficlone: UInt = 0x4004_9409

  /// Whether `output` now shares `input`'s extents (its size is `input`'s).
  static func clone(from input: Int32, to output: Int32) -> Bool {
    ioctl(output, ficlone, input) == 0
  }

  func open(_ path: String, _ flags: Int32, _ mode: mode_t) -> Int32 { Glibc.open(path, flags, mode) }

  func write(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Int {
    var done = 0
    while done < bytes.count {
      let n = Glibc.write(fd, bytes.baseAddress! + done, bytes.count - done)
      if n < 0 && errno == EINTR { continue }
      guard n > 0 else { return n < 0 ? -1 : done }
      done += n
    }
    return done
  }

  func copyAll(from input: Int32, to output: Int32) throws(FSError) -> Int64 {
    var st = stat()
    guard fstat(input, &st) == 0 else { throw FSError(errno) }
    // A new file is empty already: truncating it anyway makes ext4 write it out at its close
    // (auto_da_alloc's "replace by truncate" rule), a synchronous write per queued file.
    var out = stat()
    guard fstat(output, &out) == 0 else { throw FSError(errno) }
    // Where the file system shares extents (btrfs, xfs, bcachefs), a clone is the copy: no
    // byte is read or written, so opening a large staged file for writing returns at once and
    // takes room only for what is then written. Elsewhere (ext4, tmpfs, another file system)
    // the ioctl fails and the bytes are copied.
    if st.st_size > 0, Self.clone(from: input, to: output) { return Int64(st.st_size) }
    if out.st_size != 0 {
      guard ftruncate(output, 0) == 0 else { throw FSError(errno) }
    }
    guard lseek(output, 0, SEEK_SET) == 0 else { throw FSError(errno) }
    var offset = off_t(0)
    var left = Int64(st.st_size)
    while left > 0 {
      let n = sendfile(output, input, &offset, Int(min(left, 1 << 30)))
      if n < 0 && errno == EINTR { continue }
      guard n > 0 else { throw FSError(n < 0 ? errno : EIO) }
      left -= Int64(n)
    }
    return Int64(st.st_size)
  }

  func pwrite(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, at offset: Int64) -> Int {
    Glibc.pwrite(fd, bytes.baseAddress, bytes.count, off_t(offset))
  }

  func truncate(_ fd: Int32, to size: Int64) -> Int32 { Glibc.ftruncate(fd, off_t(size)) }
  func makeFolder(_ path: String, _ mode: mode_t) -> Int32 { Glibc.mkdir(path, mode) }
  func removeFolder(_ path: String) -> Int32 { Glibc.rmdir(path) }
  func lock(_ fd: Int32) -> Int32 { flock(fd, LOCK_EX | LOCK_NB) }
  func fsync(_ fd: Int32) -> Int32 { Glibc.fsync(fd) }
  func close(_ fd: Int32) { _ = Glibc.close(fd) }
  func rename(_ from: String, _ to: String) -> Int32 { Glibc.rename(from, to) }
  func unlink(_ path: String) -> Int32 { Glibc.unlink(path) }
  func link(_ from: String, _ to: String) -> Int32 { Glibc.link(from, to) }

  func syncFolder(_ dir: String) throws(FSError) {
    let fd = Glibc.open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    guard fd >= 0 else { throw FSError(errno) }
    defer { _ = Glibc.close(fd) }
    guard Glibc.fsync(fd) == 0 else { throw FSError(errno) }
  }
}
