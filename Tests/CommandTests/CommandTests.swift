import Foundation
import TestSupport
import Testing

@Suite struct CommandTests {
  /// `cp -r` of 60 objects (16 at a time) opens about as many connections as it has requests in
  /// flight, not one per object.
  @Test func recursiveCopyReusesConnections() throws {
    try scope(ServeProcess()) { server in
      let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cli-\(UUID().uuidString)")
      let source = dir.appendingPathComponent("src")
      try FileManager.default.createDirectory(at: source, withIntermediateDirectories: true)
      defer { try? FileManager.default.removeItem(at: dir) }
      for i in 0..<60 { try Data(repeating: UInt8(i), count: 20_000 + i).write(to: source.appendingPathComponent("f\(i).bin")) }
      var r = try runBucketfs(["cp", "-r", "--no-progress", source.path, "gs://bk/many", "--emulator", server.address])
      #expect(r.status == 0, "\(r.stderr)")
      func accepted() throws -> Int {
        let data = Data(runTool("/usr/bin/curl", ["-sf", "http://\(server.address)/emulator/v1/stats"]).1.utf8)
        return (try JSONSerialization.jsonObject(with: data) as? [String: Any])?["connectionsAccepted"] as? Int ?? -1
      }
      let before = try accepted()
      r = try runBucketfs(["cp", "-r", "--no-progress", "gs://bk/many", dir.appendingPathComponent("back").path, "--emulator", server.address])
      #expect(r.status == 0, "\(r.stderr)")
      let opened = try accepted() - before - 1
      #expect(opened <= 20, "\(opened) connections to copy 60 objects, 16 at a time")
    }
  }

  /// A name with terminal escapes and a line break is listed with them written out, never raw.
  @Test func lsWritesControlCharactersAsEscapes() throws {
    try scope(ServeProcess()) { server in
      let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cli-\(UUID().uuidString)")
      try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
      defer { try? FileManager.default.removeItem(at: dir) }
      let local = dir.appendingPathComponent("x.txt")
      try Data("x".utf8).write(to: local)
      let evil = "evil\u{1b}]0;pwned\u{07}\u{1b}[2Jname\tand\u{9b}31m"
      var r = try runBucketfs(["cp", local.path, "gs://bk/\(evil)", "--emulator", server.address])
      #expect(r.status == 0, "\(r.stderr)")
      for args in [["ls", "gs://bk"], ["ls", "-l", "gs://bk"]] {
        r = try runBucketfs(args + ["--emulator", server.address])
        #expect(r.status == 0)
        #expect(!r.stdout.contains(0x1b) && !r.stdout.contains(0x07) && !r.stdout.contains(0x09), "\(args): \(r.out.debugDescription)")
        #expect(r.out.contains("evil\\x1b]0;pwned\\x07\\x1b[2Jname\\tand\\u{9b}31m"), "\(r.out.debugDescription)")
      }
    }
  }

