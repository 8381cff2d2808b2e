import Foundation
import ChildProcess
import TestSupport
import StorageCore
import Testing

/// `-o metrics=HOST:PORT` serves the daemon's numbers; they move as files are read;
/// `bucketfs stats` shows them; `log_format=json` writes one JSON object per line.
@Suite(.serialized) struct MetricsTests {
  func freePort() -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    _ = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
    return Int(UInt16(bigEndian: addr.sin_port))
  }

  /// The value of a sample line `name{labels} value` (the sum over matching lines).
  func value(_ page: String, _ prefix: String) -> Double {
    page.split(separator: "\n").filter { $0.hasPrefix(prefix) }.compactMap { $0.split(separator: " ").last.flatMap { Double($0) } }.reduce(0, +)
  }

  /// Port 0 picks a free port, and the log says which; idle connections hold up no scrape.
  @Test func aChosenPortIsLoggedAndIdleClientsDelayNothing() async throws {
    try await MountFixture.scope { fx in
      let m = try fx.mount(options: ["metrics=127.0.0.1:0"])
      let chosen = try await metricsPort(m)
      #expect(chosen > 0)
      // Three clients that connect and say nothing.
      var idle: [Int32] = []
      for _ in 0..<3 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = UInt16(chosen).bigEndian
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &addr) {
          $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        #expect(connected == 0)
        idle.append(fd)
      }
      defer { idle.forEach { close($0) } }
      let started = Date()
      let page = String(decoding: try await HTTPClient.shared.send(HTTPRequest(method: "GET", url: "http://127.0.0.1:\(chosen)/metrics")).body, as: UTF8.self)
      #expect(page.contains("bucketfs_fuse_timeouts_total"))
      // Served behind them, the scrape would wait out an idle client's 5 s read timeout at least.
      #expect(Date().timeIntervalSince(started) < 5, "a scrape behind idle clients took \(Date().timeIntervalSince(started)) s")
    }
  }

  /// `-o a -o b`: both count (the first was dropped).
  @Test func everyDashOCounts() async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("two/o.txt", Data("both".utf8))
      // The fixture passes its own -o (staging_dir, read_timeout, …) first.
      let m = try fx.mount(extra: ["-o", "metrics=127.0.0.1:0"])
      #expect(try await metricsPort(m) > 0)
      #expect(try readFile(m.path("two/o.txt")).get() == Data("both".utf8))
      try await waitStaged(m.path("two/o.txt"))
      let staging = fx.root.appendingPathComponent("staging").path
      #expect(((try? FileManager.default.contentsOfDirectory(atPath: staging)) ?? []).count == 1, "the first -o's staging_dir was not used")
    }
  }

  @Test func countersMoveAsFilesAreRead() async throws {
    try await MountFixture.scope { fx in
      for i in 0..<5 { _ = try await fx.put("m/f\(i).bin", randomData(300_000, seed: UInt64(300 + i))) }
      let port = freePort()
      let m = try fx.mount(options: ["metrics=127.0.0.1:\(port)", "log_format=json", "log_level=info"])
      let url = "http://127.0.0.1:\(port)/metrics"
      let before = String(decoding: try await HTTPClient.shared.send(HTTPRequest(method: "GET", url: url)).body, as: UTF8.self)
      for family in ["bucketfs_requests_total", "bucketfs_fetched_bytes_total", "bucketfs_block_cache_bytes", "bucketfs_staging_files",
        "bucketfs_open_handles", "bucketfs_fuse_operation_seconds", "bucketfs_retries_total", "bucketfs_token_refreshes_total",
        "bucketfs_fuse_timeouts_total", "bucketfs_transfer_loop_seconds_since_turn", "bucketfs_transfer_loop_stalls_total"]
      {
        #expect(before.contains("# TYPE \(family) "), "\(family) missing")
      }
      for i in 0..<5 { _ = try readFile(m.path("m/f\(i).bin")).get() }
      // A download is counted when its request ends, which may come just after the reader got
      // its last byte: wait for the count rather than read it once.
      var after = ""
      #expect(
        await eventually {
          after = String(decoding: (try? await HTTPClient.shared.send(HTTPRequest(method: "GET", url: url)).body) ?? Data(), as: UTF8.self)
          return value(after, "bucketfs_fetched_bytes_total") >= value(before, "bucketfs_fetched_bytes_total") + 1_500_000
        }, "fetched \(value(after, "bucketfs_fetched_bytes_total"))")
      #expect(value(after, "bucketfs_requests_total{operation=\"read\",outcome=\"ok\"}") > value(before, "bucketfs_requests_total{operation=\"read\",outcome=\"ok\"}"))
      // A file staged whole before its open (read ahead) is read by passthrough, without a
      // FUSE read: each file is one or the other.
      #expect(
        value(after, "bucketfs_fuse_operation_seconds_count{operation=\"read\"}") + value(after, "bucketfs_passthrough_opens_total")
          - value(before, "bucketfs_passthrough_opens_total") >= 5, "\(after)")
      #expect(value(after, "bucketfs_fuse_operation_seconds_count{operation=\"open\"}") >= 5)
      // The watchdog's view: a loop that turns, never held up.
      #expect(value(after, "bucketfs_transfer_loop_seconds_since_turn") < 1)
      #expect(value(after, "bucketfs_transfer_loop_stalls_total") == 0)
      // For a person.
      let stats = try ChildProcess.run(
        bucketfsBinary, ["stats", m.mountpoint.path], environment: ProcessInfo.processInfo.environment, timeout: .seconds(60))
      let table = stats.text
      #expect(stats.termination == .exited(0) && table.contains("bytes fetched") && table.contains("requests to the bucket"), "\(table)")
      // JSON log lines.
      let lines = m.log.split(separator: "\n").filter { $0.hasPrefix("{") }
      #expect(!lines.isEmpty)
      for line in lines {
        let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
        #expect(object?["level"] is String && object?["message"] is String, "\(line)")
      }
      #expect(lines.contains { $0.contains("mounted gs://") })
    }
  }

  /// A write asks the daemon nothing else: the mount takes FUSE_HANDLE_KILLPRIV_V2 (no file here
  /// has a set-id bit or a capability to kill), so the kernel stops asking for
  /// `security.capability` before each write once a file has none, and for the attributes before
  /// each chown. Counted from the daemon's own operation counts, not timed.
  @Test func writesAndChownsAskNothingElse() async throws {
    try await MountFixture.scope { fx in
      let m = try fx.mount(options: ["writable", "metrics=127.0.0.1:0"])
      let url = "http://127.0.0.1:\(try await metricsPort(m))/metrics"
      func count(_ operation: String) async throws -> Double {
        let page = String(decoding: try await HTTPClient.shared.send(HTTPRequest(method: "GET", url: url)).body, as: UTF8.self)
        return value(page, "bucketfs_fuse_operation_seconds_count{operation=\"\(operation)\"}")
      }
      let path = m.path("many-writes.bin")
      let fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o644)
      #expect(fd >= 0)
      let (xattrsBefore, getattrsBefore) = (try await count("getxattr"), try await count("getattr"))
      let chunk = [UInt8](repeating: 0x5a, count: 4096)
      for _ in 0..<64 { #expect(write(fd, chunk, chunk.count) == chunk.count) }
      for _ in 0..<4 { #expect(fchown(fd, 0, 0) == 0) }
      #expect(close(fd) == 0)
      let xattrs = try await count("getxattr") - xattrsBefore
      let getattrs = try await count("getattr") - getattrsBefore
      // Without it: a getxattr for each of the 64 writes, and a getattr for each chown. With it:
      // one for the first write, and one for each chown (the kernel still asks whether there
      // is a capability to drop, notify_change's ATTR_KILL_PRIV).
      #expect(xattrs <= 6, "\(xattrs) getxattr requests for 64 writes and 4 chowns")
      #expect(getattrs <= 2, "\(getattrs) getattr requests for 64 writes and 4 chowns")
      #expect(try readFile(path).get() == Data(repeating: 0x5a, count: 64 * 4096))
    }
  }
}
