// Writes of staged copies, on a thread of their own. libcurl hands the bytes of every GET to
// one transfer thread; a write to the page cache there costs as much as receiving the bytes and
// would hold up every other transfer. The bytes on their way to the disk live in a fixed pool of
// buffers, and the writer never makes anyone wait for one: a GET that finds none free writes what
// it holds, pauses (alone, through its valve) and is handed the next buffer that comes back, in
// turn. A paused GET therefore holds no buffer, and every buffer held belongs to a GET that is
// receiving or to a write under way, so buffers always come back.
import Foundation
import StorageCore
import Synchronization

final class StagingWriter: Sendable {
  static let bufferSize = 4 * BlockChecksums.blockSize
  /// Buffers in all (4 MiB).
  static let poolSize = 16

  /// A pool buffer.
  final class Buffer: @unchecked Sendable {
    let bytes: UnsafeMutableRawBufferPointer
    init(_ bytes: UnsafeMutableRawBufferPointer) { self.bytes = bytes }
    deinit { bytes.deallocate() }
  }

  /// One GET's place in the queue for buffers: the valve to open and the buffer handed to it.
  final class Claim: @unchecked Sendable {
    let valve: DeliveryValve
    /// Guarded by the writer's lock.
    fileprivate var granted: Buffer?
    init(valve: DeliveryValve) { self.valve = valve }
  }

  private struct State {
    var spare: [Buffer] = []
    var allocated = 0
    /// GETs paused for a buffer, first come first served.
    var waiting: [Claim] = []
  }
  private let state = Mutex(State())
  private let queue = DispatchQueue(label: "bucketfs.staging.write", qos: .userInitiated)

  init() {}

  /// A buffer for `claim`: the one handed to it, a spare one, or a new one while the pool has
  /// room; nil when none is free (then `claim` is queued, and its valve opened once a buffer is
  /// handed to it). Never waits.
  func buffer(for claim: Claim) -> Buffer? {
    let (buffer, allocate) = state.withLock { s -> (Buffer?, Bool) in
      if let granted = claim.granted {
        claim.granted = nil
        return (granted, false)
      }
      if let spare = s.spare.popLast() { return (spare, false) }
      if s.allocated < Self.poolSize {
        s.allocated += 1
        return (nil, true)
      }
      if !s.waiting.contains(where: { $0 === claim }) { s.waiting.append(claim) }
      return (nil, false)
    }
    if allocate { return Buffer(.allocate(byteCount: Self.bufferSize, alignment: 4096)) }
    return buffer
  }

  /// Takes a buffer back: to the first GET waiting for one, or to the spares.
  func giveBack(_ buffer: Buffer) {
    let next = state.withLock { s -> Claim? in
      guard !s.waiting.isEmpty else {
        s.spare.append(buffer)
        return nil
      }
      let claim = s.waiting.removeFirst()
      claim.granted = buffer
      return claim
    }
    next?.valve.open()
  }

  /// The GET of `claim` ended: it leaves the queue, and a buffer handed to it goes on.
  func release(_ claim: Claim) {
    let granted = state.withLock { s -> Buffer? in
      s.waiting.removeAll { $0 === claim }
      defer { claim.granted = nil }
      return claim.granted
    }
    if let granted { giveBack(granted) }
  }

  /// Buffers that are neither held nor being written (spare, or never allocated).
  var free: Int { state.withLock { $0.spare.count + Self.poolSize - $0.allocated } }

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
    queue.async {
      let ok = PartialCopy.writeFully(file.fd, UnsafeRawBufferPointer(rebasing: buffer.bytes[..<count]), at: offset)
      let failure = ok ? nil : String(cString: strerror(errno))
      done(failure)
      self.giveBack(buffer)
    }
  }
}
