import Foundation
import StorageCore
import TestSupport
import Testing

/// A file someone else replaced while the mount held a cached answer about it (the version it
/// wrote itself, here): a new `open` reads or appends to the newest version the server has, it
/// never fails with ESTALE, on both APIs and whatever metadata_ttl is.
@Suite(.serialized) struct ReplacedElsewhereTests {
  @Test(arguments: ["firebase", "gcs"]) func aNewOpenOfAFileReplacedElsewhereGetsTheNewestVersion(api: String) async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("f", Data("short\n".utf8))
      let m = try fx.mount(options: ["writable", "metadata_ttl=3600"], extra: ["--api", api], name: api)
      #expect(appendLine("A1", to: m.path("f")))
      let (status, output) = runTool(bucketfsBinary, ["sync", m.mountpoint.path, "--timeout", "60"])
      #expect(status == 0, "\(output)")
      #expect(try readFile(m.path("f")).get() == Data("short\nA1\n".utf8))
      _ = try await fx.put("f", Data("short\nA1\nOUTSIDE\n".utf8))
      // Every cache here lasts an hour, and each holds the version the mount wrote.
      let read = readFile(m.path("f"))
      #expect(read.map { $0.starts(with: Data("short\nA1\n".utf8)) } == .success(true), "\(read)")
      #expect(appendLine("A2", to: m.path("f")), "an append opened after the change failed")
      #expect(runTool(bucketfsBinary, ["sync", m.mountpoint.path, "--timeout", "60"]).0 == 0)
      let held = try await fx.storage.reference(withPath: "f").data(maxSize: 1 << 20)
      #expect(String(decoding: held, as: UTF8.self) == "short\nA1\nOUTSIDE\nA2\n")
      #expect(try readFile(m.path("f")).get() == held)
    }
  }

  func appendLine(_ line: String, to path: String) -> Bool {
    let fd = open(path, O_WRONLY | O_APPEND)
    guard fd >= 0 else { return false }
    let bytes = Array((line + "\n").utf8)
    let written = write(fd, bytes, bytes.count)
    return close(fd) == 0 && written == bytes.count
  }
}
