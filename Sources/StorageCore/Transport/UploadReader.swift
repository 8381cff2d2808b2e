// The bytes of a file upload, read ahead of libcurl on a queue of their own: the transfer
// thread never waits for a disk (a slow one, a network filesystem, another FUSE mount). When the
// next bytes are not read yet the upload pauses, alone, and is resumed when they are.
import Foundation
import Synchronization

final class UploadReader: @unchecked Sendable {
  static let chunkSize = 256 << 10
  /// Chunks read ahead (1 MiB).
  static let ahead = 4

  enum Take {
    case bytes(Int)
    case pause
    case failed(String)
  }

  private struct State {
    var chunks: [Data] = []
    /// How far into `chunks[0]` libcurl has taken.
    var consumed = 0
    var readingScheduled = false
    var error: String?
    var transferWaits = false
    var closed = false
  }
  private let state = Mutex(State())
  private let queue = DispatchQueue(label: "bucketfs.upload.read")
  private let path: String
  // Touched only on `queue`.
  private var fd: Int32 = -1
  private var position: Int64
  private var remaining: Int64
  private let transfer: HTTPTransfer

  init(path: String, offset: Int64, length: Int64, transfer: HTTPTransfer) {
    self.path = path
    position = offset
    remaining = length
    self.transfer = transfer
    state.withLock { $0.readingScheduled = true }
    queue.async { self.readAhead() }
  }

  /// Copies up to `capacity` bytes into `buffer` (on the transfer thread).
  func take(into buffer: UnsafeMutableRawPointer, capacity: Int) -> Take {
    let (result, schedule) = state.withLock { s -> (Take, Bool) in
      if let error = s.error { return (.failed(error), false) }
      guard let first = s.chunks.first else {
        s.transferWaits = true
        return (.pause, false)
      }
      let n = min(capacity, first.count - s.consumed)
      first.withUnsafeBytes { raw in buffer.copyMemory(from: raw.baseAddress! + s.consumed, byteCount: n) }
      s.consumed += n
      if s.consumed == first.count {
        s.chunks.removeFirst()
        s.consumed = 0
      }
      let schedule = !s.readingScheduled && s.chunks.count < Self.ahead
      if schedule { s.readingScheduled = true }
      return (.bytes(n), schedule)
    }
    if schedule { queue.async { self.readAhead() } }
    return result
  }

  /// Stops reading and closes the file (the transfer ended).
  func close() {
    state.withLock { $0.closed = true }
    queue.async { if self.fd >= 0 { Foundation.close(self.fd); self.fd = -1 } }
  }

  private func readAhead() {
    if fd < 0, !state.withLock({ $0.closed }) {
      fd = open(path, O_RDONLY | O_CLOEXEC)
      if fd < 0 { return fail("cannot read \(path): \(String(cString: strerror(errno)))") }
    }
    while remaining > 0 {
      let full = state.withLock { $0.closed || $0.chunks.count >= Self.ahead }
      if full { break }
      var chunk = Data(count: Int(min(Int64(Self.chunkSize), remaining)))
      let n = chunk.withUnsafeMutableBytes { raw in Foundation.pread(fd, raw.baseAddress!, raw.count, off_t(position)) }
      if n < 0 && errno == EINTR { continue }
      if n <= 0 { return fail(n == 0 ? "\(path) ended before the upload did" : "reading \(path) failed: \(String(cString: strerror(errno)))") }
      chunk.count = n
      position += Int64(n)
      remaining -= Int64(n)
      let wake = state.withLock { s -> Bool in
        s.chunks.append(chunk)
        defer { s.transferWaits = false }
        return s.transferWaits
      }
      if wake { transfer.resumeReceiving() }
    }
    // Scheduled again by `take` once libcurl has made room.
    state.withLock { $0.readingScheduled = false }
    // A take that found the queue full before the flag was cleared did not schedule: look again.
    let more = state.withLock { s -> Bool in
      guard !s.readingScheduled, !s.closed, s.chunks.count < Self.ahead, remaining > 0 else { return false }
      s.readingScheduled = true
      return true
    }
    if more { queue.async { self.readAhead() } }
  }

  private func fail(_ message: String) {
    let wake = state.withLock { s -> Bool in
      s.error = message
      s.readingScheduled = false
      return s.transferWaits
    }
    if wake { transfer.resumeReceiving() }
  }
}
