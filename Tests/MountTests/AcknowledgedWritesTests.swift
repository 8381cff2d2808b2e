import Foundation
import StorageCore
import TestSupport
import Testing

/// What a writable mount acknowledged is never lost or spliced, whatever else changes the object
/// meanwhile: appends after another writer's change, a reader beside a writer, a failed write.
@Suite(.serialized) struct AcknowledgedWritesTests {
  func conflicts(_ fx: MountFixture, of name: String) async throws -> [String] {
    let dir = name.split(separator: "/").dropLast().joined(separator: "/")
    return try await fx.storage.reference(withPath: dir).listAll().items.map(\.fullPath).filter { $0.hasPrefix(name + ".conflict-") }.sorted()
  }

  /// The kernel cached the size of the version the mount first showed; the bucket then got a
  /// longer one elsewhere, and `>>` kept appending. Every append lands at the end of the newest
  /// version (issue 54: the first two, opened on the short version the caches still named, are
  /// carried onto the longer one), never at the size the kernel cached, which spliced them into
  /// its middle, and no conflict copy is made.
  @Test(arguments: ["firebase", "gcs"]) func appendsAfterAChangeElsewhereLandAtTheEnd(api: String) async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("f", Data("short\n".utf8))
      let m = try fx.mount(options: ["writable", "metadata_ttl=60"], extra: ["--api", api], name: api)
      #expect(try readFile(m.path("f")).get() == Data("short\n".utf8))
      let longer = "LONGER-SERVER-VERSION-0123456789\n"
      _ = try await fx.put("f", Data(longer.utf8))
      var (status, output) = m.shell("echo A1 >> f; echo A2 >> f")
      #expect(status == 0, "\(output)")
      (status, output) = m.sync()
      #expect(status == 0, "\(output)")
      (status, output) = m.shell("echo A3 >> f; echo A4 >> f")
      #expect(status == 0, "\(output)")
      (status, output) = m.sync()
      #expect(status == 0, "\(output)")
      #expect(await fx.object("f").map { String(decoding: $0, as: UTF8.self) } == longer + "A1\nA2\nA3\nA4\n")
      let copies = try await conflicts(fx, of: "f")
      #expect(copies.isEmpty, "\(copies)")
      // What the mount shows is the bucket's, size included.
      #expect(try readFile(m.path("f")).get() == Data((longer + "A1\nA2\nA3\nA4\n").utf8))
    }
  }

  /// A writer keeps appending through one open file while the object changes elsewhere: each
  /// fsync carries its lines onto the other writer's version, in order, with no conflict copy.
  @Test func aWriterThatKeepsAppendingAfterAChangeElsewhereMergesEveryLine() async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("g", Data("base\n".utf8))
      let m = try fx.mount(options: ["writable"])
      let fd = open(m.path("g"), O_WRONLY | O_APPEND | O_CLOEXEC)
      #expect(fd >= 0)
      defer { close(fd) }
      _ = try await fx.put("g", Data("theirs\n".utf8))
      for i in 0..<5 {
        let line = "ours-\(i)\n"
        #expect(write(fd, line, line.utf8.count) == line.utf8.count)
        #expect(fsync(fd) == 0, "fsync \(i): errno \(errno)")
      }
      let (status, output) = m.sync()
      #expect(status == 0, "\(output)")
      #expect(await fx.object("g") == Data(("theirs\n" + (0..<5).map { "ours-\($0)\n" }.joined()).utf8), "\(m.log)")
      #expect(try await conflicts(fx, of: "g").isEmpty)
    }
  }

  /// A logger's long-lived `O_APPEND` handle on a file it created (the kernel writes it), which
  /// fsyncs each line, beside `>>` appends through the same mount and an outside writer: each
  /// line lands once, in order. An fsync's copy queued behind the `>>` close's upload (held
  /// while the kernel writes the file) waited `read_timeout` for the logger's close, and then
  /// both carried the last line onto the bucket's version: it was there twice.
  @Test(arguments: ["firebase", "gcs"]) func aLoggersLinesLandOnceBesideOtherAppenders(api: String) async throws {
    try await MountFixture.scope { fx in
      let m = try fx.mount(options: ["writable"], extra: ["--api", api], name: api)
      let fd = open(m.path("f.log"), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644)
      #expect(fd >= 0)
      var expected = ""
      for i in 1...3 {
        let line = "L\(i)\n"
        #expect(write(fd, line, line.utf8.count) == line.utf8.count)
        #expect(fsync(fd) == 0, "fsync \(i): errno \(errno)")
        // fsync returned once the bucket had the line: the outside writer appends after it.
        let now = await fx.object("f.log") ?? Data()
        _ = try await fx.put("f.log", now + Data("S\(i)\n".utf8))
        let (status, output) = m.shell("echo P\(i) >> f.log")
        #expect(status == 0, "\(output)")
        expected += "L\(i)\nS\(i)\nP\(i)\n"
      }
      #expect(close(fd) == 0)
      let (status, output) = m.sync()
      #expect(status == 0, "\(output)")
      let held = await fx.object("f.log").map { String(decoding: $0, as: UTF8.self) }
      #expect(held == expected, "\(m.log)")
      #expect(try await conflicts(fx, of: "f.log").isEmpty)
    }
  }

  /// A writer keeps rewriting its file in place through one open file while the object changed
  /// elsewhere (not an append: it writes over the bytes it opened): its later closes grow the
  /// one conflict copy its first went to, instead of one copy each, and the object keeps theirs.
  @Test func aWriterThatKeepsRewritingAfterAConflictGrowsOneCopy() async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("g", Data("base\n".utf8))
      let m = try fx.mount(options: ["writable"])
      let fd = open(m.path("g"), O_WRONLY | O_CLOEXEC)
      #expect(fd >= 0)
      defer { close(fd) }
      _ = try await fx.put("g", Data("theirs\n".utf8))
      var mine = "base\n"
      for i in 0..<5 {
        mine = "ours-\(i)\n" + mine
        #expect(pwrite(fd, mine, mine.utf8.count, 0) == mine.utf8.count)
        // Each fsync queues and waits: the first is the conflict (ESTALE), the rest follow it.
        _ = fsync(fd)
      }
      let (status, output) = m.sync()
      #expect(status == 0, "\(output)")
      #expect(await fx.object("g") == Data("theirs\n".utf8))
      let copies = try await conflicts(fx, of: "g")
      #expect(copies.count == 1, "\(copies)")
      if let copy = copies.first {
        #expect(await fx.object(copy) == Data(mine.utf8))
      }
    }
  }

  /// A reader of a file being written reads the writer's bytes, and its close queues nothing:
  /// the bucket gets the file when the writer closes it, not half of it when a reader does.
  @Test func aReadersCloseUploadsNothingOfAWritersHalfWrittenFile() async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("doc.txt", Data("before\n".utf8))
      let m = try fx.mount(options: ["writable"])
      // Not inherited by the tools run meanwhile: their exit would close it too (a FLUSH).
      let writer = open(m.path("doc.txt"), O_WRONLY | O_TRUNC | O_CLOEXEC)
      #expect(writer >= 0)
      #expect(write(writer, "half-", 5) == 5)
      #expect(try readFile(m.path("doc.txt")).get() == Data("half-".utf8))
      // No tool is run while the writer is open: a child's exec closes its copy of every
      // descriptor, which the kernel passes on as a close (FLUSH) of the writer's file.
      let queue = try getxattr(m.mountpoint.path, "user.bucketfs.queue.wait.5000").get()
      #expect(queue.hasPrefix("0 "), "\(queue)")
      let held = await fx.object("doc.txt")
      #expect(held == Data("before\n".utf8), "a reader's close uploaded the writer's half-written bytes: \(held.map { String(decoding: $0, as: UTF8.self) } ?? "none"); \(m.log)")
      #expect(write(writer, "whole\n", 6) == 6)
      #expect(close(writer) == 0)
      let (status, output) = m.sync()
      #expect(status == 0, "\(output)")
      #expect(await fx.object("doc.txt") == Data("half-whole\n".utf8))
    }
  }
}

