import Foundation

/// What the peer sends on `fd` until it closes the connection (or a receive timeout set on the
/// socket passes), as text.
package func receiveUntilClosed(_ fd: Int32) -> String {
  var out = Data()
  var buffer = [UInt8](repeating: 0, count: 65536)
  while true {
    let n = recv(fd, &buffer, buffer.count, 0)
    if n <= 0 { break }
    out.append(contentsOf: buffer[0..<n])
  }
  return String(decoding: out, as: UTF8.self)
}
