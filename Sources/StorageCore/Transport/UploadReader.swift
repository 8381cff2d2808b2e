// The bytes of a file upload for libcurl, without the transfer thread ever waiting for a disk
// (a slow one, a network file system, another FUSE mount). Bytes the page cache holds are read
// straight into libcurl's buffer (preadv2 with RWF_NOWAIT); for the rest the upload pauses, alone,
// while a queue of its own reads them into the cache, and goes on when they are there. The file
// is opened on that queue too. Where the kernel cannot say whether a read would wait, the queue
// reads ahead into memory (1 MiB) and libcurl takes from there.
internal import CCurl
import Foundation
import Synchronization

final class UploadReader: @unchecked Sendable {
  /// Read into the cache (or into memory) at a time.
  static let warmSize = 4 << 20
  static let chunkSize = 256 << 10
  /// Chunks held in memory when the page cache cannot be asked.
  static let ahead = 4

  enum Take {
    case bytes(Int)
    case pause
    case failed(String)
  }

  private struct State {
    var fd: Int32 = -1
    var error: String?
    var transferWaits = false
    var closed = false
    /// The file offset up to which the queue has read (warmed the cache, or filled `chunks`).
    var readThrough: Int64
    var queueBusy = false
    /// False once the kernel said it cannot read without waiting: the queue fills `chunks`.
    var direct = true
    var chunks: [Data] = []
    var consumed = 0
  }
  private let state: Mutex<State>
  private let queue = DispatchQueue(label: "bucketfs.upload.read")
  private let path: String
  private let start: Int64
  private let end: Int64
  private let transfer: HTTPTransfer

  init(path: String, offset: Int64, length: Int64, transfer: HTTPTransfer) {
    self.path = path
    start = offset
    end = offset + length
    self.transfer = transfer
    state = Mutex(State(readThrough: offset, queueBusy: true))
    queue.async { self.open() }
  }

  /// Copies up to `capacity` bytes, those at `sent` bytes into the body, into `buffer` (on the
  /// transfer thread).
  func take(into buffer: UnsafeMutableRawPointer, capacity: Int, sent: Int64) -> Take {
    let position = start + sent
    let count = Int(min(Int64(capacity), end - position))
    if count <= 0 { return .bytes(0) }
    var schedule = false
    var prefetch = false
    defer {
      if schedule { queue.async { self.readAhead() } }
      if prefetch { queue.async { self.adviseAhead() } }
    }
    return state.withLock { s -> Take in
      if let error = s.error { return .failed(error) }
      guard s.fd >= 0 else {
        s.transferWaits = true
        return .pause
      }
      if s.direct {
        let n = CCurlShims_pread_nowait(s.fd, buffer, count, off_t(position))
        if n > 0 {
          // Ask the kernel to bring the next bytes in (no copy), so that the upload rarely
          // has to pause.
          if !s.queueBusy && s.readThrough < min(end, position + Int64(Self.warmSize) / 2) {
            s.queueBusy = true
            s.readThrough = max(s.readThrough, position)
            prefetch = true
          }
          return .bytes(n)
        }
        if n == 0 { return .failed("\(path) ended before the upload did") }
        let error = errno
        if error != EAGAIN && error != EWOULDBLOCK {
          guard error == EOPNOTSUPP || error == EINVAL || error == ENOSYS else {
            return .failed("reading \(path) failed: \(String(cString: strerror(error)))")
          }
          // The kernel cannot read without waiting: the queue reads into memory instead.
          s.direct = false
        }
        // The queue reads from here (whatever it was doing, it looks at this when done).
        s.readThrough = position
        s.transferWaits = true
        if !s.queueBusy {
          s.queueBusy = true
          schedule = true
        }
        return .pause
      }
      guard let first = s.chunks.first else {
        s.transferWaits = true
        if !s.queueBusy {
          s.queueBusy = true
          schedule = true
        }
        return .pause
      }
      let n = min(count, first.count - s.consumed)
      first.withUnsafeBytes { raw in buffer.copyMemory(from: raw.baseAddress! + s.consumed, byteCount: n) }
      s.consumed += n
      if s.consumed == first.count {
        s.chunks.removeFirst()
        s.consumed = 0
      }
      if !s.queueBusy && s.chunks.count < Self.ahead && s.readThrough < end {
        s.queueBusy = true
        schedule = true
      }
      return .bytes(n)
    }
  }

