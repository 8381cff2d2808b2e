import Foundation

/// Buffered reads from a socket.
final class SocketReader {
  let fd: Int32
  private var buffer = [UInt8]()
  private var start = 0

  init(fd: Int32) { self.fd = fd }

  private func compact() {
    if start > 0 && start == buffer.count {
      buffer.removeAll(keepingCapacity: true)
      start = 0
    }
  }

  private func fill() -> Bool {
    var chunk = [UInt8](repeating: 0, count: 256 * 1024)
    let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
    if n <= 0 { return false }
    buffer.append(contentsOf: chunk[0..<n])
    return true
  }

  /// A line without its CRLF; nil when the peer closed or the line exceeds `limit`.
  func readLine(limit: Int) -> String? {
    compact()
    var scanned = start
    while true {
      while scanned < buffer.count {
        if buffer[scanned] == UInt8(ascii: "\n") {
          var end = scanned
          if end > start && buffer[end - 1] == UInt8(ascii: "\r") { end -= 1 }
          let line = String(decoding: buffer[start..<end], as: UTF8.self)
          start = scanned + 1
          return line
        }
        scanned += 1
      }
      if buffer.count - start > limit { return nil }
      if !fill() { return nil }
    }
  }

  /// Up to `max` bytes; empty when the peer closed.
  func read(max: Int) -> Data {
    compact()
    if start == buffer.count {
      // Large reads bypass the buffer.
      if max >= 64 * 1024 {
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
