import Foundation
import TestSupport
import StorageEmulator
import Testing

/// What a hostile or unlucky client does to the emulator: tokens used for what they do not grant,
/// idle floods, garbage. Each of these once broke it.
@Suite struct HostileClientTests {
  final class Secured: @unchecked Sendable {
    let root: URL
    let emulator: StorageEmulator
    static let secret = "real-secret-token"
    init(limits: ConnectionLimits = ConnectionLimits()) throws {
      root = FileManager.default.temporaryDirectory.appendingPathComponent("emu-hostile-\(UUID().uuidString)")
      var config = StorageEmulator.Configuration(root: root)
      config.port = 0
      config.requiredToken = Self.secret
      config.limits = limits
      emulator = try StorageEmulator(config)
    }
    var port: Int { emulator.port }
    func send(_ method: String, _ target: String, auth: String? = nil, headers: [String] = [], body: String = "") -> String {
      var head = "\(method) \(target) HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: \(body.utf8.count)\r\n"
      if let auth { head += "Authorization: \(auth)\r\n" }
      for h in headers { head += h + "\r\n" }
      return rawExchange(port: port, Data((head + "\r\n" + body).utf8))
    }
    func upload(_ name: String, _ body: String) -> String {
      send("POST", "/v0/b/bk/o?name=\(name)", auth: "Bearer \(Self.secret)", headers: ["Content-Type: text/plain"], body: body)
    }
    /// The object's metadata as the owner sees it.
    func metadata(_ name: String) -> [String: Any]? {
      let response = send("GET", "/v0/b/bk/o/\(name)", auth: "Bearer \(Self.secret)")
      guard response.hasPrefix("HTTP/1.1 200"), let body = response.components(separatedBy: "\r\n\r\n").last else { return nil }
      return (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any]
    }
    deinit {
      emulator.stop()
      try? FileManager.default.removeItem(at: root)
    }
  }

  /// Every route of both APIs × every method × every kind of credential: a download token lets
  /// its holder GET that object's bytes and metadata through v0, and nothing else.
  @Test func downloadTokenGrantsOnlyReadsOfItsObject() async throws {
    try await offPool { try self.downloadTokenGrantsOnlyReadsOfItsObjectBlocking() }
  }

