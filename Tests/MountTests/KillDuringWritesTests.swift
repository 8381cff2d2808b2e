import ChildProcess
import Foundation
import StorageEmulator
import TestSupport
import Testing

/// `kill -9` of the daemon while four writers and a `tar -x` write into the mount, with the server
/// refusing everything so that each change is still queued: every file whose close had returned
/// is in the bucket after a remount, byte for byte, and no object holds bytes no writer wrote.
/// The group commit made nothing fsync at close; the page cache must carry it (a local file
/// system's `kill -9` contract).
@Suite(.serialized) struct KillDuringWritesTests {
  /// A writer: up to 400 files `wN/fI` one after another, each noted in ACKED once its close
  /// returned success (Python raises when close(2) fails; a shell's redirection ignores it, and
  /// a close cut by the kill would be taken for one that returned).
  static let writer = #"""
    import os, sys
    root, n, acked = sys.argv[1:4]
    os.makedirs(f"{root}/w{n}", exist_ok=True)
    with open(acked, "a") as out:
        for i in range(400):
            try:
                with open(f"{root}/w{n}/f{i}", "w") as f:
                    f.write(f"writer {n} file {i}\n")
            except OSError:
                sys.exit(1)
            out.write(f"{i}\n")
            out.flush()
    """#

  /// Every object under `prefix`, by name.
  func objects(_ fx: MountFixture, under prefix: String, folders: Set<String>) async throws -> [String: Data] {
    var out: [String: Data] = [:]
    var names: [String] = []
    var token: String? = nil
    repeat {
      let page = try await fx.storage.reference(withPath: prefix).listPage(delimiter: nil, pageToken: token)
      names += page.items
      token = page.nextPageToken
    } while token != nil
    // Folder placeholders (`t/`) hold no bytes of anyone's.
    for name in names where !name.hasSuffix("/") {
      do {
        out[name] = try await fx.storage.reference(withPath: name).data(maxSize: 1 << 20)
      } catch {
        if !folders.contains(name) { throw error }
      }
    }
    return out
  }

  @Test(arguments: [1, 2]) func everyCloseThatReturnedOutlivesKill9(round: Int) async throws {
    try await MountFixture.scope { fx in
      let started = ContinuousClock.now
      func mark(_ what: String) { print("kill -9 round \(round): \(what) after \(ContinuousClock.now - started)") }
      let notes = try fx.folder("notes")
      let tree = try fx.folder("tree")
      var rng = SeededGenerator(seed: UInt64(400 + round))
      var sourceFiles: [String: Data] = [:]
      for d in 0..<5 {
        try FileManager.default.createDirectory(at: tree.appendingPathComponent("d\(d)"), withIntermediateDirectories: true)
        for f in 0..<40 {
          let name = "d\(d)/f\(f).bin"
          let data = randomData(Int.random(in: 1...20_000, using: &rng), using: &rng)
          try data.write(to: tree.appendingPathComponent(name))
          sourceFiles["t/" + name] = data
        }
      }
      let archive = notes.appendingPathComponent("tree.tar").path
      #expect(runTool("/bin/tar", ["-cf", archive, "-C", tree.path, "."]).0 == 0)
      let script = notes.appendingPathComponent("writer.py")
      try Self.writer.write(to: script, atomically: true, encoding: .utf8)

      let m = try fx.mount(options: ["writable", "read_timeout=2"])
      var refusing = Faults()
      refusing.errorStatus = 503
      refusing.errorFraction = 1
      // Uploads only (the Firebase API's `o?name=`): lookups and listings answer, so the writers
      // and the untar run at the disk's pace while every change stays queued.
      refusing.pathFilter = "o?name="
      fx.emulator!.setFaults(refusing)
      #expect(mkdir(m.path("t"), 0o755) == 0)
      let mountpoint = m.mountpoint.path
      // Started as processes of their own, all at once (a task each would take the task pool's
      // two threads and run them two at a time), and ended by the kill or on their own.
      var children: [ChildProcess] = []
      let python = ["/usr/local/bin/python3", "/usr/bin/python3"].first { FileManager.default.isExecutableFile(atPath: $0) } ?? "/usr/bin/python3"
      let environment = ProcessInfo.processInfo.environment
      for n in 0..<4 {
        let args = [script.path, mountpoint, String(n), notes.appendingPathComponent("acked-\(n)").path]
        children.append(try ChildProcess(python, args, environment: environment))
      }
      children.append(try ChildProcess("/bin/tar", ["-xf", archive, "-C", mountpoint + "/t"], environment: environment))
      defer {
        for child in children where child.isRunning {
          child.send(SIGKILL)
          child.wait()
        }
      }
      func acked(_ n: Int) -> [String] {
        ((try? String(contentsOf: notes.appendingPathComponent("acked-\(n)"), encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
      }
      // Killed once every writer has closed some files, in the middle of the untar or after it.
      #expect(await eventually(timeout: .seconds(60)) { (0..<4).allSatisfy { acked($0).count >= 15 } })
      mark("writers going")
      m.process.send(SIGKILL)
      m.process.wait()
      for child in children { #expect(child.wait(timeout: .seconds(60)) != nil, "a writer outlived the mount") }
      mark("writers ended")
      m.unmount()
      fx.emulator!.setFaults(Faults())

      let next = try fx.mount(options: ["writable"], name: "next")
      let (status, output) = runTool(bucketfsBinary, ["sync", next.mountpoint.path, "--timeout", "60"])
      #expect(status == 0, "\(output)\n\(next.log.split(separator: "\n").filter { $0.contains("write-back") }.joined(separator: "\n"))")
      mark("synced")
      let held = try await objects(fx, under: "", folders: ["t", "w0", "w1", "w2", "w3"])
      var checked = 0
      for n in 0..<4 {
        for i in acked(n) {
          let name = "w\(n)/f\(i)"
          #expect(held[name] == Data("writer \(n) file \(i)\n".utf8), "\(name), whose close returned: \(held[name].map { String(decoding: $0, as: UTF8.self) } ?? "missing"); \(next.log)")
          checked += 1
        }
      }
      #expect(checked >= 60)
      // Whatever else is there is whole: a writer's file past its last acknowledged one (closed,
      // not yet noted), or the untar's files, each its own bytes.
      var untarred = 0
      for (name, bytes) in held {
        if name.hasPrefix("t/") {
          #expect(bytes == sourceFiles[name], "\(name) holds \(bytes.count) bytes that are not its own")
          untarred += 1
        } else if let slash = name.firstIndex(of: "/") {
          let n = name[name.index(after: name.startIndex)..<slash]
          let i = name[name.index(slash, offsetBy: 2)...]
          // The file a writer had open at the kill: absent, or whole; never part of one.
          #expect(bytes == Data("writer \(n) file \(i)\n".utf8), "\(name)")
        }
      }
      mark("\(checked) acknowledged files checked, \(untarred) untarred files whole")
    }
  }
}
