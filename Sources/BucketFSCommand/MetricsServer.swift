import BucketFS
import Foundation
import ListeningSocket
import Synchronization

/// Serves `GET /metrics` (Prometheus text format) on HOST:PORT for a mount: an accepting thread,
/// and a short-lived thread per connection (at most 16 at once), so that idle clients delay no
/// scrape.
final class MetricsServer: @unchecked Sendable {
  let fd: Int32
  let page: @Sendable () -> String
  /// HOST:PORT as bound (the port the system chose for `:0`).
  private(set) var address = ""
  /// Connections being answered, each on a thread of its own: an idle client holds up only itself.
  private let serving = Mutex(0)
  static let maxConnections = 16

  enum Failure: Error, CustomStringConvertible {
    case address(String)
    var description: String {
      switch self { case .address(let s): return s }
    }
  }

  init(address: String, page: @escaping @Sendable () -> String) throws {
    self.page = page
    guard let colon = address.lastIndex(of: ":"), let port = UInt16(address[address.index(after: colon)...]) else {
      throw Failure.address("metrics= takes HOST:PORT, not \(address)")
    }
    var host = String(address[..<colon])
    if host.hasPrefix("[") { host = String(host.dropFirst().dropLast()) }
    let (fd, boundPort): (Int32, Int)
    do throws(ListeningSocket.Failure) {
      (fd, boundPort) = try ListeningSocket.open(host: host, port: Int(port), backlog: 16)
    } catch {
      switch error {
      case .notNumeric(let host): throw Failure.address("metrics: \(host) is not a numeric address such as 127.0.0.1")
      case .refused(let reason): throw Failure.address("metrics: cannot listen on \(address): \(reason)")
      }
    }
    self.fd = fd
    self.address = (host.contains(":") ? "[\(host)]" : host) + ":\(boundPort)"
    let thread = Thread { [self] in serve() }
    thread.name = "bucketfs-metrics"
    thread.stackSize = 256 << 10
    thread.start()
  }

  private func serve() {
    while true {
      let client = accept(fd, nil, nil)
      if client < 0 {
        if errno == EINTR || errno == ECONNABORTED { continue }
        if errno == EBADF || errno == EINVAL { return }
        Thread.sleep(forTimeInterval: 0.05)
        continue
      }
      let admitted = serving.withLock { n -> Bool in
        guard n < Self.maxConnections else { return false }
        n += 1
        return true
      }
      guard admitted else {
        close(client)
        continue
      }
      let thread = Thread { [self] in
        answer(client)
        serving.withLock { $0 -= 1 }
      }
      thread.stackSize = 256 << 10
      thread.start()
    }
  }

  private func answer(_ client: Int32) {
    var timeout = timeval(tv_sec: 5, tv_usec: 0)
    setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var buffer = [UInt8](repeating: 0, count: 4096)
    let n = recv(client, &buffer, buffer.count, 0)
    let request = n > 0 ? String(decoding: buffer[0..<n], as: UTF8.self) : ""
    let path = request.split(separator: " ").dropFirst().first.map(String.init) ?? ""
    let ok = request.hasPrefix("GET ") && (path == "/metrics" || path == "/")
    let body = ok ? page() : "not found: the metrics are at /metrics\n"
    let head = (ok ? "HTTP/1.1 200 OK" : "HTTP/1.1 404 Not Found")
      + "\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n"
    let answer = Array((head + body).utf8)
    var sent = 0
    while sent < answer.count {
      let w = answer[sent...].withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
      if w <= 0 { break }
      sent += w
    }
    close(client)
  }

  func stop() {
    shutdown(fd, Int32(SHUT_RDWR))
    close(fd)
  }
}