/// An object `a` beside objects under `a/` shows as `a.object`: what this mount writes there and
/// removes again reaches the bucket, and the folder `a` stays shown throughout.
@Suite(.serialized) struct AliasWriteTests {
  func names(_ m: MountedBucket) throws -> [String] {
    try FileManager.default.contentsOfDirectory(atPath: m.path("d")).sorted()
  }

  @Test(arguments: [true, false]) func writingThenRemovingAnAliasedObject(syncBetween: Bool) async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("d/a", Data("object a".utf8))
      _ = try await fx.put("d/a/x", Data("object a/x".utf8))
      let m = try fx.mount(options: ["writable", "metadata_ttl=60"])
      #expect(try names(m) == ["a", "a.object"])
      #expect(try readFile(m.path("d/a.object")).get() == Data("object a".utf8))
      try Data("written here\n".utf8).write(to: URL(fileURLWithPath: m.path("d/a.object")))
      #expect(try names(m) == ["a", "a.object"])
      #expect(try readFile(m.path("d/a.object")).get() == Data("written here\n".utf8))
      if syncBetween {
        let (status, output) = m.sync()
        #expect(status == 0, "\(output)")
        #expect(try await fx.storage.reference(withPath: "d/a").data(maxSize: 1 << 20) == Data("written here\n".utf8))
        #expect(try names(m) == ["a", "a.object"])
      }
      #expect(unlink(m.path("d/a.object")) == 0, "rm: \(String(cString: strerror(errno)))")
      #expect(try names(m) == ["a"])
      let (status, output) = m.sync()
      #expect(status == 0, "\(output)")
      let left = try await fx.storage.reference(withPath: "d").listAll()
      #expect(left.items.map(\.fullPath) == [], "the object is still in the bucket: \(m.log)")
      #expect(left.prefixes.map(\.fullPath) == ["d/a"])
      #expect(try names(m) == ["a"])
      #expect(try readFile(m.path("d/a/x")).get() == Data("object a/x".utf8))
    }
  }
}