  /// The transfer ended: reading stops and the file is closed.
  func close() {
    state.withLock { $0.closed = true }
    queue.async {
      let fd = self.state.withLock { s -> Int32 in
        defer { s.fd = -1 }
        return s.fd
      }
      if fd >= 0 { Foundation.close(fd) }
    }
  }

  private func open() {
    guard !state.withLock({ $0.closed }) else { return }
    let fd = Foundation.open(path, O_RDONLY | O_CLOEXEC)
    if fd < 0 { return fail("cannot read \(path): \(String(cString: strerror(errno)))") }
    let wake = state.withLock { s -> Bool in
      s.fd = fd
      s.queueBusy = false
      defer { s.transferWaits = false }
      return s.transferWaits
    }
    if wake { transfer.resumeReceiving() }
  }

  /// On the queue: asks the kernel to read the next bytes into the page cache (no copy); a
  /// transfer that paused meanwhile gets a real read.
  private func adviseAhead() {
    let (fd, from) = state.withLock { ($0.fd, $0.readThrough) }
    let count = min(Int64(Self.warmSize), end - from)
    if fd >= 0 && count > 0 { _ = posix_fadvise(fd, off_t(from), off_t(count), POSIX_FADV_WILLNEED) }
    let waits = state.withLock { s -> Bool in
      if s.readThrough == from { s.readThrough = from + count }
      s.queueBusy = s.transferWaits
      return s.transferWaits
    }
    if waits { readAhead() }
  }

  /// On the queue: the next bytes into the page cache (direct) or into memory.
  private func readAhead() {
    let (fd, direct, from, closed) = state.withLock { ($0.fd, $0.direct, $0.readThrough, $0.closed) }
    guard !closed, fd >= 0 else { return }
    if direct {
      // Read and dropped: what matters is that the page cache holds it afterwards.
      let count = Int(min(Int64(Self.warmSize), end - from))
      var scratch = [UInt8](repeating: 0, count: min(count, 1 << 20))
      var done = 0
      while done < count {
        let n = scratch.withUnsafeMutableBytes { Foundation.pread(fd, $0.baseAddress!, min($0.count, count - done), off_t(from) + off_t(done)) }
        if n < 0 && errno == EINTR { continue }
        if n <= 0 { return fail(n == 0 ? "\(path) ended before the upload did" : "reading \(path) failed: \(String(cString: strerror(errno)))") }
        done += n
      }
      finishRead { $0.readThrough = from + Int64(count) }
      return
    }
    let count = Int(min(Int64(Self.chunkSize), end - from))
    var chunk = Data(count: count)
    var done = 0
    while done < count {
      let n = chunk.withUnsafeMutableBytes { Foundation.pread(fd, $0.baseAddress! + done, count - done, off_t(from) + off_t(done)) }
      if n < 0 && errno == EINTR { continue }
      if n <= 0 { return fail(n == 0 ? "\(path) ended before the upload did" : "reading \(path) failed: \(String(cString: strerror(errno)))") }
      done += n
    }
    let more = finishRead { s in
      s.chunks.append(chunk)
      s.readThrough = from + Int64(count)
    }
    if more { queue.async { self.readAhead() } }
  }

  /// Records a read done by the queue and wakes a waiting transfer; true when the queue should
  /// read on (memory mode, room left).
  @discardableResult
  private func finishRead(_ update: (inout State) -> Void) -> Bool {
    let (wake, more) = state.withLock { s -> (Bool, Bool) in
      update(&s)
      let more = !s.direct && !s.closed && s.chunks.count < Self.ahead && s.readThrough < end
      s.queueBusy = more
      defer { s.transferWaits = false }
      return (s.transferWaits, more)
    }
    if wake { transfer.resumeReceiving() }
    return more
  }

  private func fail(_ message: String) {
    let wake = state.withLock { s -> Bool in
      s.error = message
      s.queueBusy = false
      return s.transferWaits
    }
    if wake { transfer.resumeReceiving() }
  }
}
