import Foundation
import ChildProcess
import TestSupport
import StorageCore
import Testing

/// Modes, owners and times kept in the keys Google's tools use for `--preserve-posix`: shown
/// from objects that carry them, kept by chmod/chown/create through the write-back queue,
/// back after a remount; refused (never answered as done) where they cannot be kept.
@Suite(.serialized) struct PosixAttributeTests {
  func mode(_ path: String) -> UInt32? {
    var st = stat()
    return stat(path, &st) == 0 ? UInt32(st.st_mode) & 0o7777 : nil
  }

  func owner(_ path: String) -> (uid: UInt32, gid: UInt32, mtime: Int)? {
    var st = stat()
    return stat(path, &st) == 0 ? (st.st_uid, st.st_gid, st.st_mtim.tv_sec) : nil
  }

  func sync(_ m: MountedBucket) {
    let (status, output) = runTool(bucketfsBinary, ["sync", m.mountpoint.path, "--timeout", "30"])
    #expect(status == 0, "bucketfs sync: \(output)")
  }

  func custom(_ fx: MountFixture, _ name: String) async throws -> [String: String] {
    try await fx.storage.reference(withPath: name).getMetadata().customMetadata ?? [:]
  }

  @Test(arguments: [[], ["--api", "gcs"]])
  func objectsWrittenWithPreservePosixShowTheirAttributes(api: [String]) async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put(
        "p/kept.sh", Data("echo hi\n".utf8),
        custom: [
          "goog-reserved-posix-mode": "750", "goog-reserved-posix-uid": "1234", "goog-reserved-posix-gid": "5678",
          "goog-reserved-file-mtime": "1700000000",
        ])
      _ = try await fx.put("p/plain.txt", Data("plain".utf8), custom: ["goog-reserved-posix-mode": "not octal"])
      let m = try fx.mount(extra: api)
      #expect(mode(m.path("p/kept.sh")) == 0o750)
      let kept = try #require(owner(m.path("p/kept.sh")))
      #expect(kept.uid == 1234 && kept.gid == 5678 && kept.mtime == 1_700_000_000)
      // A value gcloud would not read is not read here either: the mount's file_mode.
      #expect(mode(m.path("p/plain.txt")) == 0o444)
      let plain = try fx.mount(options: ["posix=no"], extra: api, name: "plain")
      #expect(mode(plain.path("p/kept.sh")) == 0o444)
      #expect(owner(plain.path("p/kept.sh"))?.uid == getuid())
    }
  }

  @Test func chmodAndChownAreKeptAndComeBackAfterARemount() async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("p/run.sh", Data("#!/bin/sh\n".utf8))
      let m = try fx.mount(options: ["writable"])
      let path = m.path("p/run.sh")
      #expect(mode(path) == 0o644)
      #expect(chmod(path, 0o755) == 0)
      #expect(mode(path) == 0o755, "chmod was answered but not shown")
      #expect(chown(path, 4321, 8765) == 0)
      #expect(owner(path).map { ($0.uid, $0.gid) } ?? (0, 0) == (4321, 8765))
      sync(m)
      let stored = try await custom(fx, "p/run.sh")
      #expect(stored["goog-reserved-posix-mode"] == "755")
      #expect(stored["goog-reserved-posix-uid"] == "4321")
      #expect(stored["goog-reserved-posix-gid"] == "8765")
      // The bytes are the object's still: a metadata change, not an upload.
      #expect(try await fx.storage.reference(withPath: "p/run.sh").data(maxSize: 1 << 20) == Data("#!/bin/sh\n".utf8))
      m.unmount()
      let again = try fx.mount(name: "again")
      #expect(mode(again.path("p/run.sh")) == 0o755)
      #expect(owner(again.path("p/run.sh"))?.uid == 4321)
    }
  }

  @Test func aFileCreatedWithAModeKeepsIt() async throws {
    try await MountFixture.scope { fx in
      let m = try fx.mount(options: ["writable"])
      // 0755 passes the usual umask (022) unchanged; the umask is process-wide, so it is not set.
      let fd = open(m.path("tool"), O_CREAT | O_WRONLY | O_EXCL, 0o755)
      #expect(fd >= 0)
      #expect(write(fd, "x", 1) == 1)
      #expect(close(fd) == 0)
      #expect(mode(m.path("tool")) == 0o755)
      // cp -p of a file written here: its mode and time go with its upload.
      let (status, output) = runTool("/bin/sh", ["-c", "cd '\(m.mountpoint.path)' && echo data > f && chmod 600 f && touch -d @1600000000 f"])
      #expect(status == 0, "\(output)")
      #expect(mode(m.path("f")) == 0o600)
      sync(m)
      #expect(try await custom(fx, "tool")["goog-reserved-posix-mode"] == "755")
      let f = try await custom(fx, "f")
      #expect(f["goog-reserved-posix-mode"] == "600")
      #expect(f["goog-reserved-file-mtime"] == "1600000000")
      // A chmod of a file in the bucket, then a touch that re-uploads it while the chmod may
      // still be queued: the upload carries the chmod, whichever the queue does first.
      let (made, madeOutput) = runTool("/bin/sh", ["-c", "cd '\(m.mountpoint.path)' && for i in 1 2 3 4 5; do echo $i > g$i; done"])
      #expect(made == 0, "\(madeOutput)")
      sync(m)
      for i in 1...5 {
        #expect(chmod(m.path("g\(i)"), 0o700) == 0)
        #expect(runTool("/usr/bin/touch", ["-d", "@1600000000", m.path("g\(i)")]).0 == 0)
      }
      sync(m)
      for i in 1...5 {
        let g = try await custom(fx, "g\(i)")
        #expect(g["goog-reserved-posix-mode"] == "700", "g\(i): \(g)")
        #expect(mode(m.path("g\(i)")) == 0o700)
      }
      m.unmount()
      let again = try fx.mount(name: "again")
      #expect(mode(again.path("tool")) == 0o755)
      #expect(owner(again.path("f"))?.mtime == 1_600_000_000)
    }
  }

  /// mkdir(2)'s mode and the caller as owner are the folder's, and hold (as a folder's chmod
  /// does) for the mount's life: across a rename, not for a folder of the same name made after
  /// a rmdir. With `default_permissions` the kernel enforces them for every user.
  @Test func aFolderMadeWithAModeKeepsIt() async throws {
    try await MountFixture.scope { fx in
      let m = try fx.mount(options: ["writable", "allow_other", "default_permissions"])
      // The kernel applies the umask (process-wide, so read, not set).
      let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
      let umask = status.split(separator: "\n").first { $0.hasPrefix("Umask:") }
        .flatMap { UInt32($0.dropFirst(6).trimmingCharacters(in: .whitespaces), radix: 8) } ?? 0o022
      #expect(mkdir(m.path("closed"), 0o700) == 0)
      #expect(mode(m.path("closed")) == 0o700 & ~umask)
      #expect(mkdir(m.path("shared"), 0o1777) == 0)
      #expect(mode(m.path("shared")) == 0o1777 & ~umask)
      #expect(mkdir(m.path("moving"), 0o710) == 0)
      #expect(rename(m.path("moving"), m.path("moved")) == 0)
      #expect(mode(m.path("moved")) == 0o710 & ~umask)
      #expect(mkdir(m.path("again"), 0o700) == 0)
      #expect(rmdir(m.path("again")) == 0)
      // Nothing of the removed one: the mount's dir_mode.
      #expect(mkdir(m.path("again"), 0o755) == 0)
      #expect(mode(m.path("again")) == 0o755 & ~umask)
      // Another user: its own folder is its own; root's 0700 one is closed to it.
      chmod(fx.root.path, 0o711)
      #expect(chmod(m.path("shared"), 0o1777) == 0)
      let script = "cd '\(m.path("shared"))' && mkdir -m 700 own && echo x > own/file && stat -c '%a %u %g' own"
      let (made, output) = runTool("/usr/sbin/runuser", ["-u", "nobody", "--", "/bin/sh", "-c", script])
      #expect(made == 0, "\(output)")
      #expect(output.contains("700 65534 65534"), "\(output)")
      let (closed, why) = runTool("/usr/sbin/runuser", ["-u", "nobody", "--", "/bin/ls", m.path("closed")])
      #expect(closed != 0 && why.contains("Permission denied"), "\(why)")
    }
  }

  /// A folder's mode, owner and the times set on it are kept in its placeholder object (`dir/`)
  /// in Google's `--preserve-posix` keys: back after a remount, through a folder rename, and for
  /// a folder that only had objects under it (chmod makes its placeholder); a placeholder
  /// another tool wrote with those keys shows them, read-only too.
  @Test(arguments: [[], ["--api", "gcs"]])
  func foldersKeepModeOwnerAndTimesAfterARemount(api: [String]) async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("implicit/file.txt", Data("x".utf8))
      _ = try await fx.put("theirs/", Data(), custom: ["goog-reserved-posix-mode": "750", "goog-reserved-posix-uid": "42"])
      let m = try fx.mount(options: ["writable"], extra: api)
      #expect(mkdir(m.path("made"), 0o755) == 0)
      #expect(chmod(m.path("made"), 0o710) == 0)
      #expect(chown(m.path("made"), 1234, 5678) == 0)
      #expect(mkdir(m.path("made/inner"), 0o755) == 0)
      #expect(chmod(m.path("made/inner"), 0o700) == 0)
      #expect(FileManager.default.createFile(atPath: m.path("made/inner/f"), contents: Data("f".utf8)))
      var set = [timespec(tv_sec: 1_600_000_000, tv_nsec: 0), timespec(tv_sec: 1_600_000_000, tv_nsec: 250_000_000)]
      #expect(utimensat(AT_FDCWD, m.path("made"), &set, 0) == 0)
      #expect(chmod(m.path("implicit"), 0o750) == 0)
      sync(m)
      func placeholder(_ name: String) async throws -> [String: String] {
        try await fx.storage.reference().object(named: name).getMetadata().customMetadata ?? [:]
      }
      let made = try await placeholder("made/")
      #expect(made["goog-reserved-posix-mode"] == "710" && made["goog-reserved-posix-uid"] == "1234" && made["goog-reserved-posix-gid"] == "5678", "\(made)")
      #expect(made["goog-reserved-file-mtime"] == "1600000000", "\(made)")
      #expect(try await placeholder("implicit/")["goog-reserved-posix-mode"] == "750")
      #expect(try await fx.storage.reference(withPath: "implicit/file.txt").getMetadata().size == 1, "the placeholder left the files")
      m.unmount()

      func mtime(_ path: String) -> Double? {
        var st = stat()
        return stat(path, &st) == 0 ? Double(st.st_mtim.tv_sec) + Double(st.st_mtim.tv_nsec) / 1e9 : nil
      }
      let again = try fx.mount(options: ["writable"], extra: api, name: "again")
      #expect(mode(again.path("made")) == 0o710)
      #expect(owner(again.path("made")).map { [$0.uid, $0.gid] } == [1234, 5678])
      #expect(mtime(again.path("made")) == 1_600_000_000.25)
      #expect(mode(again.path("made/inner")) == 0o700)
      #expect(mode(again.path("implicit")) == 0o750)
      #expect(mode(again.path("theirs")) == 0o750 && owner(again.path("theirs"))?.uid == 42)
      // `ls -l` of the folder (readdirplus) shows the same.
      let (listed, text) = runTool("/bin/ls", ["-ln", again.path("")])
      #expect(listed == 0 && text.contains("drwx--x--- 2 1234 5678"), "\(text)")
      #expect(rename(again.path("made"), again.path("renamed")) == 0)
      #expect(mode(again.path("renamed")) == 0o710)
      sync(again)
      again.unmount()

      let third = try fx.mount(extra: api, name: "third")
      #expect(mode(third.path("renamed")) == 0o710)
      #expect(owner(third.path("renamed")).map { [$0.uid, $0.gid] } == [1234, 5678])
      #expect(mtime(third.path("renamed")) == 1_600_000_000.25)
      #expect(mode(third.path("renamed/inner")) == 0o700)
      #expect(mode(third.path("made")) == nil, "the old name is gone")
    }
  }

  /// A time set through the mount comes back to the nanosecond the kernel gave, before and after
  /// it reaches the bucket and after a remount: times 100 ns apart, and one 1 ns before the next
  /// second, stay what they were (a Double of seconds merged them, and rsync -a sent such files
  /// again).
  @Test(arguments: [[], ["--api", "gcs"]])
  func timesComeBackToTheNanosecond(api: [String]) async throws {
    try await MountFixture.scope { fx in
      let m = try fx.mount(options: ["writable"], extra: api)
      let times = [
        ("a", timespec(tv_sec: 1_700_000_000, tv_nsec: 999_999_900)), ("b", timespec(tv_sec: 1_700_000_000, tv_nsec: 999_999_999)),
        ("c", timespec(tv_sec: 1_600_000_000, tv_nsec: 123_456_789)),
      ]
      for (name, time) in times {
        #expect(FileManager.default.createFile(atPath: m.path(name), contents: Data(name.utf8)))
        var set = [time, time]
        #expect(utimensat(AT_FDCWD, m.path(name), &set, 0) == 0)
      }
      func mtime(_ mount: MountedBucket, _ name: String) -> [Int]? {
        var st = stat()
        return stat(mount.path(name), &st) == 0 ? [st.st_mtim.tv_sec, st.st_mtim.tv_nsec] : nil
      }
      for (name, time) in times { #expect(mtime(m, name) == [time.tv_sec, time.tv_nsec], "\(name) before the bucket has it") }
      sync(m)
      for (name, time) in times { #expect(mtime(m, name) == [time.tv_sec, time.tv_nsec], "\(name) once in the bucket") }
      m.unmount()
      let again = try fx.mount(extra: api, name: "again")
      for (name, time) in times { #expect(mtime(again, name) == [time.tv_sec, time.tv_nsec], "\(name) after a remount") }
    }
  }

  /// A time and mode set after a close but before the release that follows it (tar sets them
  /// the moment close(2) returns; here a second descriptor holds the release back) go with
  /// the queued upload: one change per file, not the same bytes queued twice.
  @Test func timesSetBeforeTheReleaseGoWithTheQueuedUpload() async throws {
    try await MountFixture.scope { fx in
      // Offline, so every change stays in the queue to be counted (a worker may take an upload
      // online before the time comes, and a change under way is not amended).
      let m = try fx.mount(options: ["writable"], extra: ["--api", "gcs", "--offline"])
      let files = 12
      for i in 0..<files {
        let fd = open(m.path("f\(i)"), O_CREAT | O_WRONLY, 0o644)
        #expect(fd >= 0)
        let bytes = Array("bytes \(i)".utf8)
        #expect(write(fd, bytes, bytes.count) == bytes.count)
        let later = dup(fd)
        #expect(close(fd) == 0)  // the close queues the bytes; the release waits for `later`
        var set = [timespec(tv_sec: 1_600_000_000 + i, tv_nsec: 7), timespec(tv_sec: 1_600_000_000 + i, tv_nsec: 7)]
        #expect(utimensat(AT_FDCWD, m.path("f\(i)"), &set, 0) == 0)
        #expect(fchmod(later, 0o640) == 0)
        #expect(close(later) == 0)
      }
      #expect(m.count("write-back queue", "changes") == files, "\(String(describing: m.stat("write-back queue")))")
      // One change made per file: a second of the same bytes would have taken its own record
      // (numbered in order) and replaced the first.
      let staging = fx.root.appendingPathComponent("staging")
      let queue = try #require(
        FileManager.default.enumerator(atPath: staging.path)?.compactMap { $0 as? String }.first { $0.hasSuffix("/queue") })
      let records = Array(queueRecords(staging.appendingPathComponent(queue)).live.keys)
      #expect(records.count == files && records.max() == UInt64(files), "records \(records.sorted())")
      m.unmount()
      let online = try fx.mount(options: ["writable"], extra: ["--api", "gcs"], name: "online")
      sync(online)
      online.unmount()
      let again = try fx.mount(extra: ["--api", "gcs"], name: "again")
      for i in 0..<files {
        var st = stat()
        #expect(stat(again.path("f\(i)"), &st) == 0)
        #expect([st.st_mtim.tv_sec, st.st_mtim.tv_nsec] == [1_600_000_000 + i, 7] as [Int], "f\(i)")
        #expect(st.st_mode & 0o777 == 0o640, "f\(i)")
        #expect(try readFile(again.path("f\(i)")).get() == Data("bytes \(i)".utf8))
      }
    }
  }

  /// A folder's times as a disk keeps them, for the mount's life: a new folder's are now, a
  /// folder's mtime and ctime move when an entry is made or removed in it, and a time set on it
  /// (tar -x, cp -a, rsync -a) holds. A chmod moves a file's ctime, not its mtime.
  @Test func foldersAndChangesHaveTheirTimes() async throws {
    try await MountFixture.scope { fx in
      let m = try fx.mount(options: ["writable"])
      func times(_ path: String) -> (mtime: Double, ctime: Double)? {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        return (Double(st.st_mtim.tv_sec) + Double(st.st_mtim.tv_nsec) / 1e9, Double(st.st_ctim.tv_sec) + Double(st.st_ctim.tv_nsec) / 1e9)
      }
      let before = Date().timeIntervalSince1970.rounded(.down)
      #expect(mkdir(m.path("d"), 0o755) == 0)
      #expect((times(m.path("d"))?.mtime ?? 0) >= before)
      var old = [timespec(tv_sec: 1_500_000_000, tv_nsec: 0), timespec(tv_sec: 1_500_000_000, tv_nsec: 0)]
      #expect(utimensat(AT_FDCWD, m.path("d"), &old, 0) == 0)
      #expect(times(m.path("d"))?.mtime == 1_500_000_000)
      #expect(FileManager.default.createFile(atPath: m.path("d/f"), contents: Data("x".utf8)))
      #expect((times(m.path("d"))?.mtime ?? 0) >= before)
      #expect(utimensat(AT_FDCWD, m.path("d"), &old, 0) == 0)
      #expect(unlink(m.path("d/f")) == 0)
      #expect((times(m.path("d"))?.ctime ?? 0) >= before)
      #expect((times(m.path("d"))?.mtime ?? 0) >= before)
      // A tenth of a second comes back a tenth of a second, to the nanosecond.
      var tenth = [timespec(tv_sec: 1_900_000_000, tv_nsec: 100_000_000), timespec(tv_sec: 1_900_000_000, tv_nsec: 200_000_000)]
      #expect(utimensat(AT_FDCWD, m.path("d"), &tenth, 0) == 0)
      var st = stat()
      #expect(stat(m.path("d"), &st) == 0)
      #expect(st.st_atim.tv_nsec == 100_000_000 && st.st_mtim.tv_nsec == 200_000_000, "\(st.st_atim) \(st.st_mtim)")

      #expect(FileManager.default.createFile(atPath: m.path("g"), contents: Data("x".utf8)))
      var kept = [timespec(tv_sec: 1_600_000_000, tv_nsec: 0), timespec(tv_sec: 1_600_000_000, tv_nsec: 0)]
      #expect(utimensat(AT_FDCWD, m.path("g"), &kept, 0) == 0)
      sync(m)
      let written = try #require(times(m.path("g")))
      #expect(chmod(m.path("g"), 0o600) == 0)
      let changed = try #require(times(m.path("g")))
      #expect(changed.mtime == 1_600_000_000)
      #expect(changed.ctime >= written.ctime && changed.ctime >= before, "\(written) \(changed)")
      sync(m)
      #expect(times(m.path("g"))?.mtime == 1_600_000_000)
      #expect((times(m.path("g"))?.ctime ?? 0) >= changed.ctime.rounded(.down))

      // Access and modification times of a file as the bucket has it: a metadata change in
      // Google's keys (and ours), not a new upload; back after a remount.
      let generation = try await fx.storage.reference(withPath: "g").getMetadata().generation
      var both = [timespec(tv_sec: 1_700_000_000, tv_nsec: 0), timespec(tv_sec: 1_750_000_000, tv_nsec: 0)]
      #expect(utimensat(AT_FDCWD, m.path("g"), &both, 0) == 0)
      func atime(_ path: String) -> Int? {
        var st = stat()
        return stat(path, &st) == 0 ? st.st_atim.tv_sec : nil
      }
      #expect(atime(m.path("g")) == 1_700_000_000)
      #expect(times(m.path("g"))?.mtime == 1_750_000_000)
      sync(m)
      let stored = try await fx.storage.reference(withPath: "g").getMetadata()
      #expect(stored.generation == generation, "the times were a new upload")
      #expect(stored.customMetadata?["goog-reserved-file-atime"] == "1700000000")
      #expect(stored.customMetadata?["goog-reserved-file-mtime"] == "1750000000")
      // touch opens the file (writing nothing) and sets the times on its descriptor.
      #expect(runTool("/usr/bin/touch", ["-m", "-d", "@1760000000", m.path("g")]).0 == 0)
      #expect(times(m.path("g"))?.mtime == 1_760_000_000)
      sync(m)
      let touched = try await fx.storage.reference(withPath: "g").getMetadata()
      #expect(touched.generation == generation, "touch was a new upload")
      #expect(touched.customMetadata?["goog-reserved-file-mtime"] == "1760000000")
      m.unmount()
      let again = try fx.mount(name: "again")
      #expect(atime(again.path("g")) == 1_700_000_000)
      #expect(times(again.path("g"))?.mtime == 1_760_000_000)
    }
  }

  /// What cannot be kept answers an error at once and changes nothing.
  @Test func whatCannotBeKeptIsRefused() async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("p/file.txt", Data("x".utf8))
      let rw = try fx.mount(options: ["writable"])
      #expect(chmod(rw.path("p/file.txt"), 0o4755) == -1 && errno == EPERM, "set-id bits")
      // A folder has no object: its mode holds for the mount's life (cp -a, tar -x set it).
      #expect(chmod(rw.path("p"), 0o700) == 0)
      #expect(mode(rw.path("p")) == 0o700)
      #expect(chmod(rw.path("p"), 0o1777) == 0, "a folder's sticky bit (the kernel enforces it)")
      #expect(mode(rw.path("p")) == 0o1777)
      #expect(mkfifo(rw.path("p/fifo"), 0o644) == -1 && errno == EPERM)
      #expect(link(rw.path("p/file.txt"), rw.path("p/hard")) == -1 && errno == EPERM)
      #expect(access(rw.path("p/fifo"), F_OK) == -1 && access(rw.path("p/hard"), F_OK) == -1)
      // The errors a program checks first come first, as on a disk.
      #expect(mkfifo(rw.path("p/file.txt"), 0o644) == -1 && errno == EEXIST)
      #expect(mkfifo(rw.path("p/" + String(repeating: "n", count: 256)), 0o644) == -1 && errno == ENAMETOOLONG)
      // mknod of a regular file makes an empty one.
      #expect(mknod(rw.path("p/made"), S_IFREG | 0o600, 0) == 0)
      #expect(mode(rw.path("p/made")) == 0o600)
      // Asking for what it has already is no change: answered on any mount.
      #expect(chmod(rw.path("p/file.txt"), 0o644) == 0)
      let plain = try fx.mount(options: ["writable", "posix=no"], name: "plain")
      #expect(chmod(plain.path("p/file.txt"), 0o600) == -1 && errno == EPERM)
      #expect(chown(plain.path("p/file.txt"), 99, 99) == -1 && errno == EPERM)
      let ro = try fx.mount(name: "ro")
      #expect(chmod(ro.path("p/file.txt"), 0o600) == -1 && errno == EROFS)
      #expect(mkfifo(ro.path("p/fifo"), 0o644) == -1 && errno == EROFS)
      #expect(mode(ro.path("p/file.txt")) == 0o444)
      #expect(try await custom(fx, "p/file.txt")["goog-reserved-posix-mode"] == nil)
    }
  }
}
