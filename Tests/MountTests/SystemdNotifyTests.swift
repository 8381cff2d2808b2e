import Foundation
import ChildProcess
import StorageCore
import Testing

/// Under systemd (`Type=notify`), `bucketfs mount -f` says READY=1 once the mount is up and
/// STOPPING=1 when it goes, on the datagram socket NOTIFY_SOCKET names.
@Suite(.serialized) struct SystemdNotifyTests {
  @Test func readyThenStopping() async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("n/file.txt", Data("notify".utf8))
      let path = fx.root.appendingPathComponent("notify.sock").path
      let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
      try #require(fd >= 0)
      defer { close(fd) }
      var address = sockaddr_un()
      address.sun_family = sa_family_t(AF_UNIX)
      withUnsafeMutableBytes(of: &address.sun_path) { raw in
        for (i, b) in path.utf8.enumerated() { raw[i] = b }
      }
      let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
      }
      try #require(bound == 0)
      var timeout = timeval(tv_sec: 0, tv_usec: 200_000)
      setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
      func receive() -> [String] {
        var messages: [String] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
          let n = recv(fd, &buffer, buffer.count, 0)
          if n <= 0 { return messages }
          messages.append(String(decoding: buffer[0..<n], as: UTF8.self))
        }
      }
      let m = try fx.mount(environment: ["NOTIFY_SOCKET": path])
      let atStart = receive()
      #expect(atStart.count == 1, "\(atStart)")
      let ready = atStart.first ?? ""
      #expect(ready.split(separator: "\n").contains("READY=1"), "\(ready)")
      #expect(ready.contains("STATUS=Mounted gs://\(fx.bucket)"), "\(ready)")
      // The mount answered before READY was read: READY came after the mount was up.
      #expect(try readFile(m.path("n/file.txt")).get() == Data("notify".utf8))
      m.process.send(SIGTERM)
      m.process.wait()
      let atStop = receive()
      #expect(atStop.first?.split(separator: "\n").contains("STOPPING=1") == true, "\(atStop)")
      #expect(!m.isMounted)
    }
  }
}
