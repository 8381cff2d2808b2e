import ChildProcess
import Foundation
import StorageCore
import Synchronization
import TestSupport
import Testing

/// A new file is written by the kernel itself (FUSE passthrough into its edit's file): no WRITE
/// reaches the daemon, and still every close is kept, every fsync reaches the bucket, a
/// descriptor left open after a close keeps writing into what goes up, and a `kill -9` loses
/// nothing a close returned.
@Suite(.serialized) struct KernelWriteTests {
  func sync(_ m: MountedBucket) -> (Int32, String) {
    runTool(bucketfsBinary, ["sync", m.mountpoint.path, "--timeout", "30"])
  }

  func object(_ fx: MountFixture, _ name: String) async -> Data? {
    try? await fx.storage.reference(withPath: name).data(maxSize: 64 << 20)
  }

  /// How many requests of `operation` the daemon answered so far (its metrics page).
  func count(_ operation: String, _ m: MountedBucket) async throws -> Int {
    let url = "http://127.0.0.1:\(try await metricsPort(m))/metrics"
    let page = String(decoding: try await HTTPClient.shared.send(HTTPRequest(method: "GET", url: url)).body, as: UTF8.self)
    let prefix = "bucketfs_fuse_operation_seconds_count{operation=\"\(operation)\"} "
    return page.split(separator: "\n").first { $0.hasPrefix(prefix) }.flatMap { Int($0.dropFirst(prefix.count)) } ?? 0
  }

  func write(_ fd: Int32, _ bytes: Data) {
    let n = bytes.withUnsafeBytes { Foundation.write(fd, $0.baseAddress, $0.count) }
    #expect(n == bytes.count, "write: \(n < 0 ? String(cString: strerror(errno)) : "\(n) bytes")")
  }

