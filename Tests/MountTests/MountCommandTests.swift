import Foundation
import ChildProcess
import TestSupport
import Testing

func runBucketfs(_ args: [String], home: URL) -> (Int32, String) {
  var env = ProcessInfo.processInfo.environment
  env["HOME"] = home.path
  do {
    // stdout is not read: a background mount's daemon says "ready" there and goes on running.
    let child = try ChildProcess(bucketfsBinary, args, environment: env, errors: .pipe)
    let text = String(decoding: child.readToEnd(until: .now + .seconds(120)).errors, as: UTF8.self)
    return (child.wait(timeout: .seconds(120))?.status ?? -1, text)
  } catch {
    return (-1, "\(error)")
  }
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
      let (unmounted, output) = runTool("/bin/fusermount3", ["-u", mp.path])
      #expect(unmounted == 0, "\(output)")
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

  /// SIGTERM while a process waits on the mount (`bucketfs sync` for a queue that an offline
  /// mount cannot empty): the wait is answered, the daemon ends, and sync says what was left.
  /// libfuse's unmount closed the device under that request: nobody answered it and the daemon
  /// never ended.
  @Test func sigtermWhileSyncWaitsEndsBoth() async throws {
    try await MountFixture.scope { fx in
      let m = try fx.mount(options: ["writable", "offline"])
      #expect(FileManager.default.createFile(atPath: m.path("queued.txt"), contents: Data("q".utf8)))
      let said = fx.root.appendingPathComponent("sync.err").path
      let errFD = open(said, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
      defer { close(errFD) }
      let sync = try ChildProcess(
        bucketfsBinary, ["sync", m.mountpoint.path, "--timeout", "120"], environment: ProcessInfo.processInfo.environment,
        errors: .descriptor(errFD))
      defer { _ = sync.stop(grace: .seconds(1)) }
      // Until its request waits in the mount (one of its threads waits for the daemon's answer).
      let waiting = await eventually(timeout: .seconds(30)) {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(sync.pid)/task")) ?? []
        return tasks.contains { ((try? String(contentsOfFile: "/proc/\(sync.pid)/task/\($0)/wchan", encoding: .utf8)) ?? "").contains("wait_answer") }
      }
      #expect(waiting, "bucketfs sync never waited in the mount")
      m.process.send(SIGTERM)
      #expect(m.process.wait(timeout: .seconds(60)) != nil, "the daemon did not end")
      #expect(sync.wait(timeout: .seconds(60)) == .exited(1))
      let text = (try? String(contentsOfFile: said, encoding: .utf8)) ?? ""
      // The file's changes (Foundation writes a temporary file and renames it).
      #expect(text.contains("was unmounted with") && text.contains("changes waiting"), "\(text)")
      #expect(!m.isMounted)
    }
  }

  @Test func foregroundMountUnmountsOnSigterm() async throws {
    try await MountFixture.scope { fx in
      let m = try fx.mount()
      m.process.send(SIGTERM)
      _ = await eventually(timeout: .seconds(5)) { !m.process.isRunning }
      #expect(!m.process.isRunning)
      #expect(!m.isMounted)
    }
  }
}