/// Names at the bucket's limit, and a write that fails, through a writable mount.
@Suite(.serialized) struct WriteLimitsTests {
  /// An object name of exactly 1,024 bytes (the bucket's limit, which `bucketfs cp` takes) is
  /// made through the mount; 1,025 is refused (ENAMETOOLONG), and so is a folder whose
  /// placeholder would pass the limit.
  @Test func anObjectNameOfExactly1024BytesIsMade() async throws {
    try await MountFixture.scope { fx in
      let m = try fx.mount(options: ["writable"])
      // "long/" and four folders of 200 bytes: 809 bytes, then a name of 215 makes 1,024.
      let folders = (0..<4).map { String(repeating: Character(UnicodeScalar(UInt8(ascii: "a") + UInt8($0))), count: 200) }
      let dir = (["long"] + folders).joined(separator: "/")
      #expect(mkdir(m.path("long"), 0o755) == 0)
      var path = "long"
      for folder in folders {
        path += "/" + folder
        #expect(mkdir(m.path(path), 0o755) == 0, "mkdir: \(String(cString: strerror(errno)))")
      }
      let exact = dir + "/" + String(repeating: "x", count: 1024 - dir.utf8.count - 1)
      #expect(exact.utf8.count == 1024)
      try Data("at the limit".utf8).write(to: URL(fileURLWithPath: m.path(exact)))
      let over = dir + "/" + String(repeating: "y", count: 1025 - dir.utf8.count - 1)
      #expect(open(m.path(over), O_CREAT | O_WRONLY | O_CLOEXEC, 0o644) == -1 && errno == ENAMETOOLONG)
      // A folder's placeholder is its name and "/": 1,024 bytes of name are one too many.
      #expect(mkdir(m.path(String(exact.dropLast()) + "z"), 0o755) == -1 && errno == ENAMETOOLONG)
      let (status, output) = m.sync()
      #expect(status == 0, "\(output)")
      #expect(try await fx.storage.reference(withPath: exact).data(maxSize: 1 << 20) == Data("at the limit".utf8))
    }
  }

  /// A write the staging folder has no room for (ENOSPC) fails, and so do the fsync and close
  /// after it: the half-written file never becomes a version, and the one before stays.
  @Test func aWriteThatFailsNeverBecomesAVersion() async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("big.bin", Data("the version before\n".utf8))
      let m = try fx.mount(options: ["writable", "staging_size=1M"])
      let (status, output) = runTool("/bin/dd", ["if=/dev/zero", "of=\(m.path("big.bin"))", "bs=2M", "count=1", "conv=fsync"])
      #expect(status != 0 && output.contains("No space left on device"), "\(output)")
      let (synced, said) = m.sync()
      #expect(synced == 0, "\(said)")
      let held = try await fx.storage.reference(withPath: "big.bin").data(maxSize: 4 << 20)
      #expect(held == Data("the version before\n".utf8), "\(held.count) bytes; \(m.log)")
      #expect(try readFile(m.path("big.bin")).get() == Data("the version before\n".utf8))
    }
  }
}