  /// `name` created (the kernel writes it) in a new folder, open for writing.
  func createdInNewFolder(_ m: MountedBucket, _ name: String) -> Int32 {
    #expect(mkdir(m.path((name as NSString).deletingLastPathComponent), 0o755) == 0)
    let fd = open(m.path(name), O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    #expect(fd >= 0, "\(String(cString: strerror(errno)))")
    return fd
  }

  /// `name` made in a new folder with `first` written, then closed once while a dup of its
  /// descriptor stays open (as a child's copy would): that dup.
  func closedOnceStillOpen(_ m: MountedBucket, _ name: String, _ first: String) -> Int32 {
    let fd = createdInNewFolder(m, name)
    write(fd, Data(first.utf8))
    let other = dup(fd)
    #expect(close(fd) == 0)
    return other
  }

  @Test func aNewFileIsWrittenByTheKernel() async throws {
    try await MountFixture.scope { fx in
      let m = try fx.mount(options: ["writable", "metrics=127.0.0.1:0"])
      let data = randomData(24 << 20, seed: 4040)
      let writesBefore = try await count("write", m)
      #expect(mkdir(m.path("k"), 0o755) == 0)
      let fd = open(m.path("k/big.bin"), O_WRONLY | O_CREAT | O_TRUNC, 0o644)
      #expect(fd >= 0, "\(String(cString: strerror(errno)))")
      for start in stride(from: 0, to: data.count, by: 1 << 20) { write(fd, data[start..<min(start + (1 << 20), data.count)]) }
      // Read back through the mount while still open, size and bytes.
      var st = stat()
      #expect(fstat(fd, &st) == 0 && st.st_size == data.count)
      #expect(close(fd) == 0)
      #expect(try await count("write", m) == writesBefore, "WRITE requests reached the daemon")
      #expect(m.stat("files written by passthrough") == "1")
      #expect(try readFile(m.path("k/big.bin"), chunk: 1 << 20).get() == data)
      let (status, output) = sync(m)
      #expect(status == 0, "\(output)")
      #expect(await object(fx, "k/big.bin") == data)
      // Ordinary tools: a shell's output, an append, tar's mode and times.
      let (shell, said) = runTool(
        "/bin/sh", ["-c", "set -e; cd '\(m.mountpoint.path)/k'; printf 'one\\n' > s.txt; printf 'two\\n' >> s.txt; touch -d @1000000000 s.txt; chmod 600 s.txt"])
      #expect(shell == 0, "\(said)")
      #expect(sync(m).0 == 0)
      #expect(await object(fx, "k/s.txt") == Data("one\ntwo\n".utf8))
      let again = try fx.mount(name: "again")
      var shown = stat()
      #expect(lstat(again.path("k/s.txt"), &shown) == 0)
      #expect(shown.st_mtim.tv_sec == 1_000_000_000 && shown.st_mode & 0o777 == 0o600, "mtime \(shown.st_mtim.tv_sec), mode \(String(shown.st_mode & 0o777, radix: 8))")
    }
  }

  /// tar sets a file's times, owner and mode on its descriptor before closing it: they go up
  /// with the bytes, one change a file, exactly (a time to the nanosecond).
  @Test func tarsModesAndTimesGoWithTheBytes() async throws {
    try await MountFixture.scope { fx in
      let work = try fx.folder("tar")
      let archive = work.appendingPathComponent("t.tar").path
      let made = """
        import tarfile, io
        with tarfile.open('\(archive)', 'w', format=tarfile.PAX_FORMAT) as t:
            for name, mode, mtime, data in [('a.txt', 0o640, 1234567890.123456789, b'alpha'), ('d/b.bin', 0o600, 1500000000, b'\\x00\\x01' * 5000), ('d/c.sh', 0o755, 1600000000.5, b'#!/bin/sh\\n')]:
                info = tarfile.TarInfo(name); info.mode = mode; info.mtime = mtime; info.size = len(data)
                t.addfile(info, io.BytesIO(data))
        """
      #expect(runTool("/usr/bin/python3", ["-c", made]).0 == 0)
      let m = try fx.mount(options: ["writable"])
      let doneBefore = m.queueDone ?? 0
      let (status, output) = runTool("/bin/tar", ["-xf", archive, "-C", m.mountpoint.path])
      #expect(status == 0, "\(output)")
      #expect(sync(m).0 == 0)
      // The three files and d/'s placeholder (with its mode and times).
      #expect((m.queueDone ?? 0) - doneBefore == 4, "\(m.stat("write-back queue") ?? "")")
      #expect(m.stat("files written by passthrough") == "3")
      #expect(await object(fx, "d/b.bin") == Data(Array(repeating: [UInt8(0), 1], count: 5000).joined()))
      // What the same tar gives on the local disk, time for time.
      let local = try fx.folder("local")
      #expect(runTool("/bin/tar", ["-xf", archive, "-C", local.path]).0 == 0)
      let again = try fx.mount(name: "again")
      for name in ["a.txt", "d/b.bin", "d/c.sh"] {
        var st = stat()
        var want = stat()
        #expect(lstat(again.path(name), &st) == 0 && lstat(local.appendingPathComponent(name).path, &want) == 0)
        #expect(st.st_mode & 0o7777 == want.st_mode & 0o7777, "\(name): mode \(String(st.st_mode & 0o7777, radix: 8))")
        #expect(st.st_mtim.tv_sec == want.st_mtim.tv_sec && st.st_mtim.tv_nsec == want.st_mtim.tv_nsec, "\(name): \(st.st_mtim) for \(want.st_mtim)")
      }
      var st = stat()
      #expect(lstat(again.path("a.txt"), &st) == 0 && st.st_mtim.tv_nsec != 0, "a time with nanoseconds")
    }
  }

  /// A descriptor still open after another close of the file (a dup, a child's copy) writes on
  /// into the same file: `bucketfs sync` sends what it holds then, and its own close the rest.
  @Test func aDescriptorLeftOpenAfterACloseWritesOn() async throws {
    try await MountFixture.scope { fx in
      let m = try fx.mount(options: ["writable"])
      let other = closedOnceStillOpen(m, "d/log.txt", "first\n")
      write(other, Data("second\n".utf8))
      var (status, output) = sync(m)
      #expect(status == 0, "\(output)")
      #expect(await object(fx, "d/log.txt") == Data("first\nsecond\n".utf8))
      write(other, Data("third\n".utf8))
      #expect(close(other) == 0)
      (status, output) = sync(m)
      #expect(status == 0, "\(output)")
      #expect(await object(fx, "d/log.txt") == Data("first\nsecond\nthird\n".utf8))
    }
  }

  /// fsync waits for the bucket with the bytes written so far, and the writes after it go on
  /// into the file, which its close sends.
  @Test func writesAfterAnFsyncGoOn() async throws {
    try await MountFixture.scope { fx in
      let m = try fx.mount(options: ["writable"])
      #expect(mkdir(m.path("f"), 0o755) == 0)
      let fd = open(m.path("f/db.bin"), O_RDWR | O_CREAT | O_TRUNC, 0o644)
      #expect(fd >= 0)
      let head = randomData(300_000, seed: 11)
      let tail = randomData(200_000, seed: 12)
      write(fd, head)
      #expect(fsync(fd) == 0)
      #expect(await object(fx, "f/db.bin") == head)
      write(fd, tail)
      #expect(try pread(fd, offset: 0, count: head.count + tail.count).get() == head + tail)
      #expect(close(fd) == 0)
      let (status, output) = sync(m)
      #expect(status == 0, "\(output)")
      #expect(await object(fx, "f/db.bin") == head + tail)
    }
  }

  /// Renamed while a descriptor still writes it: the bytes written after go under the new name,
  /// and the old name is gone.
  @Test func renamedWhileStillWritten() async throws {
    try await MountFixture.scope { fx in
      let m = try fx.mount(options: ["writable"])
      let other = closedOnceStillOpen(m, "r/part.tmp", "1")
      #expect(rename(m.path("r/part.tmp"), m.path("r/done.txt")) == 0)
      write(other, Data("2".utf8))
      #expect(close(other) == 0)
      let (status, output) = sync(m)
      #expect(status == 0, "\(output)")
      #expect(await object(fx, "r/done.txt") == Data("12".utf8))
      #expect(await object(fx, "r/part.tmp") == nil)
      #expect(try readFile(m.path("r/done.txt")).get() == Data("12".utf8))
    }
  }

  /// `kill -9` while a descriptor still writes a file another close returned: the next mount
  /// sends the file as the kernel left it, which starts with every byte that close returned.
  @Test func aKillWhileAClosedFileIsStillWrittenLosesNothingClosed() async throws {
    try await MountFixture.scope { fx in
      let m = try fx.mount(options: ["writable"])
      let other = closedOnceStillOpen(m, "c/kept.txt", "closed\n")
      write(other, Data("after\n".utf8))
      m.process.send(SIGKILL)
      m.process.wait()
      close(other)
      m.unmount()
      let next = try fx.mount(options: ["writable"], name: "next")
      let (status, output) = sync(next)
      #expect(status == 0, "\(output)")
      let held = await object(fx, "c/kept.txt")
      #expect(held == Data("closed\nafter\n".utf8), "\(held.map { String(decoding: $0, as: UTF8.self) } ?? "missing"); \(next.log)")
    }
  }

  /// A queue near its budget (`staging_size`) writes new files through the daemon, which
  /// refuses a write past it: the kernel would write past any budget.
  @Test func aSmallBudgetKeepsWritesInTheDaemon() async throws {
    try await MountFixture.scope { fx in
      let m = try fx.mount(options: ["writable", "staging_size=64M", "metrics=127.0.0.1:0"])
      let before = try await count("write", m)
      let (status, output) = runTool("/bin/sh", ["-c", "printf 'through the daemon' > '\(m.path("b.txt"))'"])
      #expect(status == 0, "\(output)")
      #expect(try await count("write", m) > before)
      #expect(sync(m).0 == 0)
      #expect(await object(fx, "b.txt") == Data("through the daemon".utf8))
    }
  }

  /// Runs `body` while a thread dups and closes `fd` over and over, as the exits of children a
  /// program forks close their copies of its descriptors (each a close of the file).
  func withClosesOfCopies(of fd: Int32, _ body: () async -> Void) async {
    let stop = Atomic(false)
    let closer = Thread {
      while !stop.load(ordering: .acquiring) {
        let copy = dup(fd)
        if copy >= 0 { close(copy) }
      }
    }
    closer.start()
    await body()
    stop.store(true, ordering: .releasing)
    #expect(await eventually { closer.isFinished })
  }

  /// Writes a line to `fd`, fsyncs it, and expects the bucket's `name` to hold all that
  /// `written` holds then; false when it does not.
  func fsyncReachesTheBucket(_ fd: Int32, _ fx: MountFixture, _ name: String, _ written: inout Data, round: Int) async -> Bool {
    let line = Data("line \(round)\n".utf8)
    write(fd, line)
    written += line
    #expect(fsync(fd) == 0)
    let held = await object(fx, name)
    #expect(held == written, "round \(round): \(held.map { "\($0.count) bytes" } ?? "missing")")
    return held == written
  }

  /// A program that forks children which just exit fsyncs what it wrote: every fsync returns
  /// with those bytes in the bucket. Each close queued the file to go when its last writer is
  /// gone, in place of the copy the fsync sent and waited for, which then waited read_timeout
  /// and returned with nothing uploaded (adversary a6).
  @Test func anFsyncBesideClosesOfItsCopiesReachesTheBucket() async throws {
    try await MountFixture.scope { fx in
      let m = try fx.mount(options: ["writable"])
      let fd = createdInNewFolder(m, "f/log.txt")
      var written = Data()
      await withClosesOfCopies(of: fd) {
        for round in 0..<40 {
          guard await fsyncReachesTheBucket(fd, fx, "f/log.txt", &written, round: round) else { break }
        }
      }
      #expect(close(fd) == 0)
      let (status, output) = sync(m)
      #expect(status == 0, "\(output)")
      #expect(await object(fx, "f/log.txt") == written)
    }
  }

  /// The same file renamed while it is written (and its copies closed): the fsyncs after the
  /// rename reach the bucket under the new name. The bytes the closes held under the old name
  /// went before the old name's delete, which waited for the writer's end, and every upload
  /// after it with it (adversary f1: each fsync took read_timeout, nothing uploaded).
  @Test func anFsyncAfterARenameWhileWrittenReachesTheBucket() async throws {
    try await MountFixture.scope { fx in
      let m = try fx.mount(options: ["writable"])
      let fd = createdInNewFolder(m, "r/part")
      var written = Data()
      await withClosesOfCopies(of: fd) {
        guard await fsyncReachesTheBucket(fd, fx, "r/part", &written, round: 0) else { return }
        #expect(rename(m.path("r/part"), m.path("r/done")) == 0)
        for round in 1..<20 {
          guard await fsyncReachesTheBucket(fd, fx, "r/done", &written, round: round) else { break }
        }
      }
      #expect(close(fd) == 0)
      let (status, output) = sync(m)
      #expect(status == 0, "\(output)")
      #expect(await object(fx, "r/done") == written)
      #expect(await object(fx, "r/part") == nil, "\(m.log)")
    }
  }

  /// A file the kernel still writes holds up only its own name: an `rm` of another file while
  /// a script writes its log, then a new file, and the new file reaches the bucket with the
  /// log still open (it waited for the log's last close).
  @Test func aFileStillWrittenHoldsUpNoOtherName() async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("gone.txt", Data("old".utf8))
      let m = try fx.mount(options: ["writable"])
      let log = closedOnceStillOpen(m, "w/log.txt", "one\n")
      #expect(unlink(m.path("gone.txt")) == 0)
      #expect(FileManager.default.createFile(atPath: m.path("new.txt"), contents: Data("new".utf8)))
      #expect(await eventually { await object(fx, "new.txt") == Data("new".utf8) }, "\(m.stat("write-back queue") ?? "")")
      #expect(await object(fx, "gone.txt") == nil)
      // The log itself removed while written (its held bytes would go only to be deleted once
      // the writer ends, and the delete held up every upload after it: adversary g6).
      let other = closedOnceStillOpen(m, "v/log.txt", "two\n")
      #expect(unlink(m.path("v/log.txt")) == 0)
      write(other, Data("more\n".utf8))
      #expect(FileManager.default.createFile(atPath: m.path("new2.txt"), contents: Data("new2".utf8)))
      #expect(await eventually { await object(fx, "new2.txt") == Data("new2".utf8) }, "\(m.stat("write-back queue") ?? "")")
      #expect(close(log) == 0 && close(other) == 0)
      let (status, output) = sync(m)
      #expect(status == 0, "\(output)")
      #expect(await object(fx, "w/log.txt") == Data("one\n".utf8))
      #expect(await object(fx, "v/log.txt") == nil)
    }
  }

  /// `bucketfs sync` beside a shell script whose output goes to a file of the mount and which
  /// runs commands (each closes the inherited output once it ends): it sends what the file
  /// holds and exits 0, as sync(1) returns beside a file still being written. Into a new file (`>`, the kernel writes it) sync exited 1
  /// ("still open for writing") with nothing in the bucket (adversary a7); onto an object
  /// (`>>`, through the daemon) each close put the upload off again, so nothing went up while
  /// the script ran (now the bucket keeps up) and sync waited for its whole timeout (adversary f3).
  @Test(arguments: [">", ">>"]) func syncBesideAScriptThatRunsCommands(redirect: String) async throws {
    try await MountFixture.scope { fx in
      if redirect == ">>" { _ = try await fx.put("s/out.log", Data("INIT\n".utf8)) }
      let m = try fx.mount(options: ["writable"])
      let flag = try fx.folder("flag").appendingPathComponent("stop").path
      if redirect == ">" { #expect(mkdir(m.path("s"), 0o755) == 0) }
      let script = "i=0; while [ ! -e '\(flag)' ]; do /bin/true; echo \"line $i\"; i=$((i+1)); done \(redirect) '\(m.path("s/out.log"))'"
      let child = try ChildProcess("/bin/sh", ["-c", script], environment: ["PATH": "/usr/bin:/bin"])
      defer { if child.wait(timeout: .zero) == nil { _ = child.stop() } }
      if redirect == ">>" {
        #expect(await eventually { (await object(fx, "s/out.log")?.count ?? 0) > 2_000 }, "nothing went up while the script ran")
      } else {
        // The kernel's writes go up when the last writer closes, or with an fsync or sync.
        #expect(await eventually { (try? readFile(m.path("s/out.log")).get().count) ?? 0 > 2_000 })
      }
      let before = try readFile(m.path("s/out.log")).get()
      var (status, output) = sync(m)
      #expect(status == 0, "\(output)")
      let sent = await object(fx, "s/out.log") ?? Data()
      let after = try readFile(m.path("s/out.log")).get()
      #expect(sent.count >= before.count && sent.starts(with: before) && after.starts(with: sent), "\(before.count) bytes before, \(sent.count) sent")
      #expect(FileManager.default.createFile(atPath: flag, contents: nil))
      #expect(child.wait(timeout: .seconds(60)) != nil)
      (status, output) = sync(m)
      #expect(status == 0, "\(output)")
      #expect(await object(fx, "s/out.log") == (try readFile(m.path("s/out.log")).get()))
    }
  }


  /// A writer that keeps going after another writer replaced its file grows one conflict copy,
  /// across a `kill -9` too: the bytes its later close queued go into that copy after the
  /// restart. The queue kept which copy only in memory, and after the restart a second copy
  /// was made (adversary f2, 8 of 8 with a forking writer).
  @Test(arguments: ["gcs", "firebase"]) func aConflictCopyGrowsAcrossAKill(api: String) async throws {
    try await MountFixture.scope { fx in
      let m = try fx.mount(options: ["writable"], extra: ["--api", api], name: api)
      let fd = createdInNewFolder(m, "c/f")
      write(fd, Data("one\n".utf8))
      #expect(fsync(fd) == 0)
      _ = try await fx.put("c/f", Data("theirs\n".utf8))
      write(fd, Data("two\n".utf8))
      // The fsync finds their version: ours goes beside it (the fsync may say ESTALE).
      _ = fsync(fd)
      let copies = { try await fx.storage.reference(withPath: "c").listAll().items.map(\.fullPath).filter { $0.hasPrefix("c/f.conflict-") } }
      #expect(await eventually { (try? await copies())?.count == 1 })
      // Written on, closed once (a child's exit): held until the writer's end, which a kill cuts.
      write(fd, Data("three\n".utf8))
      #expect(close(dup(fd)) == 0)
      m.process.send(SIGKILL)
      m.process.wait()
      close(fd)
      m.unmount()
      let next = try fx.mount(options: ["writable"], extra: ["--api", api], name: api + "-next")
      let (status, output) = sync(next)
      #expect(status == 0, "\(output)")
      let made = try await copies()
      #expect(made.count == 1, "\(made)")
      if let copy = made.first { #expect(await object(fx, copy) == Data("one\ntwo\nthree\n".utf8)) }
      #expect(await object(fx, "c/f") == Data("theirs\n".utf8))
    }
  }
}
