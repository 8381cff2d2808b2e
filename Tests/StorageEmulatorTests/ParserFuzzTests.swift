import Foundation
import TestSupport
import StorageEmulator
import Testing

/// A bounded, seeded fuzz of the HTTP parser and routes: mutated requests of every shape. Each
/// must get an answer below 500 or a close, the server must stay up, and nothing may appear
/// outside its root. `BUCKETFS_FUZZ_INPUTS` runs more; `BUCKETFS_FUZZ_SEED` replays a seed.
@Suite struct ParserFuzzTests {
  static let templates: [String] = [
    "GET /v0/b/bk/o/file.txt?alt=media HTTP/1.1\r\nHost: x\r\nRange: bytes=0-3\r\n\r\n",
    "GET /v0/b/bk/o?prefix=dir%2F&delimiter=%2F&maxResults=2 HTTP/1.1\r\nHost: x\r\n\r\n",
    "POST /v0/b/bk/o?name=..%2F..%2Fescape HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello",
    "POST /v0/b/bk/o?name=%2Fetc%2Fpasswd HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    "POST /v0/b/bk/o?name=m HTTP/1.1\r\nHost: x\r\nX-Goog-Upload-Protocol: multipart\r\nContent-Type: multipart/related; boundary=BB\r\nContent-Length: 96\r\n\r\n--BB\r\nContent-Type: application/json\r\n\r\n{\"name\":\"../m\"}\r\n--BB\r\nContent-Type: text/plain\r\n\r\nbody\r\n--BB--\r\n",
    "POST /v0/b/bk/o?name=r HTTP/1.1\r\nHost: x\r\nX-Goog-Upload-Protocol: resumable\r\nX-Goog-Upload-Command: start\r\nContent-Length: 2\r\n\r\n{}",
    "PATCH /v0/b/bk/o/file.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 27\r\n\r\n{\"metadata\":{\"k\":\"v\"},\"x\":1}",
    "DELETE /v0/b/bk/o/nothing HTTP/1.1\r\nHost: x\r\n\r\n",
    "GET /storage/v1/b/bk/o/file.txt?alt=media&generation=1 HTTP/1.1\r\nHost: x\r\n\r\n",
    "POST /upload/storage/v1/b/bk/o?uploadType=multipart HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/related; boundary=\"q\"\r\nContent-Length: 80\r\n\r\n--q\r\n\r\n{\"name\":\"/abs\"}\r\n--q\r\n\r\nxyz\r\n--q--",
    "PUT /upload/storage/v1/b/bk/o?uploadType=resumable&upload_id=zz HTTP/1.1\r\nHost: x\r\nContent-Range: bytes 0-3/4\r\nContent-Length: 4\r\n\r\nabcd",
    "GET /download/storage/v1/b/bk/o/%00?alt=media HTTP/1.1\r\nHost: x\r\n\r\n",
  ]

  static func mutate(_ text: String, _ rng: inout SeededGenerator) -> Data {
    var bytes = Array(text.utf8)
    let interesting: [[UInt8]] = [
      Array("%".utf8), Array("%zz".utf8), Array("\r\n".utf8), Array("\n".utf8), Array(":".utf8), [0], [0xFF, 0xFE],
      Array("../".utf8), Array("-1".utf8), Array("99999999999999999999".utf8), Array(" ".utf8), Array("\r\n\r\n".utf8),
      Array("Content-Length: 7\r\n".utf8), Array("Transfer-Encoding: chunked\r\n".utf8), Array("ffffffff\r\n".utf8),
    ]
    for _ in 0..<Int.random(in: 1...6, using: &rng) {
      guard !bytes.isEmpty else { break }
      let at = Int.random(in: 0..<bytes.count, using: &rng)
      switch Int.random(in: 0..<6, using: &rng) {
      case 0: bytes[at] = UInt8.random(in: 0...255, using: &rng)
      case 1: bytes.remove(at: at)
      case 2: bytes.insert(contentsOf: interesting.randomElement(using: &rng)!, at: at)
      case 3: bytes = Array(bytes[..<at])
      case 4:
        let n = Int.random(in: 1...64, using: &rng)
        bytes.insert(contentsOf: (0..<n).map { _ in UInt8.random(in: 0...255, using: &rng) }, at: at)
      default:
        let end = min(bytes.count, at + Int.random(in: 1...16, using: &rng))
        bytes.insert(contentsOf: bytes[at..<end], at: at)
      }
    }
    return Data(bytes)
  }

  @Test func mutatedRequestsNeverCrashOrEscape() async throws {
    try await offPool { try self.mutatedRequestsNeverCrashOrEscapeBlocking() }
  }

  func mutatedRequestsNeverCrashOrEscapeBlocking() throws {
    let environment = ProcessInfo.processInfo.environment
    let count = environment["BUCKETFS_FUZZ_INPUTS"].flatMap(Int.init) ?? 2500
    let seed = environment["BUCKETFS_FUZZ_SEED"].flatMap(UInt64.init) ?? 20261130
    let parent = FileManager.default.temporaryDirectory.appendingPathComponent("emu-fuzz-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: parent) }
    let root = parent.appendingPathComponent("root")
    var config = StorageEmulator.Configuration(root: root)
    config.port = 0
    config.limits.headerTimeout = .seconds(2)
    config.limits.idleTimeout = .seconds(2)
    let emulator = try StorageEmulator(config)
    defer { emulator.stop() }
    _ = rawExchange(
      port: emulator.port,
      Data("POST /v0/b/bk/o?name=file.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\nConnection: close\r\n\r\n0123456789".utf8))
    var rng = SeededGenerator(seed: seed)
    var failures: [String] = []
    for i in 0..<count {
      let input = i % 10 == 9
        ? Data((0..<Int.random(in: 1...3000, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) })
        : Self.mutate(Self.templates.randomElement(using: &rng)!, &rng)
      let response = rawExchange(port: emulator.port, input, timeout: 10)
      let status = statusLine(response)
      if status.hasPrefix("HTTP/1.1 5") || (!response.isEmpty && !status.hasPrefix("HTTP/1.1 ")) {
        failures.append("input \(i) (seed \(seed)): \(input.prefix(80).map { String(format: "%02x", $0) }.joined()) → \(status.debugDescription)")
      }
      if failures.count > 5 { break }
    }
    #expect(failures.isEmpty, "\(failures.joined(separator: "\n"))")
    // Still up, and nothing beside the root.
    let alive = rawExchange(port: emulator.port, Data("GET /v0/b/bk/o/file.txt?alt=media HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8))
    #expect(alive.hasSuffix("0123456789"))
    #expect(try FileManager.default.contentsOfDirectory(atPath: parent.path) == ["root"])
  }
}
