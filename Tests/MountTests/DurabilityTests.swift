import ChildProcess
import Foundation
import StorageCore
import StorageEmulator
import TestSupport
import Testing

/// The write-back queue's durability contract, tried as a user whose daemon is killed or whose
/// machine loses power meets it: what `close` returned survives `kill -9`; what an fsync of any
/// descriptor of a file, an fsync of its folder, or `bucketfs sync` returned survives a power
/// cut; nothing is uploaded that no writer wrote; nothing carried out, replaced or withdrawn is
/// carried out again. A power cut is the staging folder's XFS image shut down without a log
/// flush (as fstests does), the daemon killed, the image mounted again (its log replayed).
@Suite(.serialized) struct DurabilityTests {
  /// The server takes no upload (lookups, listings and reads still answer): every change waits
  /// in the queue, where the cut finds it.
  static func refusingUploads(_ api: String) -> Faults {
    var faults = Faults()
    faults.errorStatus = 503
    faults.errorFraction = 1
    faults.pathFilter = api == "gcs" ? "uploadType=" : "o?name="
    return faults
  }

  /// A staging folder on a loop-mounted XFS image, which a test can cut the power of.
  final class PowerCutDisk {
    let image: String
    let folder: String

    init(_ fx: MountFixture) throws {
      image = fx.root.appendingPathComponent("staging.img").path
      folder = try fx.folder("xfs").path
      #expect(FileManager.default.createFile(atPath: image, contents: nil))
      #expect(truncate(image, 320 << 20) == 0)
      let (made, said) = runTool("/usr/sbin/mkfs.xfs", ["-q", image])
      try #require(made == 0, "mkfs.xfs: \(said)")
      try mount()
    }

    var staging: String { folder + "/staging" }

    func mount() throws {
      let (mounted, said) = runTool("/bin/mount", ["-o", "loop", image, folder])
      try #require(mounted == 0, "mount: \(said)")
    }

    /// The power goes: the file system stops where its disk was (no log flush), the daemon
    /// dies with it, and the machine comes back: the image mounted again, its log replayed.
    func cut(_ m: MountedBucket) async throws {
      let (down, said) = runTool("/usr/sbin/xfs_io", ["-x", "-c", "shutdown", folder])
      try #require(down == 0, "xfs_io shutdown: \(said)")
      m.process.send(SIGKILL)
      m.process.wait()
      m.unmount()
      // The kernel may hold files of the dead mount (passthrough) a moment longer.
      #expect(await eventually(timeout: .seconds(60)) { runTool("/bin/umount", [self.folder]).0 == 0 }, "the shut down image stays busy")
      try mount()
    }

    deinit {
      _ = runTool("/bin/umount", ["-l", folder])
    }
  }

  func conflictCopies(_ fx: MountFixture) async throws -> [String] {
    try await fx.storage.reference().listAll().items.map(\.fullPath).filter { $0.contains(".conflict-") }
  }

  /// Issue 53, 1: `echo v1 > f; echo v2 > f` (v2 replaces the waiting v1), v2 lands, `rm f`, the
  /// delete lands, `kill -9` inside the commit interval: the next mount finds nothing to do, and
  /// `f` stays deleted (it came back as a 0-byte object).
  @Test(arguments: ["firebase", "gcs"]) func aDeletedFileStaysDeletedAfterAKill(api: String) async throws {
    try await MountFixture.scope { fx in
      let m = try fx.mount(options: ["writable", "commit=30"], extra: ["--api", api], name: "first")
      // Watched in the bucket, not waited for with `bucketfs sync`, which commits.
      var (status, output) = m.shell("echo v1 > f; echo v2 > f")
      #expect(status == 0, "\(output)")
      #expect(await eventually { await fx.object("f") == Data("v2\n".utf8) })
      (status, output) = m.shell("rm f")
      #expect(status == 0, "\(output)")
      #expect(await eventually { await fx.object("f") == nil })
      m.process.send(SIGKILL)
      m.process.wait()
      m.unmount()
      let next = try fx.mount(options: ["writable"], extra: ["--api", api], name: "next")
      (status, output) = next.sync()
      #expect(status == 0, "\(output)")
      let back = await fx.object("f")
      #expect(back == nil, "f came back as \(back?.count ?? 0) bytes; \(next.log)")
      #expect(try await conflictCopies(fx) == [])
      #expect(!FileManager.default.fileExists(atPath: next.path("f")))
    }
  }

