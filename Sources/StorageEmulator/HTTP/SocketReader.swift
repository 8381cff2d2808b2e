import Foundation

/// Buffered reads from a socket, each bounded in time: a peer that sends nothing before
/// `deadline` (or for `stallTimeout` between reads) is treated as gone.
final class SocketReader {
  enum LineFailure: Error {
    /// The peer closed, reset or went quiet past the deadline.
    case ended
    /// More than the limit without a line end.
    case tooLong
  }

  let fd: Int32
  private var buffer = [UInt8]()
  private var start = 0
  /// No read waits past this instant (nil: only `stallTimeout` applies).
  var deadline: ContinuousClock.Instant?
  var stallTimeout: Duration = .seconds(60)
  /// True once a wait ran out.
  private(set) var timedOut = false

  init(fd: Int32) { self.fd = fd }

  /// Bytes received but not yet read.
  var buffered: Int { buffer.count - start }

  private func compact() {
    if start > 0 && start == buffer.count {
      buffer.removeAll(keepingCapacity: true)
      start = 0
    }
  }

  /// Waits until the socket is readable; false when the wait ran out.
  private func waitReadable() -> Bool {
    var wait = stallTimeout
    if let deadline {
      let left = deadline - .now
      if left < wait { wait = left }
    }
    while true {
      if wait <= .zero {
        timedOut = true
        return false
      }
      var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
      let ms = Int32(clamping: Int(wait.seconds * 1000) + 1)
      let n = poll(&pfd, 1, ms)
      if n > 0 { return true }
      if n < 0 && errno == EINTR { continue }
      if n < 0 { return false }
      timedOut = true
      return false
    }
  }

  private func fill() -> Bool {
    guard waitReadable() else { return false }
    var chunk = [UInt8](repeating: 0, count: 256 * 1024)
    let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
    if n <= 0 { return false }
    buffer.append(contentsOf: chunk[0..<n])
    return true
  }

  /// A line without its CRLF.
  func line(limit: Int) -> Result<String, LineFailure> {
    compact()
    var scanned = start
    while true {
      while scanned < buffer.count {
        if buffer[scanned] == UInt8(ascii: "\n") {
          var end = scanned
          if end > start && buffer[end - 1] == UInt8(ascii: "\r") { end -= 1 }
          let line = String(decoding: buffer[start..<end], as: UTF8.self)
          start = scanned + 1
          return .success(line)
        }
        scanned += 1
      }
      if buffer.count - start > limit { return .failure(.tooLong) }
      if !fill() { return .failure(.ended) }
    }
  }

  /// A line without its CRLF; nil when the peer closed or the line exceeds `limit`.
  func readLine(limit: Int) -> String? {
    try? line(limit: limit).get()
  }

  /// Up to `max` bytes; empty when the peer closed or stalled.
  func read(max: Int) -> Data {
    compact()
    if start == buffer.count {
      // Large reads bypass the buffer.
      if max >= 64 * 1024 {
        guard waitReadable() else { return Data() }
        var data = Data(count: max)
        let n = data.withUnsafeMutableBytes { recv(fd, $0.baseAddress, max, 0) }
        if n <= 0 { return Data() }
        data.count = n
        return data
      }
      if !fill() { return Data() }
    }
    let n = min(max, buffer.count - start)
    let data = Data(buffer[start..<(start + n)])
    start += n
    return data
  }
}
