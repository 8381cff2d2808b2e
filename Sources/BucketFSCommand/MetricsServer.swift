import BucketFS
import Foundation

/// Serves `GET /metrics` (Prometheus text format) on HOST:PORT for a mount, one connection at a
/// time on a thread of its own: a scrape every few seconds needs nothing more.
final class MetricsServer: @unchecked Sendable {
  let fd: Int32
  let page: @Sendable () -> String

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
    var hints = addrinfo()
    hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
    hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST
    var info: UnsafeMutablePointer<addrinfo>?
    guard getaddrinfo(host, String(port), &hints, &info) == 0, let info else {
      throw Failure.address("metrics: \(host) is not a numeric address such as 127.0.0.1")
    }
    defer { freeaddrinfo(info) }
    let fd = socket(info.pointee.ai_family, info.pointee.ai_socktype | Int32(SOCK_CLOEXEC.rawValue), 0)
    var one: Int32 = 1
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
    guard fd >= 0, bind(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0, listen(fd, 16) == 0 else {
      let reason = String(cString: strerror(errno))
      if fd >= 0 { close(fd) }
      throw Failure.address("metrics: cannot listen on \(address): \(reason)")
    }
    self.fd = fd
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
      var timeout = timeval(tv_sec: 5, tv_usec: 0)
      setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
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
  }

  func stop() {
    shutdown(fd, Int32(SHUT_RDWR))
    close(fd)
  }
}