  /// A download onto a full disk says so with the local-file status (6), and leaves nothing.
  @Test func cpOntoAFullDiskExitsWithTheLocalFileStatus() throws {
    try scope(ServeProcess()) { server in
      let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cli-\(UUID().uuidString)")
      let tiny = dir.appendingPathComponent("tiny")
      try FileManager.default.createDirectory(at: tiny, withIntermediateDirectories: true)
      defer { try? FileManager.default.removeItem(at: dir) }
      let local = dir.appendingPathComponent("big.bin")
      try Data(repeating: 3, count: 4 << 20).write(to: local)
      var r = try runBucketfs(["cp", local.path, "gs://bk/big.bin", "--emulator", server.address])
      #expect(r.status == 0, "\(r.stderr)")
      let mounted = runTool("/bin/mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", tiny.path])
      try #require(mounted.0 == 0, "cannot mount a tmpfs: \(mounted.1)")
      defer { _ = runTool("/bin/umount", [tiny.path]) }
      r = try runBucketfs(["cp", "--no-progress", "gs://bk/big.bin", tiny.appendingPathComponent("big.bin").path, "--emulator", server.address])
      #expect(r.status == 6, "status \(r.status): \(r.stderr)")
      #expect(r.stderr.contains("No space left on device"), "\(r.stderr)")
      #expect((try? FileManager.default.contentsOfDirectory(atPath: tiny.path))?.isEmpty == true)
    }
  }

  /// `bucketfs cat … | head -c1`: the reader going away ends the command quietly, with the
  /// status a shell shows for `cat` there (141), not "cancelled" and 130.
  @Test func catIntoAPipeThatClosesEndsQuietly() throws {
    try scope(ServeProcess()) { server in
      let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cli-\(UUID().uuidString)")
      try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
      defer { try? FileManager.default.removeItem(at: dir) }
      let local = dir.appendingPathComponent("big.bin")
      try Data(repeating: 7, count: 8 << 20).write(to: local)
      var r = try runBucketfs(["cp", local.path, "gs://bk/big.bin", "--emulator", server.address])
      #expect(r.status == 0, "\(r.stderr)")
      let script = "'\(bucketfsBinary)' cat gs://bk/big.bin --emulator \(server.address) 2>'\(dir.path)/err' | head -c1 >/dev/null; "
        + "echo \"${PIPESTATUS[0]}\"; cat '\(dir.path)/err'"
      let out = runTool("/bin/bash", ["-c", script]).1
      let lines = out.split(separator: "\n", omittingEmptySubsequences: false)
      #expect(lines.first == "141" || lines.first == "0", "status and stderr: \(out)")
      #expect(!out.contains("cancelled"), "\(out)")
      #expect(lines.dropFirst().allSatisfy { $0.isEmpty }, "stderr: \(out)")
      r = try runBucketfs(["cat", "gs://bk/big.bin", "--range", "0-3", "--emulator", server.address])
      #expect(r.status == 0 && r.stdout == Data([7, 7, 7, 7]))
    }
  }

  @Test func objectCommandsEndToEnd() throws {
    try scope(ServeProcess()) { server in
      #expect(server.port > 0)
      let emu = ["--emulator", server.address]
      let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cli-\(UUID().uuidString)")
      try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
      defer { try? FileManager.default.removeItem(at: dir) }
      let local = dir.appendingPathComponent("notes.txt")
      try Data("line one\nline two\n".utf8).write(to: local)

      var r = try runBucketfs(["cp", local.path, "gs://bk/docs/notes.txt"] + emu)
      #expect(r.status == 0, "\(r.stderr)")
      #expect(r.stderr.isEmpty)  // no progress bar when stderr is not a terminal

      r = try runBucketfs(["cp", "-", "gs://bk/docs/from-stdin.bin"] + emu, stdin: Data([0, 1, 2, 3]))
      #expect(r.status == 0)
      // Stdin into a folder has no name to take: refused, and no object "docs/sub" is made.
      r = try runBucketfs(["cp", "-", "gs://bk/docs/sub/"] + emu, stdin: Data("x".utf8))
      #expect(r.status != 0 && r.stderr.contains("needs an object name"), "\(r.status) \(r.stderr)")

      r = try runBucketfs(["ls", "gs://bk"] + emu)
      #expect(r.out == "docs/\n")
      r = try runBucketfs(["ls", "gs://bk/docs"] + emu)
      #expect(r.out == "docs/from-stdin.bin\ndocs/notes.txt\n")
      r = try runBucketfs(["ls", "-l", "gs://bk/docs"] + emu)
      #expect(r.out.contains("18  ") && r.out.contains("docs/notes.txt  text/plain"))
      r = try runBucketfs(["ls", "-r", "gs://bk"] + emu)
      #expect(r.out.split(separator: "\n").count == 2)

      r = try runBucketfs(["stat", "--json", "gs://bk/docs/notes.txt"] + emu)
      let json = try JSONSerialization.jsonObject(with: r.stdout) as? [String: Any]
      #expect(json?["size"] as? String == "18")
      #expect(json?["contentType"] as? String == "text/plain")
      #expect(json?["md5Hash"] != nil && json?["generation"] != nil)
      r = try runBucketfs(["stat", "gs://bk/docs/notes.txt"] + emu)
      #expect(r.out.contains("size: 18"))

      r = try runBucketfs(["cat", "gs://bk/docs/notes.txt"] + emu)
      #expect(r.out == "line one\nline two\n")
      r = try runBucketfs(["cat", "gs://bk/docs/notes.txt", "--range", "5-7"] + emu)
      #expect(r.out == "one")
      r = try runBucketfs(["cat", "gs://bk/docs/notes.txt", "--range", "9-"] + emu)
      #expect(r.out == "line two\n")

      let back = dir.appendingPathComponent("back.txt")
      r = try runBucketfs(["cp", "gs://bk/docs/notes.txt", back.path] + emu)
      #expect(r.status == 0)
      #expect(try Data(contentsOf: back) == Data("line one\nline two\n".utf8))
      r = try runBucketfs(["cp", "gs://bk/docs/from-stdin.bin", "-"] + emu)
      #expect(r.stdout == Data([0, 1, 2, 3]))

      r = try runBucketfs(["url", "gs://bk/docs/notes.txt"] + emu)
      #expect(r.out.hasPrefix("http://\(server.address)/v0/b/bk/o/docs%2Fnotes.txt?alt=media&token="))

      // Recursive copies both ways.
      let tree = dir.appendingPathComponent("tree")
      r = try runBucketfs(["cp", "-r", "gs://bk/docs", tree.path] + emu)
      #expect(r.status == 0, "\(r.stderr)")
      #expect(FileManager.default.fileExists(atPath: tree.appendingPathComponent("notes.txt").path))
      r = try runBucketfs(["cp", "-r", tree.path, "gs://bk/copy"] + emu)
      #expect(r.status == 0, "\(r.stderr)")
      r = try runBucketfs(["ls", "gs://bk/copy"] + emu)
      #expect(r.out == "copy/from-stdin.bin\ncopy/notes.txt\n")

      r = try runBucketfs(["rm", "-r", "gs://bk/copy"] + emu)
      #expect(r.status == 0)
      r = try runBucketfs(["rm", "gs://bk/docs/notes.txt"] + emu)
      #expect(r.status == 0)
      r = try runBucketfs(["ls", "-r", "gs://bk"] + emu)
      #expect(r.out == "docs/from-stdin.bin\n")
      #expect(server.terminate(), "serve must exit on SIGTERM")
    }
  }

  @Test func exitStatusesAndMessages() throws {
    try scope(ServeProcess()) { server in
      let emu = ["--emulator", server.address]

      var r = try runBucketfs(["stat", "gs://bk/missing.txt"] + emu)
      #expect(r.status == 3)
      #expect(r.stderr == "bucketfs stat: gs://bk/missing.txt: no such object (HTTP 404)\n")

      r = try runBucketfs(["cat", "gs://bk/missing.txt"], environment: ["FIREBASE_STORAGE_EMULATOR_HOST": server.address])
      #expect(r.status == 3)

      // Preconditions: an upload that may only create fails on an existing object, changing nothing.
      r = try runBucketfs(["cp", "-", "gs://bk/once.txt", "--if-generation-match", "0"] + emu, stdin: Data("first".utf8))
      #expect(r.status == 0)
      r = try runBucketfs(["cp", "-", "gs://bk/once.txt", "--if-generation-match", "0"] + emu, stdin: Data("second".utf8))
      #expect(r.status == 7 && r.stderr.contains("412"))
      r = try runBucketfs(["cat", "gs://bk/once.txt"] + emu)
      #expect(r.out == "first")
      r = try runBucketfs(["cp", "-", "gs://bk/once.txt", "--if-generation-match", "0", "--api", "gcs"] + emu, stdin: Data("third".utf8))
      #expect(r.status == 7)

      r = try runBucketfs(["frobnicate"])
      #expect(r.status == 2)
      r = try runBucketfs(["ls"] + emu)
      #expect(r.status == 2)
      r = try runBucketfs(["ls", "--bogus", "gs://bk"] + emu)
      #expect(r.status == 2 && r.stderr.contains("unknown option --bogus"))
      r = try runBucketfs(["cp", "/nonexistent/file", "gs://bk/x"] + emu)
      #expect(r.status == 6)
      #expect(r.stderr.contains("/nonexistent/file: no such file"))

      // Nothing listens on the stopped server's port.
      let gone = try ServeProcess()
      let goneAddress = gone.address
      gone.stop()
      r = try runBucketfs(["ls", "gs://bk", "--emulator", goneAddress])
      #expect(r.status == 5)
      #expect(r.stderr.contains("server unreachable"))

      for command in ["ls", "stat", "cat", "cp", "rm", "url", "serve", "mount"] {
        r = try runBucketfs([command, "--help"])
        #expect(r.status == 0 && r.out.contains("usage: bucketfs \(command)"), "\(command)")
      }
    }
  }

  @Test func tokensAreSentAndNeverPrinted() throws {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("tok-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: dir) }
    let good = dir.appendingPathComponent("good")
    let bad = dir.appendingPathComponent("bad")
    try Data("correct-horse-battery\n".utf8).write(to: good)
    try Data("wrong-token-value\n".utf8).write(to: bad)
    try scope(ServeProcess(extraArgs: ["--require-token", good.path])) { server in
      let emu = ["--emulator", server.address]

      var r = try runBucketfs(["ls", "gs://bk"] + emu)
      #expect(r.status == 4)
      r = try runBucketfs(["ls", "gs://bk", "--token-file", bad.path] + emu)
      #expect(r.status == 4)
      #expect(!r.stderr.contains("wrong-token-value"))
      r = try runBucketfs(["cp", "-", "gs://bk/t.txt", "--token-file", good.path] + emu, stdin: Data("t".utf8))
      #expect(r.status == 0)
      r = try runBucketfs(["cat", "gs://bk/t.txt"] + emu, environment: ["BUCKETFS_TOKEN_FILE": good.path])
      #expect(r.out == "t")
    }
  }
}
