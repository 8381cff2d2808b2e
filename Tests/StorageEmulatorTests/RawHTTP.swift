import Foundation
import TestSupport

/// Sends raw bytes to 127.0.0.1:port and returns what the server answered before closing
/// (or before `timeout`).
func rawExchange(port: Int, _ request: Data, closeWrite: Bool = true, timeout: TimeInterval = 5) -> String {
  let fd = connectLoopback(port: port)
  guard fd >= 0 else { return "" }
  defer { close(fd) }
  var tv = timeval(tv_sec: Int(timeout), tv_usec: 0)
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
  _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
  if closeWrite { shutdown(fd, Int32(SHUT_WR)) }
  return receiveUntilClosed(fd)
}

func statusLine(_ response: String) -> String {
  String(response.split(separator: "\r\n").first ?? "")
}

/// Runs blocking socket work on a thread of its own, so that the two threads of the task pool
/// stay free for the tests running beside it.
func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
  try await withCheckedThrowingContinuation { cont in
    let thread = Thread {
      do { cont.resume(returning: try body()) } catch { cont.resume(throwing: error) }
    }
    thread.stackSize = 1 << 20
    thread.start()
  }
}
