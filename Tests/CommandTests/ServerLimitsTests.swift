import Foundation
import TestSupport
import Testing

/// `bucketfs serve` under limits that once stopped it: out of descriptors, and huge uploads.
@Suite(.serialized) struct ServerLimitsTests {
  func connect(_ port: Int) -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = in_port_t(UInt16(port).bigEndian)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    let ok = withUnsafePointer(to: &addr) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    if ok != 0 {
      close(fd)
      return -1
    }
    var tv = timeval(tv_sec: 30, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    return fd
  }

  func sendAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Bool {
    var done = 0
    while done < bytes.count {
      let n = send(fd, bytes.baseAddress! + done, bytes.count - done, Int32(MSG_NOSIGNAL))
      if n <= 0 { return false }
      done += n
    }
    return true
  }

  func exchange(_ port: Int, _ request: String) -> String {
    let fd = connect(port)
    guard fd >= 0 else { return "" }
    defer { close(fd) }
    _ = Data(request.utf8).withUnsafeBytes { sendAll(fd, $0) }
    return receiveUntilClosed(fd)
  }

  /// With `ulimit -n 256`, 300 open connections neither stop the server nor keep it from
  /// answering, and it serves normally once they are gone.
  @Test func survivesMoreConnectionsThanDescriptors() throws {
    try scope(ServeProcess(fileLimit: 256)) { server in
      try #require(server.port > 0)
      var fds: [Int32] = []
      defer { fds.forEach { close($0) } }
      for _ in 0..<300 {
        let fd = connect(server.port)
        if fd >= 0 { fds.append(fd) }
      }
      let during = exchange(server.port, "GET /v0 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
      #expect(during.hasPrefix("HTTP/1.1 200"), "\(during.prefix(40).debugDescription)")
      fds.forEach { close($0) }
      fds = []
      // Served again once the server has seen the closes (not after a fixed time).
      #expect(waitUntil(timeout: 5, every: 0.05) {
        exchange(server.port, "GET /v0 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").hasPrefix("HTTP/1.1 200")
      })
      #expect(server.process.isRunning)
    }
  }

  /// Five concurrent 500 MiB multipart uploads go to disk as they arrive: the server's peak
  /// resident memory stays under 200 MiB.
  @Test func hugeMultipartUploadsAreStreamed() throws {
    try scope(ServeProcess()) { server in
      try #require(server.port > 0)
      let size = 500 << 20
      let results = Mutex5()
      let port = server.port
      DispatchQueue.concurrentPerform(iterations: 5) { i in
        let fd = connect(port)
        guard fd >= 0 else { return }
        defer { close(fd) }
        let head = "--XX\r\nContent-Type: application/json\r\n\r\n{\"name\":\"big\(i).bin\"}\r\n--XX\r\nContent-Type: application/octet-stream\r\n\r\n"
        let tail = "\r\n--XX--\r\n"
        let request = "POST /v0/b/bk/o?name=big\(i).bin HTTP/1.1\r\nHost: x\r\nX-Goog-Upload-Protocol: multipart\r\nContent-Type: multipart/related; boundary=XX\r\nContent-Length: \(head.utf8.count + size + tail.utf8.count)\r\nConnection: close\r\n\r\n" + head
        var ok = Data(request.utf8).withUnsafeBytes { sendAll(fd, $0) }
        let chunk = [UInt8](repeating: UInt8(65 + i), count: 1 << 20)
        for _ in 0..<(size >> 20) where ok { ok = chunk.withUnsafeBytes { sendAll(fd, $0) } }
        ok = ok && Data(tail.utf8).withUnsafeBytes { sendAll(fd, $0) }
        let out = receiveUntilClosed(fd)
        results.set(i, ok ? out : "send failed")
      }
      for i in 0..<5 {
        let answer = results.get(i)
        #expect(answer.hasPrefix("HTTP/1.1 200"), "upload \(i): \(answer.prefix(80).debugDescription)")
        #expect(answer.contains("\"size\":\"\(size)\""), "upload \(i) stored the wrong size")
      }
      let peak = try #require(server.status("VmHWM"))
      #expect(peak < 200 * 1024, "peak RSS \(peak / 1024) MiB")
    }
  }
}

/// Five answers written from concurrent uploads.
final class Mutex5: @unchecked Sendable {
  private let lock = NSLock()
  private var values = [String](repeating: "", count: 5)
  func set(_ i: Int, _ v: String) { lock.withLock { values[i] = v } }
  func get(_ i: Int) -> String { lock.withLock { values[i] } }
}