  func downloadTokenGrantsOnlyReadsOfItsObjectBlocking() throws {
    try scope(Secured()) { s in
      #expect(s.upload("victim", "victim bytes").hasPrefix("HTTP/1.1 200"))
      #expect(s.upload("other", "other bytes").hasPrefix("HTTP/1.1 200"))
      let victim = try #require(s.metadata("victim"))
      let other = try #require(s.metadata("other"))
      let victimToken = try #require((victim["downloadTokens"] as? String)?.split(separator: ",").first.map(String.init))
      let otherToken = try #require((other["downloadTokens"] as? String)?.split(separator: ",").first.map(String.init))

      struct Route {
        var method: String
        var target: String
        var headers: [String] = []
        var body = ""
        /// The object whose download token grants this request (its bytes or metadata through v0).
        var readableWith: String? = nil
      }
      let json = ["Content-Type: application/json"]
      let routes: [Route] = [
        Route(method: "GET", target: "/v0/b/bk/o/victim?alt=media", readableWith: "victim"),
        Route(method: "GET", target: "/v0/b/bk/o/victim", readableWith: "victim"),
        Route(method: "GET", target: "/v0/b/bk/o/other?alt=media", readableWith: "other"),
        Route(method: "GET", target: "/v0/b/bk/o/other", readableWith: "other"),
        Route(method: "GET", target: "/v0/b/bk/o?prefix="),
        Route(method: "PATCH", target: "/v0/b/bk/o/victim", headers: json, body: "{\"contentType\":\"x/evil\"}"),
        Route(method: "PUT", target: "/v0/b/bk/o/victim", body: "evil"),
        Route(method: "DELETE", target: "/v0/b/bk/o/victim"),
        Route(method: "POST", target: "/v0/b/bk/o?name=planted", body: "evil"),
        Route(method: "POST", target: "/v0/b/bk/o/victim?alt=media&name=other", body: "evil"),
        Route(method: "POST", target: "/v0/b/bk/o/victim?alt=media", body: "evil"),
        Route(method: "POST", target: "/v0/b/bk/o/victim", headers: ["X-HTTP-Method-Override: DELETE"]),
        Route(method: "GET", target: "/v0/b/bk/o/victim?alt=media", headers: ["X-HTTP-Method-Override: DELETE"]),
        Route(method: "POST", target: "/v0/b/bk/o/victim?name=victim",
          headers: ["X-Goog-Upload-Protocol: resumable", "X-Goog-Upload-Command: start"]),
        Route(method: "GET", target: "/storage/v1/b/bk/o/victim?alt=media"),
        Route(method: "GET", target: "/storage/v1/b/bk/o/victim"),
        Route(method: "GET", target: "/download/storage/v1/b/bk/o/victim?alt=media"),
        Route(method: "GET", target: "/storage/v1/b/bk/o"),
        Route(method: "GET", target: "/storage/v1/b"),
        Route(method: "POST", target: "/storage/v1/b", headers: json, body: "{\"name\":\"b2\"}"),
        Route(method: "PATCH", target: "/storage/v1/b/bk/o/victim", headers: json, body: "{}"),
        Route(method: "DELETE", target: "/storage/v1/b/bk/o/victim"),
        Route(method: "POST", target: "/upload/storage/v1/b/bk/o?uploadType=media&name=other", body: "evil"),
        Route(method: "POST", target: "/upload/storage/v1/b/bk/o?uploadType=resumable&name=other", headers: json, body: "{}"),
      ]
      let credentials: [(label: String, auth: String?, token: String?, tokenOf: String?)] = [
        ("no credentials", nil, nil, nil),
        ("a wrong token", "Bearer not-the-token", nil, nil),
        ("a wrong token in the query", nil, "not-a-download-token", nil),
        ("the victim's download token", nil, victimToken, "victim"),
        ("another object's download token", nil, otherToken, "other"),
      ]
      for route in routes {
        for c in credentials {
          var target = route.target
          if let token = c.token { target += (target.contains("?") ? "&" : "?") + "token=\(token)" }
          let response = s.send(route.method, target, auth: c.auth, headers: route.headers, body: route.body)
          let status = statusLine(response)
          let allowed = c.tokenOf != nil && c.tokenOf == route.readableWith
          if allowed {
            #expect(status.hasPrefix("HTTP/1.1 200"), "\(route.method) \(route.target) with \(c.label): \(status)")
          } else {
            #expect(
              status.hasPrefix("HTTP/1.1 401") || status.hasPrefix("HTTP/1.1 403"),
              "\(route.method) \(route.target) \(route.headers) with \(c.label): \(status)")
          }
        }
      }
      // Nothing changed: same generations and metagenerations, nothing planted.
      let after = try #require(s.metadata("victim"))
      #expect(after["generation"] as? String == victim["generation"] as? String)
      #expect(after["metageneration"] as? String == victim["metageneration"] as? String)
      #expect(s.metadata("other")?["generation"] as? String == other["generation"] as? String)
      #expect(s.metadata("planted") == nil)
      // The real token still does everything.
      for route in routes {
        let response = s.send(route.method, route.target, auth: "Bearer \(Secured.secret)", headers: route.headers, body: route.body)
        let status = statusLine(response)
        #expect(!status.contains(" 401 ") && !status.contains(" 403 "), "\(route.method) \(route.target) with the real token: \(status)")
      }
    }
  }

  /// Idle keep-alive connections are closed after the idle timeout, more of them than the
  /// connection cap are no problem, and a new request is answered throughout.
  @Test func idleConnectionsAreClosedAndNewRequestsServed() async throws {
    try await offPool { try self.idleConnectionsAreClosedAndNewRequestsServedBlocking() }
  }

  func idleConnectionsAreClosedAndNewRequestsServedBlocking() throws {
    var limits = ConnectionLimits()
    limits.idleTimeout = .seconds(2)
    limits.maxConnections = 500
    try scope(Secured(limits: limits)) { s in
      var fds: [Int32] = []
      defer { fds.forEach { close($0) } }
      for _ in 0..<2000 {
        let fd = connectLoopback(port: s.port)
        try #require(fd >= 0)
        fds.append(fd)
      }
      // Served while 2,000 idle clients hold connections.
      #expect(statusLine(s.send("GET", "/v0")).hasPrefix("HTTP/1.1 200"))
      // Connections being closed to make room may still be winding down.
      #expect(waitUntil(timeout: 5) { s.emulator.openConnections <= 500 })
      // Every idle connection is closed by the server within its idle timeout (2 s): reads see
      // the end of the stream. A connection refused for lack of room carries a 503 before its end.
      var open = Set(fds)
      let allClosed = waitUntil(timeout: 10, every: 0.1) {
        for fd in open {
          var buffer = [UInt8](repeating: 0, count: 512)
          var n = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
          while n > 0 { n = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT)) }
          if n == 0 || (n < 0 && errno == ECONNRESET) { open.remove(fd) }
        }
        return open.isEmpty
      }
      #expect(allClosed, "\(open.count) of \(fds.count) idle connections still open")
      #expect(statusLine(s.send("GET", "/v0")).hasPrefix("HTTP/1.1 200"))
    }
  }

  /// Headers trickled in one byte at a time (slowloris) end with 408 after the header timeout.
  @Test func slowHeadersTimeOut() async throws {
    try await offPool { try self.slowHeadersTimeOutBlocking() }
  }

  func slowHeadersTimeOutBlocking() throws {
    var limits = ConnectionLimits()
    limits.headerTimeout = .milliseconds(500)
    try scope(Secured(limits: limits)) { s in
      let fd = connectLoopback(port: s.port)
      try #require(fd >= 0)
      defer { close(fd) }
      _ = "GET /v0 HTTP/1.1\r\n".withCString { send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
      let start = Date()
      var answer = Data()
      var buffer = [UInt8](repeating: 0, count: 4096)
      while Date().timeIntervalSince(start) < 5 {
        _ = "X".withCString { send(fd, $0, 1, Int32(MSG_NOSIGNAL)) }
        let n = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
        if n > 0 { answer.append(contentsOf: buffer[0..<n]) }
        if n == 0 { break }
        Thread.sleep(forTimeInterval: 0.1)
      }
      #expect(String(decoding: answer, as: UTF8.self).hasPrefix("HTTP/1.1 408"))
      #expect(Date().timeIntervalSince(start) < 3)
    }
  }

  /// Binary garbage gets a 400 before the close, not a silent close.
  @Test func binaryInputGets400() async throws {
    try await offPool { try self.binaryInputGets400Blocking() }
  }

  func binaryInputGets400Blocking() throws {
    try scope(Secured()) { s in
      var rng = SeededGenerator(seed: 7)
      for size in [1, 100, 5000, 20_000, 70_000] {
        let bytes = Data((0..<size).map { _ in UInt8.random(in: 0...255, using: &rng) })
        let response = rawExchange(port: s.port, bytes)
        #expect(statusLine(response).hasPrefix("HTTP/1.1 4"), "\(size) random bytes → \(statusLine(response).debugDescription)")
      }
    }
  }
}

func connectLoopback(port: Int) -> Int32 {
  let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
  var addr = sockaddr_in()
  addr.sin_family = sa_family_t(AF_INET)
  addr.sin_port = in_port_t(UInt16(port).bigEndian)
  addr.sin_addr.s_addr = inet_addr("127.0.0.1")
  let ok = withUnsafePointer(to: &addr) {
    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
  }
  if ok != 0 {
    close(fd)
    return -1
  }
  return fd
}

