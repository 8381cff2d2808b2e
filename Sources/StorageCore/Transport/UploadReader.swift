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

  /// The file to read, as the queue opens and closes it.
  private enum File {
    case opening
    case open(Int32)
    case failed(String)
    /// The transfer ended (the queue closes the descriptor after what it is doing).
    case closed

    var fd: Int32? {
      if case .open(let fd) = self { fd } else { nil }
    }
  }

  /// Where libcurl takes the bytes from.
  private enum Source {
    /// Straight from the page cache (preadv2 with RWF_NOWAIT); the queue warms it ahead.
    case pageCache
    /// From `chunks`, which the queue fills: the kernel said it cannot read without waiting.
    case memory
  }

  private struct State {
    var file = File.opening
    var source = Source.pageCache
    /// The file offset up to which the queue has read (warmed the cache, or filled `chunks`).
    var readThrough: Int64
    /// A read (or the open) is on the queue or about to be.
    var queueBusy = false
    /// The transfer paused waiting for the queue, which resumes it.
    var transferWaits = false
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
      if case .failed(let error) = s.file { return .failed(error) }
      guard let fd = s.file.fd else {
        s.transferWaits = true
        return .pause
      }
      if s.source == .pageCache {
        let n = CCurlShims_pread_nowait(fd, buffer, count, off_t(position))
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
          s.source = .memory
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
    let fd = state.withLock { s -> Int32? in
      defer { s.file = .closed }
      return s.file.fd
    }
    // On the queue: a read it is doing may still use the descriptor.
    if let fd { queue.async { _ = Foundation.close(fd) } }
  }

  private func open() {
    if case .closed = state.withLock({ $0.file }) { return }
    let fd = Foundation.open(path, O_RDONLY | O_CLOEXEC)
    if fd < 0 { return fail("cannot read \(path): \(String(cString: strerror(errno)))") }
    let (opened, wake) = state.withLock { s -> (Bool, Bool) in
      if case .closed = s.file { return (false, false) }
      s.file = .open(fd)
      s.queueBusy = false
      defer { s.transferWaits = false }
      return (true, s.transferWaits)
    }
    if !opened { _ = Foundation.close(fd) }
    if wake { transfer.resumeReceiving() }
  }

  /// On the queue: asks the kernel to read the next bytes into the page cache (no copy); a
  /// transfer that paused meanwhile gets a real read.
  private func adviseAhead() {
    let (fd, from) = state.withLock { ($0.file.fd, $0.readThrough) }
    let count = min(Int64(Self.warmSize), end - from)
    if let fd, count > 0 { _ = posix_fadvise(fd, off_t(from), off_t(count), POSIX_FADV_WILLNEED) }
    let waits = state.withLock { s -> Bool in
      if s.readThrough == from { s.readThrough = from + count }
      s.queueBusy = s.transferWaits
      return s.transferWaits
    }
    if waits { readAhead() }
  }

  /// On the queue: the next bytes into the page cache (direct) or into memory.
  private func readAhead() {
    let (fd, source, from) = state.withLock { ($0.file.fd, $0.source, $0.readThrough) }
    guard let fd else { return }
    if source == .pageCache {
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
      let more = s.source == .memory && s.file.fd != nil && s.chunks.count < Self.ahead && s.readThrough < end
      s.queueBusy = more
      defer { s.transferWaits = false }
      return (s.transferWaits, more)
    }
    if wake { transfer.resumeReceiving() }
    return more
  }

  private func fail(_ message: String) {
    // On the queue, so the descriptor is not in use.
    let (wake, fd) = state.withLock { s -> (Bool, Int32?) in
      let fd = s.file.fd
      if case .closed = s.file {} else { s.file = .failed(message) }
      s.queueBusy = false
      return (s.transferWaits, fd)
    }
    if let fd { _ = Foundation.close(fd) }
    if wake { transfer.resumeReceiving() }
  }
}