  /// Issue 53, 3 and 4: a rename, an unlink and a mkdir, each followed by an fsync of the
  /// folder's descriptor, and a file fsynced through a descriptor opened for reading only, all
  /// outlast a power cut (the kernel took a missing fsyncdir for success, and a read-only
  /// handle's fsync did nothing).
  @Test(arguments: ["firebase", "gcs"]) func fsyncOfAFolderAndOfAReadersDescriptorOutlastAPowerCut(api: String) async throws {
    try await MountFixture.scope { fx in
      let disk = try PowerCutDisk(fx)
      let m = try fx.mount(options: ["writable", "commit=30", "staging_dir=\(disk.staging)"], extra: ["--api", api], name: "cut")
      fx.emulator!.setFaults(Self.refusingUploads(api))
      let script = """
        import os
        def put(name, text):
            with open(name, "w") as f: f.write(text)
        put("a", "renamed\\n"); put("c", "removed\\n")
        d = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
        os.rename("a", "b"); os.fsync(d)
        os.unlink("c"); os.fsync(d)
        os.mkdir("d"); os.fsync(d)
        put("r", "fsynced by a reader\\n")
        r = os.open("r", os.O_RDONLY); os.fsync(r); os.close(r)
        put("lost", "closed, never fsynced\\n")
        """
      let (status, output) = m.shell("python3 -c '\(script.replacingOccurrences(of: "'", with: "'\\''"))'")
      #expect(status == 0, "\(output)")
      try await disk.cut(m)
      fx.emulator!.setFaults(Faults())
      let next = try fx.mount(options: ["writable", "staging_dir=\(disk.staging)"], extra: ["--api", api], name: "after")
      let (synced, said) = next.sync(timeout: 60)
      #expect(synced == 0, "\(said); \(next.log)")
      #expect(await fx.object("b") == Data("renamed\n".utf8), "\(next.log)")
      #expect(await fx.object("a") == nil)
      #expect(await fx.object("c") == nil)
      #expect(await fx.object("r") == Data("fsynced by a reader\n".utf8), "\(next.log)")
      var isFolder: ObjCBool = false
      #expect(FileManager.default.fileExists(atPath: next.path("d"), isDirectory: &isFolder) && isFolder.boolValue, "\(next.log)")
      // What no fsync covered may or may not be there; if it is, it is whole.
      if let lost = await fx.object("lost") { #expect(lost == Data("closed, never fsynced\n".utf8)) }
      #expect(try await conflictCopies(fx) == [])
    }
  }

  /// Issue 53, 5: a file written and fsynced, written again and fsynced (the second version
  /// replaces the first while it waits), then a power cut: the next mount reports no damage,
  /// `bucketfs sync` succeeds, and the bucket gets the second version once.
  @Test(arguments: [(true, true, true), (true, false, true), (true, true, false), (false, true, false)])
  func aPowerCutAfterAnFsyncedRewriteReportsNoDamage(serverAway: Bool, sameDescriptor: Bool, newFile: Bool) async throws {
    try await MountFixture.scope { fx in
      let disk = try PowerCutDisk(fx)
      if !newFile { _ = try await fx.put("f", Data("the bucket's version\n".utf8)) }
      let m = try fx.mount(options: ["writable", "commit=30", "staging_dir=\(disk.staging)"], name: "cut")
      // Known to the mount before the server goes (a name the mount never saw is new to it).
      if !newFile { #expect(try readFile(m.path("f")).get() == Data("the bucket's version\n".utf8)) }
      // Away: the first version waits its turn, and the second replaces it.
      if serverAway { fx.stopEmulator() }
      // A new file is written by the kernel (passthrough), and each fsync queues a copy.
      let script =
        sameDescriptor
        ? """
        import os
        fd = os.open("f", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, b"first version\\n"); os.fsync(fd)
        os.ftruncate(fd, 0); os.pwrite(fd, b"second version, longer\\n", 0); os.fsync(fd); os.close(fd)
        """
        : """
        import os
        for text in ("first version\\n", "second version, longer\\n"):
            fd = os.open("f", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.write(fd, text.encode()); os.fsync(fd); os.close(fd)
        """
      let (status, output) = m.shell("python3 -c '\(script)'")
      #expect(status == 0, "\(output)")
      try await disk.cut(m)
      if serverAway { try fx.startEmulator() }
      let next = try fx.mount(options: ["writable", "staging_dir=\(disk.staging)"], name: "after")
      let (synced, said) = next.sync(timeout: 60)
      #expect(synced == 0, "\(said); \(next.log)")
      #expect(!next.log.contains("damaged") && !next.log.contains("lost its bytes"), "\(next.log)")
      #expect(await fx.object("f") == Data("second version, longer\n".utf8), "\(m.log)\n\(next.log)")
      #expect(try await conflictCopies(fx) == [])
    }
  }

  /// Issue 53, 6: a file its creator writes by passthrough, a second writer that writes into it
  /// through the daemon, a reader, then an append, with the server away; after a clean unmount
  /// and a remount the bytes are uploaded as written (the running CRC32C went on from a stale
  /// one, and the next mount set them aside as "not the bytes queued").
  @Test(arguments: ["firebase", "gcs"]) func aFileWrittenByTheKernelAndASecondWriterIsNeverSetAside(api: String) async throws {
    try await MountFixture.scope { fx in
      let m = try fx.mount(options: ["writable"], extra: ["--api", api], name: "first")
      fx.emulator!.setFaults(Self.refusingUploads(api))
      // The second writer's bytes make the whole file from its start (a CRC the daemon can
      // follow); the creator then changes one of them by passthrough, unseen; the append after
      // both are gone must not extend the CRC that missed it.
      let script = """
        import os
        a = os.open("f", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        b = os.open("f", os.O_WRONLY)
        os.write(b, b"second " * 1000)
        os.pwrite(a, b"CREATOR", 100)
        r = os.open("f", os.O_RDONLY); os.read(r, 10)
        os.close(b)
        os.close(a)
        # The reader keeps the edit open: the append joins it once the kernel writers left.
        with open("f", "a") as f: f.write("appended\\n")
        os.close(r)
        """
      let (status, output) = m.shell("python3 -c '\(script)'")
      #expect(status == 0, "\(output)")
      var expected = Data(String(repeating: "second ", count: 1000).utf8)
      expected.replaceSubrange(100..<107, with: Data("CREATOR".utf8))
      expected.append(Data("appended\n".utf8))
      #expect(try readFile(m.path("f")).get() == expected)
      m.unmount()
      fx.emulator!.setFaults(Faults())
      let next = try fx.mount(options: ["writable"], extra: ["--api", api], name: "next")
      let (synced, said) = next.sync(timeout: 60)
      #expect(synced == 0, "\(said); \(next.log)")
      #expect(!next.log.contains("damaged"), "\(next.log)")
      #expect(await fx.object("f") == expected, "\(next.log)")
    }
  }

  /// Issue 53, 7: custom metadata set after the close goes with the file through a rename made
  /// before its upload (the mode did, the custom keys did not).
  @Test(arguments: ["firebase", "gcs"]) func metadataSetAfterACloseFollowsARename(api: String) async throws {
    try await MountFixture.scope { fx in
      let m = try fx.mount(options: ["writable"], extra: ["--api", api])
      fx.emulator!.setFaults(Self.refusingUploads(api))
      let (status, output) = m.shell("echo x > f; chmod 600 f; setfattr -n user.meta.b -v 2 f; mv f g")
      #expect(status == 0, "\(output)")
      fx.emulator!.setFaults(Faults())
      let (synced, said) = m.sync(timeout: 60)
      #expect(synced == 0, "\(said)")
      let meta = try await fx.storage.reference(withPath: "g").getMetadata()
      #expect(meta.customMetadata?["b"] == "2", "\(meta.customMetadata ?? [:])")
      #expect(meta.customMetadata?["goog-reserved-posix-mode"] == "600", "\(meta.customMetadata ?? [:])")
      #expect(await fx.object("g") == Data("x\n".utf8))
      #expect(await fx.object("f") == nil)
    }
  }

  /// Issue 53, 8: SIGTERM while a process holds a file it is writing ends the mount as
  /// `fusermount3 -uz` does: the process writes on and closes (both had failed with
  /// ECONNABORTED, and the bytes were lost), the daemon ends once it has let go, and the next
  /// mount carries the file out.
  @Test func sigtermLetsAProcessStillWritingFinish() async throws {
    try await MountFixture.scope { fx in
      let m = try fx.mount(options: ["writable"], name: "first")
      fx.emulator!.setFaults(Self.refusingUploads("firebase"))
      let go = fx.root.appendingPathComponent("go").path
      let said = fx.root.appendingPathComponent("writer.out").path
      let script = """
        import os, sys, time
        fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, b"written before the signal\\n")
        open(sys.argv[3] + ".ready", "w").close()
        while not os.path.exists(sys.argv[2]): time.sleep(0.02)
        try:
            os.write(fd, b"written after it\\n"); os.close(fd); print("closed")
        except OSError as e:
            print("failed", e.errno)
        """
      let out = open(said, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
      defer { close(out) }
      let writer = try ChildProcess(
        "/usr/bin/python3", ["-c", script, m.path("held.txt"), go, said], environment: ProcessInfo.processInfo.environment, output: .descriptor(out))
      defer { _ = writer.stop(grace: .seconds(1)) }
      #expect(await eventually { FileManager.default.fileExists(atPath: said + ".ready") })
      m.process.send(SIGTERM)
      // Detached: no new process enters it, the writer inside goes on.
      #expect(await eventually { !m.isMounted }, "the mount was not detached")
      #expect(m.process.isRunning, "the daemon ended while a process still held a file in it")
      #expect(FileManager.default.createFile(atPath: go, contents: nil))
      #expect(writer.wait(timeout: .seconds(60)) == .exited(0))
      let text = (try? String(contentsOfFile: said, encoding: .utf8)) ?? ""
      #expect(text.contains("closed"), "\(text)")
      #expect(m.process.wait(timeout: .seconds(60)) != nil, "the daemon did not end once the writer let go")
      fx.emulator!.setFaults(Faults())
      let next = try fx.mount(options: ["writable"], name: "next")
      let (synced, syncSaid) = next.sync(timeout: 60)
      #expect(synced == 0, "\(syncSaid)")
      #expect(await fx.object("held.txt") == Data("written before the signal\nwritten after it\n".utf8), "\(m.log)")
    }
  }

  /// Issue 53, 10: `staging_size` bounds what the files open for writing take together, not
  /// each file alone with the queue: a second writer past the budget gets ENOSPC at once (with
  /// a line in the log saying why), and so does a truncation that would make a file longer than
  /// the room left; nothing hangs, and the first file, closed, goes up whole.
  @Test func filesOpenForWritingShareTheStagingBudget() async throws {
    try await MountFixture.scope { fx in
      let m = try fx.mount(options: ["writable", "staging_size=8M"])
      let script = """
        import errno, os
        a = os.open("a", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        b = os.open("b", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        chunk = b"x" * 65536
        for _ in range(80): os.write(a, chunk)
        failed = 0
        try:
            for _ in range(80): os.write(b, chunk)
        except OSError as e:
            failed = e.errno
        grown = 0
        try:
            os.ftruncate(os.open("c", os.O_WRONLY | os.O_CREAT, 0o644), 64 << 20)
        except OSError as e:
            grown = e.errno
        os.close(a)
        try:
            os.close(b)
        except OSError:
            pass
        print("b", failed, "c", grown)
        """
      let (status, output) = m.shell("python3 -c '\(script)'")
      #expect(status == 0 && output.contains("b \(ENOSPC) c \(ENOSPC)"), "\(output); \(m.log)")
      #expect(m.log.contains("no room for"), "\(m.log)")
      let (synced, said) = m.sync(timeout: 60)
      #expect(synced == 0, "\(said)")
      #expect(await fx.object("a")?.count == 80 * 65536)
    }
  }

  /// Issue 53, 11: a symbolic link renamed over the GCS API (a server-side move, queued) reads
  /// its target while the move waits: readlink asked the bucket for the new name first (ENOENT).
  @Test func aLinkRenamedOnTheServerReadsWhileTheMoveWaits() async throws {
    try await MountFixture.scope { fx in
      let m = try fx.mount(options: ["writable"], extra: ["--api", "gcs"])
      var (status, output) = m.shell("ln -s some/target l")
      #expect(status == 0, "\(output)")
      (status, output) = m.sync()
      #expect(status == 0, "\(output)")
      // Moves and copies on the server wait (503); everything else answers.
      var faults = Faults()
      faults.errorFraction = 1
      faults.pathFilter = "moveTo"
      fx.emulator!.setFaults(faults)
      let script = "import os; os.rename(\"l\", \"l2\"); print(os.readlink(\"l2\"))"
      (status, output) = m.shell("python3 -c '\(script)'")
      #expect(status == 0 && output.contains("some/target"), "\(output); \(m.log)")
      fx.emulator!.setFaults(Faults())
      (status, output) = m.sync(timeout: 60)
      #expect(status == 0, "\(output)")
      #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: m.path("l2"))) == "some/target")
    }
  }

  /// Issue 53, 9: what an fsync returned is kept when a later write fails (no room left in the
  /// staging budget): the write and the close fail, and the fsynced version goes up.
  @Test func aWriteThatFailsAfterAnFsyncKeepsWhatTheFsyncReturned() async throws {
    try await MountFixture.scope { fx in
      let m = try fx.mount(options: ["writable", "staging_size=2M"])
      // Away: the fsynced upload waits its turn, where a withdrawal finds it.
      fx.stopEmulator()
      let script = """
        import os, errno
        fd = os.open("f", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, b"fsynced\\n"); os.fsync(fd)
        failed = 0
        try:
            for _ in range(64): os.write(fd, b"x" * 65536)
        except OSError as e:
            failed = e.errno
        try:
            os.close(fd)
        except OSError:
            pass
        print("failed", failed)
        """
      let (status, output) = m.shell("python3 -c '\(script)'")
      #expect(status == 0 && output.contains("failed \(ENOSPC)"), "\(output)")
      try fx.startEmulator()
      let (synced, said) = m.sync(timeout: 60)
      #expect(synced == 0, "\(said)")
      #expect(await fx.object("f") == Data("fsynced\n".utf8), "\(m.log)")
    }
  }

  /// Issue 53 (kill rounds): a file the kernel writes, its record rewritten by a close, then
  /// opened again with `O_TRUNC` by a second writer, and the daemon killed: the next mount set
  /// the record aside as damaged ("shorter than its last close said"), though the truncation was
  /// the program's. A truncating open rewrites the record as a truncation does.
  @Test(arguments: ["firebase", "gcs"]) func aTruncatingOpenOfAFileTheKernelWritesIsNoDamage(api: String) async throws {
    try await MountFixture.scope { fx in
      let m = try fx.mount(options: ["writable"], extra: ["--api", api], name: "first")
      fx.emulator!.setFaults(Self.refusingUploads(api))
      let ready = fx.root.appendingPathComponent("ready")
      let script = """
        import os, sys, time
        a = os.open("f", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(a, b"x" * 5000)
        b = os.open("f", os.O_WRONLY)
        os.write(b, b"y")
        os.close(b)
        t = os.open("f", os.O_WRONLY | os.O_TRUNC)
        os.write(t, b"short\\n")
        open(sys.argv[1], "w").close()
        time.sleep(600)
        """
      let writer = try ChildProcess("/bin/sh", ["-c", "cd '\(m.mountpoint.path)' && exec python3 -c '\(script)' '\(ready.path)'"], environment: ProcessInfo.processInfo.environment)
      #expect(await eventually { FileManager.default.fileExists(atPath: ready.path) })
      m.process.send(SIGKILL)
      m.process.wait()
      writer.send(SIGKILL)
      writer.wait()
      m.unmount()
      fx.emulator!.setFaults(Faults())
      let next = try fx.mount(options: ["writable"], extra: ["--api", api], name: "next")
      let (synced, said) = next.sync(timeout: 60)
      #expect(synced == 0, "\(said); \(next.log)")
      #expect(!next.log.contains("damaged"), "\(next.log)")
      let held = await fx.object("f")
      #expect(held == Data("short\n".utf8), "\(held.map { String(decoding: $0, as: UTF8.self).prefix(40) } ?? "none"); \(next.log)")
    }
  }
}
