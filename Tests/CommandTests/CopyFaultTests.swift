import Foundation
import ChildProcess
import TestSupport
import Testing

/// `bucketfs cp` against a server that resets, stalls, or is interrupted by the user.
@Suite(.serialized) struct CopyFaultTests {
  /// Uploads `bytes` as gs://bk/NAME with a well-behaved server on `root`.
  func seed(_ root: URL, _ name: String, _ bytes: Data) throws {
    let server = try ServeProcess(root: root)
    defer { server.stop() }
    let file = root.deletingLastPathComponent().appendingPathComponent("seed-\(UUID().uuidString)")
    try bytes.write(to: file)
    defer { try? FileManager.default.removeItem(at: file) }
    let r = try runBucketfs(["cp", "--no-progress", file.path, "gs://bk/\(name)", "--emulator", server.address])
    try #require(r.status == 0, "seeding failed: \(r.stderr)")
  }

  func scratch() throws -> URL {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cli-faults-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    return dir
  }

  func leftovers(_ dir: URL) -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []).filter { $0.hasSuffix(".part") }
  }

  /// A reset every 100 KB: each attempt resumes where the last broke, so the copy (and cat)
  /// completes.
  @Test func copyAndCatCompleteUnderPersistentResets() throws {
    let dir = try scratch()
    defer { try? FileManager.default.removeItem(at: dir) }
    let root = dir.appendingPathComponent("server")
    let data = Data((0..<(8 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 9) })
    try seed(root, "resets.bin", data)
    try scope(ServeProcess(extraArgs: ["--reset-after", "100000"], root: root)) { server in
      let out = dir.appendingPathComponent("out.bin")
      let started = Date()
      let r = try runBucketfs(["cp", "--no-progress", "gs://bk/resets.bin", out.path, "--emulator", server.address], timeout: 120)
      #expect(r.status == 0, "\(r.stderr)")
      #expect(try Data(contentsOf: out) == data)
      #expect(Date().timeIntervalSince(started) < 60)
      #expect(leftovers(dir).isEmpty)
      // cat streams by the same rule: each attempt resumes where the bytes written end, on both
      // APIs, for the whole object and a range.
      for api in ["firebase", "gcs"] {
        let whole = try runBucketfs(["cat", "gs://bk/resets.bin", "--api", api, "--emulator", server.address], timeout: 120)
        #expect(whole.status == 0 && whole.stdout == data, "\(api): \(whole.stdout.count) bytes, \(whole.stderr)")
        let part = try runBucketfs(
          ["cat", "gs://bk/resets.bin", "--range", "1000-5000000", "--api", api, "--emulator", server.address], timeout: 120)
        #expect(part.status == 0 && part.stdout == data.subdata(in: 1000..<5_000_001), "\(api): \(part.stderr)")
      }
    }
  }

  /// A server that stalls on every download: cp ends within its retry time with a clear line.
  @Test func copyFromStalledServerEndsWithinTheRetryTime() throws {
    let dir = try scratch()
    defer { try? FileManager.default.removeItem(at: dir) }
    let root = dir.appendingPathComponent("server")
    try seed(root, "stall.bin", Data(repeating: 7, count: 4 << 20))
    try scope(ServeProcess(extraArgs: ["--stall-after", "1000000"], root: root)) { server in
      let started = Date()
      let r = try runBucketfs(
        ["cp", "--no-progress", "gs://bk/stall.bin", dir.appendingPathComponent("out.bin").path, "--emulator", server.address,
         "--timeout", "2"], timeout: 60)
      let elapsed = Date().timeIntervalSince(started)
      #expect(r.status == 5, "status \(r.status): \(r.stderr)")
      #expect(r.stderr.contains("stopped answering"), "\(r.stderr)")
      #expect(elapsed < 4, "cp took \(elapsed) s with --timeout 2")
      #expect(leftovers(dir).isEmpty)
      #expect(!FileManager.default.fileExists(atPath: dir.appendingPathComponent("out.bin").path))
    }
  }

  /// SIGINT or SIGTERM mid-download: cp ends at once and removes its partial file.
  @Test(arguments: [SIGINT, SIGTERM]) func interruptedCopyLeavesNoPartialFile(signal: Int32) throws {
    let dir = try scratch()
    defer { try? FileManager.default.removeItem(at: dir) }
    let root = dir.appendingPathComponent("server")
    try seed(root, "slow.bin", Data(repeating: 9, count: 4 << 20))
    try scope(ServeProcess(extraArgs: ["--stall-after", "1000000"], root: root)) { server in
      let process = try ChildProcess(
        bucketfsBinary,
        ["cp", "--no-progress", "gs://bk/slow.bin", dir.appendingPathComponent("out.bin").path, "--emulator", server.address],
        environment: ProcessInfo.processInfo.environment)
      // Wait until the partial file holds the bytes sent before the stall.
      let deadline = Date().addingTimeInterval(15)
      while leftovers(dir).isEmpty && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
      #expect(!leftovers(dir).isEmpty, "no partial file appeared")
      process.send(signal)
      var ended = process.wait(timeout: .seconds(5))
      if ended == nil {
        process.send(SIGKILL)
        ended = process.wait()
      }
      #expect(ended == .exited(128 + signal))
      #expect(leftovers(dir).isEmpty, "left \(leftovers(dir))")
    }
  }
}
