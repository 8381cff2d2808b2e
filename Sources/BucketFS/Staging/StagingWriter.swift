// Writes of staged copies, on a thread of their own. libcurl hands the bytes of every GET to
// one transfer thread; a write to the page cache there costs as much as receiving the bytes and
// would hold up every other transfer. Buffers come from a fixed pool, so the bytes waiting to be
// written are bounded (4 MiB); when all of them wait, the transfer thread waits for one.
import Foundation
import Synchronization

final class StagingWriter: Sendable {
  static let bufferSize = 4 * BlockChecksums.blockSize
  static let poolSize = 16

  /// A pool buffer; the pool takes it back when the writer (or whoever gave up on it) is done.
  final class Buffer: @unchecked Sendable {
    let bytes: UnsafeMutableRawBufferPointer
    init(_ bytes: UnsafeMutableRawBufferPointer) { self.bytes = bytes }
  }

  private let free: Mutex<[Buffer]>
  private let available = DispatchSemaphore(value: poolSize)
  private let queue = DispatchQueue(label: "bucketfs.staging.write", qos: .userInitiated)

  init() {
    free = Mutex((0..<Self.poolSize).map { _ in Buffer(.allocate(byteCount: Self.bufferSize, alignment: 4096)) })
  }

  deinit {
    free.withLock { $0.forEach { $0.bytes.deallocate() } }
  }

  /// A buffer to fill; waits while every buffer is waiting to be written.
  func buffer() -> Buffer {
    available.wait()
    return free.withLock { $0.removeLast() }
  }

  /// Returns a buffer that will not be written.
  func giveBack(_ buffer: Buffer) {
    free.withLock { $0.append(buffer) }
    available.signal()
  }

  /// Runs `work` in order with the writes.
  func perform(_ work: @escaping @Sendable () -> Void) {
    queue.async(execute: work)
  }

  /// Writes the first `count` bytes of `buffer` to `file` at `offset`, gives the buffer back and
  /// calls `done` with nil or the error's description.
  func write(
    _ buffer: Buffer, count: Int, to file: FileDescriptor, at offset: Int64,
    done: @escaping @Sendable (String?) -> Void
  ) {
    queue.async {
      let ok = PartialCopy.writeFully(file.fd, UnsafeRawBufferPointer(rebasing: buffer.bytes[..<count]), at: offset)
      let failure = ok ? nil : String(cString: strerror(errno))
      self.giveBack(buffer)
      done(failure)
    }
  }
}
