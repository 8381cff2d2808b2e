import Foundation
import TestSupport
import Testing

func runBucketfs(_ args: [String], home: URL) -> (Int32, String) {
  let p = Process()
  p.executableURL = URL(fileURLWithPath: bucketfsBinary)
  p.arguments = args
  var env = ProcessInfo.processInfo.environment
  env["HOME"] = home.path
  p.environment = env
  let err = Pipe()
  p.standardError = err
  p.standardOutput = FileHandle.nullDevice
  try? p.run()
  try? err.fileHandleForWriting.close()
  let text = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
  p.waitUntilExit()
  return (p.terminationStatus, text)
}

@Suite(.serialized) struct MountCommandTests {
  @Test func refusedMountsFailAtOnceAndLeaveNothingMounted() async throws {
    try await MountFixture.scope(token: "sekret") { fx in
      let mp = try fx.folder("target")
      let stage = "staging_dir=\(fx.root.appendingPathComponent("st").path)"
      func mounted() -> Bool {
        ((try? String(contentsOfFile: "/proc/mounts", encoding: .utf8)) ?? "").contains(mp.path)
      }
      var (status, err) = runBucketfs(["mount", "gs://b", fx.root.appendingPathComponent("missing").path, "--emulator", fx.address, "-o", stage], home: fx.root)
      #expect(status != 0 && err.contains("missing"))
      (status, err) = runBucketfs(["mount", "gs://b", mp.path, "--emulator", fx.address, "-o", stage], home: fx.root)
      #expect(status == 4 && err.contains("not authenticated"), "\(err)")
      #expect(!mounted())
      let badToken = fx.root.appendingPathComponent("bad-token")
      try Data("nope".utf8).write(to: badToken)
      (status, err) = runBucketfs(["mount", "gs://b", mp.path, "--emulator", fx.address, "--token-file", badToken.path, "-o", stage], home: fx.root)
      #expect(status == 4 && err.contains("permission denied") && !err.contains("nope"))
      #expect(!mounted())
      (status, err) = runBucketfs(["mount", "gs://b", mp.path, "--emulator", "127.0.0.1:1", "-o", stage], home: fx.root)
      #expect(status == 5 && err.contains("unreachable"))
      #expect(!mounted())
      (status, err) = runBucketfs(["mount", "gs://b", mp.path, "--emulator", fx.address, "-o", "bogus_option"], home: fx.root)
      #expect(status == 2 && err.contains("bogus_option"))
    }
  }

  @Test func backgroundMountReturnsWhenReadyAndUnmountsWithFusermount() async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("hello.txt", Data("hi".utf8))
      let mp = try fx.folder("bg")
      let (status, err) = runBucketfs(
        ["mount", "gs://mnt-bucket", mp.path, "--emulator", fx.address, "-o", "staging_dir=\(fx.root.appendingPathComponent("st").path)"],
        home: fx.root)
      #expect(status == 0, "\(err)")
      // Usable as soon as the command returns.
      #expect(try readFile(mp.appendingPathComponent("hello.txt").path).get() == Data("hi".utf8))
      let log = (try? String(contentsOf: fx.root.appendingPathComponent(".cache/bucketfs/mount.log"), encoding: .utf8)) ?? ""
      let pid = log.range(of: "bucketfs[").flatMap { r in Int32(log[r.upperBound...].prefix(while: { $0.isNumber })) }
      #expect(pid != nil)
      // A second mount on the same folder is refused as busy.
      let (busy, busyErr) = runBucketfs(["mount", "gs://mnt-bucket", mp.path, "--emulator", fx.address], home: fx.root)
      #expect(busy != 0 && busyErr.contains("busy"))
      let u = Process()
      u.executableURL = URL(fileURLWithPath: "/bin/fusermount3")
      u.arguments = ["-u", mp.path]
      try u.run()
      u.waitUntilExit()
      #expect(u.terminationStatus == 0)
      if let pid {
        var gone = false
        for _ in 0..<100 {
          if kill(pid, 0) != 0 { gone = true; break }
          try await Task.sleep(for: .milliseconds(50))
        }
        if !gone { kill(pid, SIGKILL) }
        #expect(gone, "the daemon should exit after fusermount3 -u")
      }
    }
  }

  @Test func foregroundMountUnmountsOnSigterm() async throws {
    try await MountFixture.scope { fx in
      let m = try fx.mount()
      kill(m.process.processIdentifier, SIGTERM)
      _ = await eventually(timeout: .seconds(5)) { !m.process.isRunning }
      #expect(!m.process.isRunning)
      #expect(!m.isMounted)
    }
  }
}
