// Writes of staged copies, on a thread of their own. libcurl hands the bytes of every GET to
// one transfer thread; a write to the page cache there costs as much as receiving the bytes and
// would hold up every other transfer. The writer never makes its callers wait: when too many
// writes are queued for the disk, the GETs feeding it are paused (each alone, through its
// valve) and opened again once the queue has drained to half, so the bytes waiting for the disk
// stay bounded (about `queueLimit` buffers, plus one per GET that was mid-chunk) while the
// transfer thread goes on with everything else.
import Foundation
import StorageCore
import Synchronization

final class StagingWriter: Sendable {
  static let bufferSize = 4 * BlockChecksums.blockSize
  /// Writes that may wait for the disk before the GETs are paused (4 MiB).
  static let queueLimit = 16

  /// A buffer being filled or written; the writer takes it back when done.
  final class Buffer: @unchecked Sendable {
    let bytes: UnsafeMutableRawBufferPointer
    init(_ bytes: UnsafeMutableRawBufferPointer) { self.bytes = bytes }
    deinit { bytes.deallocate() }
  }

  private struct State {
    /// Spare buffers, at most `queueLimit` kept.
    var spare: [Buffer] = []
    var queued = 0
    var paused: [DeliveryValve] = []
  }
  private let state = Mutex(State())
  private let queue = DispatchQueue(label: "bucketfs.staging.write", qos: .userInitiated)

  init() {}

  /// A buffer to fill: a spare one or a new one (never waits).
  func buffer() -> Buffer {
    state.withLock { $0.spare.popLast() } ?? Buffer(.allocate(byteCount: Self.bufferSize, alignment: 4096))
  }

  /// Returns a buffer that will not be written.
  func giveBack(_ buffer: Buffer) {
    state.withLock { s in
      if s.spare.count < Self.queueLimit { s.spare.append(buffer) }
    }
  }

  /// True when the disk is behind: the caller pauses its delivery, and `valve` is opened once
  /// the queue has drained.
  func mustPause(_ valve: DeliveryValve) -> Bool {
    state.withLock { s in
      guard s.queued >= Self.queueLimit else { return false }
      s.paused.append(valve)
      return true
    }
  }

  /// Writes queued and not yet done.
  var queued: Int { state.withLock { $0.queued } }

  /// Runs `work` in order with the writes.
  func perform(_ work: @escaping @Sendable () -> Void) {
    queue.async(execute: work)
  }

  /// Writes the first `count` bytes of `buffer` to `file` at `offset`, takes the buffer back and
  /// calls `done` with nil or the error's description.
  func write(
    _ buffer: Buffer, count: Int, to file: FileDescriptor, at offset: Int64,
    done: @escaping @Sendable (String?) -> Void
  ) {
    state.withLock { $0.queued += 1 }
    queue.async {
      let ok = PartialCopy.writeFully(file.fd, UnsafeRawBufferPointer(rebasing: buffer.bytes[..<count]), at: offset)
      let failure = ok ? nil : String(cString: strerror(errno))
      let reopen = self.state.withLock { s -> [DeliveryValve] in
        s.queued -= 1
        if s.spare.count < Self.queueLimit { s.spare.append(buffer) }
        guard s.queued <= Self.queueLimit / 2 else { return [] }
        defer { s.paused.removeAll() }
        return s.paused
      }
      done(failure)
      reopen.forEach { $0.open() }
    }
  }
}
