import Foundation
import ChildProcess
import TestSupport
import StorageCore
import StorageEmulator
import Testing

/// Writes through a writable mount (`-o writable`), done with ordinary tools and checked from the
/// bucket's side with the Swift API.
@Suite(.serialized) struct WriteTests {
  func shell(_ script: String, in m: MountedBucket) -> (Int32, String) {
    runTool("/bin/sh", ["-c", "set -e; cd '\(m.mountpoint.path)'; " + script])
  }

  func bucketSync(_ m: MountedBucket, timeout: Int = 30) -> (Int32, String) {
    runTool(bucketfsBinary, ["sync", m.mountpoint.path, "--timeout", String(timeout)])
  }

  /// A server that answers every request with `status`.
  func failingEverything(_ status: Int = 503) -> Faults {
    var failing = Faults()
    failing.errorStatus = status
    failing.errorFraction = 1
    return failing
  }

  func object(_ fx: MountFixture, _ name: String) async -> Data? {
    try? await fx.storage.reference(withPath: name).data(maxSize: 64 << 20)
  }

  func names(_ fx: MountFixture, under prefix: String = "") async throws -> [String] {
    var out: [String] = []
    var token: String? = nil
    repeat {
      let page = try await fx.storage.reference(withPath: prefix).listPage(delimiter: nil, pageToken: token)
      out += page.items
      token = page.nextPageToken
    } while token != nil
    return out.sorted()
  }

  @Test(arguments: ["firebase", "gcs"]) func everydayToolsWriteThroughTheMount(api: String) async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("docs/readme.txt", Data("first line\n".utf8))
      _ = try await fx.put("docs/old.txt", Data("to be renamed".utf8))
      _ = try await fx.put("docs/gone.txt", Data("to be removed".utf8))
      let source = try fx.folder("tree")
      for i in 0..<20 { try randomData(1000 + i * 997, seed: UInt64(900 + i)).write(to: source.appendingPathComponent("f\(i).bin")) }
      let m = try fx.mount(options: ["writable"], extra: ["--api", api], name: api)

      var (status, output) = shell(
        """
        echo 'second line' >> docs/readme.txt
        cp '\(source.path)/f3.bin' docs/copied.bin
        cp -r '\(source.path)' tree
        mv docs/old.txt docs/new.txt
        rm docs/gone.txt
        mkdir empty made
        rmdir empty
        printf 'draft' > made/note.txt
        printf 'saved by an editor' > made/.note.txt.swp
        mv made/.note.txt.swp made/note.txt
        printf '0123456789' > made/cut.txt
        truncate -s 4 made/cut.txt
        touch -d '2021-02-03 04:05:06' made/cut.txt
        tar -C '\(source.path)' -cf - f1.bin f2.bin | tar -C made -xf -
        mkdir -p scratch/deep/er && printf 'x' > scratch/deep/er/x.txt && printf 'y' > scratch/y.txt
        rm -r scratch
        """, in: m)
      #expect(status == 0, "\(output)")
      // The mount shows every change at once, before the bucket has it.
      #expect(try String(contentsOfFile: m.path("docs/readme.txt"), encoding: .utf8) == "first line\nsecond line\n")
      #expect(try FileManager.default.contentsOfDirectory(atPath: m.path("docs")).sorted() == ["copied.bin", "new.txt", "readme.txt"])
      var st = stat()
      #expect(stat(m.path("made/cut.txt"), &st) == 0 && st.st_size == 4 && st.st_mtim.tv_sec == 1_612_325_106)

      (status, output) = bucketSync(m)
      #expect(status == 0, "\(output)")
      #expect(await object(fx, "docs/readme.txt") == Data("first line\nsecond line\n".utf8))
      #expect(await object(fx, "docs/copied.bin") == (try Data(contentsOf: source.appendingPathComponent("f3.bin"))))
      for i in 0..<20 {
        #expect(await object(fx, "tree/f\(i).bin") == (try Data(contentsOf: source.appendingPathComponent("f\(i).bin"))), "tree/f\(i).bin")
      }
      #expect(await object(fx, "docs/new.txt") == Data("to be renamed".utf8))
      #expect(await object(fx, "made/note.txt") == Data("saved by an editor".utf8))
      #expect(await object(fx, "made/cut.txt") == Data("0123".utf8))
      #expect(await object(fx, "made/f2.bin") == (try Data(contentsOf: source.appendingPathComponent("f2.bin"))))
      let all = try await names(fx)
      #expect(!all.contains("docs/old.txt") && !all.contains("docs/gone.txt") && !all.contains("empty/"))
      #expect(!all.contains { $0.contains(".swp") || $0.contains("conflict") || $0.hasPrefix("scratch") }, "\(all)")
      // The time `touch` set is kept in the object's metadata (rclone's `mtime` key), so a new
      // mount shows it too.
      let kept = try await fx.storage.reference(withPath: "made/cut.txt").getMetadata()
      #expect(kept.customMetadata?["mtime"]?.hasPrefix("2021-02-03T04:05:06") == true, "\(String(describing: kept.customMetadata))")
      let again = try fx.mount(options: ["writable"], extra: ["--api", api], name: api + "-again")
      #expect(stat(again.path("made/cut.txt"), &st) == 0 && st.st_size == 4 && st.st_mtim.tv_sec == 1_612_325_106)
      #expect(try getxattr(again.path("made/cut.txt"), "user.sync_state").get() == "synced")
    }
  }

  /// rsync -a into the mount, twice: the second run finds sizes and times equal and sends nothing.
  @Test func rsyncTwiceSendsNothingTheSecondTime() async throws {
    guard FileManager.default.isExecutableFile(atPath: "/usr/bin/rsync") else {
      Issue.record("rsync is not installed (scripts/install-deps.sh installs it)")
      return
    }
    try await MountFixture.scope { fx in
      let source = try fx.folder("site")
      try FileManager.default.createDirectory(at: source.appendingPathComponent("css"), withIntermediateDirectories: true)
      for i in 0..<10 { try randomData(500 + i * 100, seed: UInt64(950 + i)).write(to: source.appendingPathComponent("page\(i).html")) }
      try Data("body {}".utf8).write(to: source.appendingPathComponent("css/site.css"))
      // Times just short of a whole second: kept to the millisecond, or rounded to the
      // microsecond, they became the next second and the second run sent them again.
      for (i, fraction) in [999_600_000, 999_999_600].enumerated() {
        var times = [timespec(tv_sec: 1_612_325_106, tv_nsec: fraction), timespec(tv_sec: 1_612_325_106, tv_nsec: fraction)]
        #expect(utimensat(AT_FDCWD, source.appendingPathComponent("page\(i).html").path, &times, 0) == 0)
      }
      let m = try fx.mount(options: ["writable"])
      var (status, output) = runTool("/usr/bin/rsync", ["-a", "--stats", source.path + "/", m.path("site") + "/"])
      #expect(status == 0, "\(output)")
      (status, output) = bucketSync(m)
      #expect(status == 0, "\(output)")
      (status, output) = runTool("/usr/bin/rsync", ["-a", "--stats", source.path + "/", m.path("site") + "/"])
      #expect(status == 0 && output.contains("Number of regular files transferred: 0"), "\(output)")
      #expect(await object(fx, "site/css/site.css") == Data("body {}".utf8))
      var st = stat()
      #expect(stat(m.path("site/page1.html"), &st) == 0 && st.st_mtim.tv_sec == 1_612_325_106, "\(st.st_mtim)")
    }
  }

  /// What rsync does to each file (close, set its time, rename) with the upload landed before the
  /// time was set: the time, queued as a metadata change, goes with the file to its new name —
  /// before the bucket has it, once it has it, and on a new mount. (It took the upload's time,
  /// and a second rsync sent such files again.)
  @Test(arguments: ["firebase", "gcs"]) func aTimeSetJustBeforeARenameGoesWithTheFile(api: String) async throws {
    try await MountFixture.scope { fx in
      let m = try fx.mount(options: ["writable", "metadata_ttl=60"], extra: ["--api", api])
      var (status, output) = shell("mkdir site; printf 'page' > site/.page.html.tmp", in: m)
      #expect(status == 0, "\(output)")
      (status, output) = bucketSync(m)
      #expect(status == 0, "\(output)")
      // Staged, so that a rename through the Firebase API (a download and an upload) needs no server.
      (status, output) = shell("cat site/.page.html.tmp", in: m)
      #expect(status == 0 && output == "page", "\(output)")
      try await waitStaged(m.path("site/.page.html.tmp"))
      // The server refuses everything: the time stays a queued metadata change through the rename.
      fx.emulator!.setFaults(failingEverything())
      (status, output) = shell("touch -m -d @1612325106 site/.page.html.tmp; chmod 600 site/.page.html.tmp; mv site/.page.html.tmp site/page.html", in: m)
      #expect(status == 0, "\(output)")
      func expectKept(_ path: String, sourceLocation: SourceLocation = #_sourceLocation) {
        var st = stat()
        #expect(
          stat(path, &st) == 0 && st.st_mtim.tv_sec == 1_612_325_106 && st.st_mode & 0o777 == 0o600,
          "\(st.st_mtim.tv_sec) \(String(st.st_mode, radix: 8))", sourceLocation: sourceLocation)
      }
      expectKept(m.path("site/page.html"))
      fx.emulator!.setFaults(Faults())
      (status, output) = bucketSync(m)
      #expect(status == 0, "\(output)")
      #expect(await object(fx, "site/page.html") == Data("page".utf8))
      #expect(await object(fx, "site/.page.html.tmp") == nil)
      expectKept(m.path("site/page.html"))
      let again = try fx.mount(options: ["writable"], extra: ["--api", api], name: api + "-again")
      expectKept(again.path("site/page.html"))
    }
  }

  /// git clone into the mount, then a clean `git status` and `git fsck`; SQLite with
  /// transactions (its journal made, fsynced and deleted): after `bucketfs sync` a new mount
  /// reads both back, and no change of this mount's own was taken for a conflict.
  @Test func gitAndSQLiteWorkInTheMount() async throws {
    try await MountFixture.scope { fx in
      let repo = try fx.folder("origin")
      var (status, output) = runTool(
        "/bin/sh",
        ["-c", "set -e; cd '\(repo.path)'; git init -q .; for i in 1 2 3; do echo \"line $i\" > f$i.txt; git add f$i.txt; git -c user.email=t@example.com -c user.name=t commit -qm c$i; done"])
      #expect(status == 0, "\(output)")
      let m = try fx.mount(options: ["writable"])
      (status, output) = shell(
        """
        git clone -q '\(repo.path)' repo
        cd repo
        test -z "$(git status --porcelain)"
        git fsck --no-progress
        cd ..
        sqlite3 notes.db "create table t(a text); begin; insert into t values('one'); insert into t values('two'); commit; begin; insert into t values('three'); commit;"
        test "$(sqlite3 notes.db 'select count(*) from t')" = 3
        """, in: m)
      #expect(status == 0, "\(output)")
      (status, output) = bucketSync(m, timeout: 60)
      #expect(status == 0, "\(output)")
      let all = try await names(fx)
      #expect(!all.contains { $0.contains(".conflict-") }, "\(all.filter { $0.contains(".conflict-") })")
      #expect(m.conflicts == 0, "\(m.log)")
      m.unmount()
      let again = try fx.mount(options: ["writable"], name: "again")
      (status, output) = shell(
        """
        cd repo && test -z "$(git status --porcelain)" && git log --oneline | wc -l | grep -q 3 && cd ..
        test "$(sqlite3 notes.db 'select group_concat(a) from t')" = "one,two,three"
        """, in: again)
      #expect(status == 0, "\(output)")
    }
  }

  /// Someone else changes an object while it is open for writing here, and the edit rewrites
  /// bytes it opened (not an append, which would be carried onto theirs): their version keeps
  /// the name, ours goes beside it under a conflict name, nothing is lost, and fsync says ESTALE.
  @Test(arguments: ["firebase", "gcs"]) func aChangeMadeElsewhereIsNeverOverwritten(api: String) async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("shared/plan.txt", Data("v1".utf8))
      let m = try fx.mount(options: ["writable"], extra: ["--api", api], name: api)
      let fd = open(m.path("shared/plan.txt"), O_WRONLY)
      #expect(fd >= 0)
      _ = try await fx.put("shared/plan.txt", Data("theirs".utf8))
      #expect(pwrite(fd, "V1+ours", 7, 0) == 7)
      // fsync waits for the upload, which went beside their version: it says so (ESTALE).
      #expect(fsync(fd) == -1 && errno == ESTALE, "fsync: \(String(cString: strerror(errno)))")
      #expect(close(fd) == 0)
      let (status, output) = bucketSync(m)
      #expect(status == 0, "\(output)")
      #expect(await object(fx, "shared/plan.txt") == Data("theirs".utf8))
      let conflicts = try await names(fx, under: "shared").filter { $0.hasPrefix("shared/plan.txt.conflict-") }
      #expect(conflicts.count == 1)
      if let name = conflicts.first {
        #expect(await object(fx, name) == Data("V1+ours".utf8))
        let shown = m.path(name)
        #expect(try getxattr(shown, "user.sync_state").get() == "conflict")
      }
      #expect(m.conflicts == 1, "\(m.log)")
    }
  }

  /// Changes made while the server fails wait in the queue, which `bucketfs sync` reports, and go
  /// out when it answers again; the queue survives `kill -9` and a new mount carries it out.
  @Test func theQueueWaitsForTheServerAndOutlivesTheDaemon() async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("notes/a.txt", Data("a".utf8))
      let m = try fx.mount(options: ["writable", "read_timeout=2", "metadata_ttl=60"])
      // Seen with its attributes (its generation) before the server fails: a delete names it.
      var seen = stat()
      #expect(stat(m.path("notes/a.txt"), &seen) == 0)
      // Listed too: with the server failing, the folder shows its last listing with this
      // mount's changes (a folder never listed would answer EIO, issue 55).
      #expect(try FileManager.default.contentsOfDirectory(atPath: m.path("notes")) == ["a.txt"])
      fx.emulator!.setFaults(failingEverything())
      var (status, output) = shell("printf 'written while the server fails' > notes/b.txt; rm notes/a.txt", in: m)
      #expect(status == 0, "\(output)")
      // fsync returns once the bytes are safe locally when the server cannot take them.
      let fd = open(m.path("notes/c.txt"), O_CREAT | O_WRONLY, 0o644)
      #expect(fd >= 0 && write(fd, "synced locally", 14) == 14)
      #expect(fsync(fd) == 0)
      close(fd)
      (status, output) = bucketSync(m, timeout: 1)
      #expect(status == 1 && output.contains("notes/b.txt"), "\(output)")
      #expect(try FileManager.default.contentsOfDirectory(atPath: m.path("notes")).sorted() == ["b.txt", "c.txt"])
      #expect(["pending", "uploading"].contains(try getxattr(m.path("notes/b.txt"), "user.sync_state").get()))

      // The daemon dies with the changes still queued.
      m.process.send(SIGKILL)
      m.process.wait()
      m.unmount()
      fx.emulator!.setFaults(Faults())
      #expect(await object(fx, "notes/b.txt") == nil)
      let next = try fx.mount(options: ["writable"], name: "next")
      (status, output) = bucketSync(next)
      #expect(status == 0, "\(output)")
      #expect(await object(fx, "notes/b.txt") == Data("written while the server fails".utf8))
      #expect(await object(fx, "notes/c.txt") == Data("synced locally".utf8))
      #expect(await object(fx, "notes/a.txt") == nil)
      // Carried out by this mount, from the queue the killed one left.
      #expect((next.queueDone ?? 0) >= 2, "\(next.stat("write-back queue") ?? "no stats")")
    }
  }

  /// An offline mount (`--offline`) accepts changes and talks to no server; the next mount that
  /// does carries them out. A change the bucket refuses (here its rules deny the name: 403) is
  /// kept as failed, said by `bucketfs sync` and the log, and nothing else waits behind it.
  @Test func offlineChangesWaitAndRefusedNamesAreKept() async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("box/seen.txt", Data("seen".utf8))
      let first = try fx.mount(options: ["writable"], name: "first")
      #expect(try readFile(first.path("box/seen.txt")).get() == Data("seen".utf8))
      // The read stages the file off its reply: the offline mount knows box/ only from that copy.
      #expect(await eventually { getxattr(first.path("box/seen.txt"), "user.staged") == .success("complete") })
      first.unmount()
      let offline = try fx.mount(options: ["writable", "offline"], name: "offline")
      let before = fx.emulator!.requestsServed
      var (status, output) = shell("printf 'made offline' > box/offline.txt", in: offline)
      #expect(status == 0, "\(output)")
      (status, output) = bucketSync(offline, timeout: 1)
      #expect(status == 1 && output.contains("box/offline.txt"), "\(output)")
      #expect(fx.emulator!.requestsServed == before, "an offline mount sent \(fx.emulator!.requestsServed - before) requests")
      offline.unmount()
      let online = try fx.mount(options: ["writable"], name: "online")
      var denying = Faults()
      denying.errorStatus = 403
      denying.errorFraction = 1
      // Only the upload (its query names the object); lookups of the name are answered.
      denying.pathFilter = "name=box%2Fdenied.txt"
      fx.emulator!.setFaults(denying)
      (status, output) = shell("printf 'bad' > box/denied.txt; printf 'good' > box/after.txt", in: online)
      #expect(status == 0, "\(output)")
      (status, output) = bucketSync(online, timeout: 30)
      #expect(status == 1 && output.contains("failed"), "\(output)")
      #expect(await object(fx, "box/offline.txt") == Data("made offline".utf8))
      #expect(await object(fx, "box/after.txt") == Data("good".utf8))
      #expect(online.queueFailed == 1, "\(online.stat("write-back queue") ?? "no stats")")
      #expect(try getxattr(online.path("box/denied.txt"), "user.sync_state").get() == "failed")
      fx.emulator!.setFaults(Faults())
    }
  }

  /// `setfattr -n user.content_type` and `user.meta.KEY` set the object's metadata, on a file in
  /// the bucket and on one still queued; an overwrite keeps the content type it had.
  @Test func setfattrChangesTheObjectsMetadata() async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("meta/page.bin", Data("<html></html>".utf8), contentType: "application/octet-stream")
      let m = try fx.mount(options: ["writable"])
      var (status, output) = shell(
        """
        setfattr -n user.content_type -v text/html meta/page.bin
        setfattr -n user.meta.owner -v alice meta/page.bin
        printf 'new' > meta/new.dat
        setfattr -n user.content_type -v application/x-new meta/new.dat
        setfattr -n user.meta.stage -v draft meta/new.dat
        """, in: m)
      #expect(status == 0, "\(output)")
      (status, output) = shell("setfattr -n user.size -v 1 meta/page.bin", in: m)
      #expect(status != 0 && output.contains("Operation not permitted"), "\(output)")
      (status, output) = bucketSync(m)
      #expect(status == 0, "\(output)")
      let page = try await fx.storage.reference(withPath: "meta/page.bin").getMetadata()
      #expect(page.contentType == "text/html" && page.customMetadata?["owner"] == "alice")
      #expect(await object(fx, "meta/page.bin") == Data("<html></html>".utf8))
      let new = try await fx.storage.reference(withPath: "meta/new.dat").getMetadata()
      #expect(new.contentType == "application/x-new" && new.customMetadata?["stage"] == "draft")
      (status, output) = shell("printf '<p>changed</p>' > meta/page.bin", in: m)
      #expect(status == 0, "\(output)")
      (status, output) = bucketSync(m)
      #expect(status == 0, "\(output)")
      let rewritten = try await fx.storage.reference(withPath: "meta/page.bin").getMetadata()
      #expect(rewritten.contentType == "text/html" && rewritten.customMetadata?["owner"] == "alice")
    }
  }

  /// Queued bytes count against `staging_size` and are never evicted: past it a write fails with
  /// ENOSPC, and what was queued before still reaches the bucket.
  @Test func aFullQueueRefusesWritesAndLosesNothing() async throws {
    try await MountFixture.scope { fx in
      let m = try fx.mount(options: ["writable", "staging_size=1M"])
      var (status, output) = shell("printf 'kept' > small.txt && head -c 600000 /dev/zero > half.bin", in: m)
      #expect(status == 0, "\(output)")
      (status, output) = shell("head -c 2000000 /dev/zero > big.bin", in: m)
      #expect(status != 0 && output.contains("No space left on device"), "\(output)")
      (status, output) = bucketSync(m)
      #expect(status == 0, "\(output)")
      #expect(await object(fx, "small.txt") == Data("kept".utf8))
      #expect(await object(fx, "half.bin")?.count == 600_000)
    }
  }

  /// A large upload cut short by `kill -9` continues where the server has it: its resumable
  /// session is kept with the queued change, and the next mount sends only the rest.
  @Test(arguments: ["firebase", "gcs"]) func aLargeUploadCutByACrashContinuesWhereItWas(api: String) async throws {
    try await MountFixture.scope { fx in
      let data = randomData(3 << 20, seed: 4242)
      let m = try fx.mount(options: ["writable", "upload_chunk=256K"], extra: ["--api", api], name: api)
      // Each chunk takes a while to arrive, so the crash comes mid-upload.
      var slow = Faults()
      slow.latency = .milliseconds(300)
      slow.pathFilter = "upload_id="
      fx.emulator!.setFaults(slow)
      // cp, not Data.write: Foundation fsyncs, and fsync waits for the upload.
      let local = fx.root.appendingPathComponent("large.bin")
      try data.write(to: local)
      let (copied, copyOutput) = runTool("/bin/cp", [local.path, m.path("large.bin")])
      #expect(copied == 0, "\(copyOutput)")
      // The session is on disk with the change; wait until the server holds some chunks of it.
      let queue = fx.root.appendingPathComponent("staging")
      var session: String? = nil
      var received: Int64 = 0
      for _ in 0..<400 where received < 512 << 10 {
        try await Task.sleep(for: .milliseconds(25))
        let folders = ((try? FileManager.default.subpathsOfDirectory(atPath: queue.path)) ?? []).filter { $0.hasSuffix("/queue") }
        for folder in folders {
          for record in queueRecords(queue.appendingPathComponent(folder)).live.values {
            if let url = record["sessionURL"] as? String { session = url }
          }
        }
        guard let session else { continue }
        let answer = try await HTTPClient.shared.send(HTTPRequest(
          method: api == "gcs" ? "PUT" : "POST", url: session,
          headers: api == "gcs" ? [("Content-Range", "bytes */\(data.count)")] : [("X-Goog-Upload-Command", "query")]))
        if let text = answer.head["x-goog-upload-size-received"], let n = Int64(text) { received = n }
        if let range = answer.head["range"], let end = range.split(separator: "-").last.flatMap({ Int64($0) }) { received = end + 1 }
      }
      #expect(
        session != nil && received >= 512 << 10 && received < data.count,
        "session \(String(describing: session)), \(received) bytes; \((try? FileManager.default.subpathsOfDirectory(atPath: queue.path)) ?? []); \(m.log)")
      m.process.send(SIGKILL)
      m.process.wait()
      m.unmount()
      fx.emulator!.setFaults(Faults())
      let before = fx.emulator!.bodyBytesReceived
      let next = try fx.mount(options: ["writable", "upload_chunk=256K"], extra: ["--api", api], name: api + "-next")
      let (status, output) = bucketSync(next)
      #expect(status == 0, "\(output)")
      #expect(await object(fx, "large.bin") == data)
      let sent = fx.emulator!.bodyBytesReceived - before
      #expect(sent <= data.count - Int(received) + (256 << 10), "\(sent) bytes sent again after \(received) were received")
    }
  }

  /// Faults while the queue works: connections reset in the middle of uploads, two processes
  /// writing one file, and an object deleted on the server while it was being changed here.
  /// Every byte ends in the bucket (or beside the object), and nothing is mixed.
  @Test func faultsDuringUploadsLoseNothing() async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("f/doomed.txt", Data("v1".utf8))
      _ = try await fx.put("f/rotated.log", Data("old lines\n".utf8))
      let m = try fx.mount(options: ["writable", "upload_chunk=256K"])
      // Uploads cut after 100 KB, three times: the queue tries again and gets them through.
      var resets = Faults()
      resets.resetAfterBytes = 100_000
      resets.pathFilter = "upload"
      resets.limit = 3
      fx.emulator!.setFaults(resets)
      let big = randomData(900_000, seed: 4343)
      let local = fx.root.appendingPathComponent("big.bin")
      try big.write(to: local)
      var (status, output) = runTool("/bin/cp", [local.path, m.path("f/big.bin")])
      #expect(status == 0, "\(output)")
      // Two processes append to one file at once: both writes are in the one version uploaded.
      let appends = await withTaskGroup(of: Int32.self) { group in
        for letter in ["A", "B"] {
          group.addTask { runTool("/bin/sh", ["-c", "printf '\(letter)' >> '\(m.path("f/shared.txt"))'"]).0 }
        }
        return await group.reduce(into: [Int32]()) { $0.append($1) }
      }
      #expect(appends == [0, 0])
      // Deleted on the server while open for writing here: ours goes beside it, nothing is lost.
      let fd = open(m.path("f/doomed.txt"), O_WRONLY)
      #expect(fd >= 0)
      let log = open(m.path("f/rotated.log"), O_WRONLY | O_APPEND)
      #expect(log >= 0)
      try await fx.storage.reference(withPath: "f/doomed.txt").delete()
      try await fx.storage.reference(withPath: "f/rotated.log").delete()
      #expect(pwrite(fd, "V1+mine", 7, 0) == 7)
      #expect(close(fd) == 0)
      // An append onto an object deleted meanwhile (a log rotated away) starts it anew with
      // what was appended, as `>>` after the deletion would.
      #expect(write(log, "new line\n", 9) == 9)
      #expect(close(log) == 0)
      (status, output) = bucketSync(m)
      #expect(status == 0, "\(output)")
      #expect(await object(fx, "f/big.bin") == big)
      let shared = await object(fx, "f/shared.txt")
      #expect(shared == Data("AB".utf8) || shared == Data("BA".utf8), "\(String(describing: shared))")
      let kept = try await names(fx, under: "f").filter { $0.hasPrefix("f/doomed.txt.conflict-") }
      #expect(kept.count == 1)
      if let name = kept.first { #expect(await object(fx, name) == Data("V1+mine".utf8)) }
      #expect(await object(fx, "f/doomed.txt") == nil)
      #expect(await object(fx, "f/rotated.log") == Data("new line\n".utf8))
      #expect(try await names(fx, under: "f").filter { $0.hasPrefix("f/rotated.log.conflict-") }.isEmpty)
    }
  }

  /// `mv` of a folder renames it file by file through the queue (one rename(2), no copy through
  /// the kernel); a folder above the limit answers EXDEV and `mv` copies it instead.
  @Test func aFolderRenameMovesEveryFile() async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("proj/a.txt", Data("a".utf8))
      _ = try await fx.put("proj/sub/b.txt", Data("b".utf8))
      let m = try fx.mount(options: ["writable"])
      var (status, output) = shell("printf 'c' > proj/sub/c.txt; mkdir proj/empty; mv proj renamed", in: m)
      #expect(status == 0, "\(output)")
      #expect(try FileManager.default.contentsOfDirectory(atPath: m.path("renamed")).sorted() == ["a.txt", "empty", "sub"])
      #expect(try readFile(m.path("renamed/sub/c.txt")).get() == Data("c".utf8))
      #expect(!FileManager.default.fileExists(atPath: m.path("proj")))
      (status, output) = bucketSync(m)
      #expect(status == 0, "\(output)")
      let all = try await names(fx)
      #expect(all.filter { $0.hasPrefix("proj") }.isEmpty, "\(all)")
      #expect(await object(fx, "renamed/a.txt") == Data("a".utf8))
      #expect(await object(fx, "renamed/sub/b.txt") == Data("b".utf8))
      #expect(await object(fx, "renamed/sub/c.txt") == Data("c".utf8))
      #expect(all.contains("renamed/empty/"))
    }
  }

  /// A shell's `>` closes the new file once before the command writes it: the empty copy waits
  /// a moment, the command's copy replaces it, and the file goes up once.
  @Test func aShellRedirectionUploadsOnce() async throws {
    try await MountFixture.scope { fx in
      let m = try fx.mount(options: ["writable"])
      var (status, output) = shell("printf 'hello' > once.txt", in: m)
      #expect(status == 0, "\(output)")
      (status, output) = bucketSync(m)
      #expect(status == 0, "\(output)")
      #expect(await object(fx, "once.txt") == Data("hello".utf8))
      (status, output) = runTool(bucketfsBinary, ["stats", m.mountpoint.path])
      #expect(status == 0 && output.contains("0 changes, 0 bytes, 0 failed, 1 done, 0 conflicts"), "\(output)")
    }
  }

  /// A stalled upload gives up within read_timeout and goes again; a rename queued when the
  /// daemon is killed (the server failing, so nothing of it went out; the bytes come from the
  /// staged copy) is carried out by the next mount: the new name has the bytes, the old is gone.
  @Test func aStallAndAKilledRenameLoseNothing() async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("r/old.txt", Data("renamed bytes".utf8))
      let m = try fx.mount(options: ["writable", "read_timeout=2", "metadata_ttl=60"])
      var stall = Faults()
      stall.stallAfterBytes = 10
      stall.pathFilter = "upload"
      stall.limit = 1
      fx.emulator!.setFaults(stall)
      var (status, output) = shell("printf 'after a stall' > r/stalled.txt", in: m)
      #expect(status == 0, "\(output)")
      (status, output) = bucketSync(m)
      #expect(status == 0, "\(output)")
      #expect(await object(fx, "r/stalled.txt") == Data("after a stall".utf8))

      // Read once, so its staged copy can give its bytes while the server fails.
      #expect(try readFile(m.path("r/old.txt")).get() == Data("renamed bytes".utf8))
      try await waitStaged(m.path("r/old.txt"))
      fx.emulator!.setFaults(failingEverything())
      (status, output) = shell("mv r/old.txt r/new.txt", in: m)
      #expect(status == 0, "\(output)")
      m.process.send(SIGKILL)
      m.process.wait()
      m.unmount()
      fx.emulator!.setFaults(Faults())
      #expect(await object(fx, "r/old.txt") == Data("renamed bytes".utf8))
      let next = try fx.mount(options: ["writable"], name: "next")
      (status, output) = bucketSync(next)
      #expect(status == 0, "\(output)")
      #expect(await object(fx, "r/new.txt") == Data("renamed bytes".utf8))
      #expect(await object(fx, "r/old.txt") == nil)
    }
  }

  /// Over the GCS API a rename is a move on the server (`objects.move`): nothing is downloaded
  /// or uploaded, it is accepted with the server away, the new name reads the old bytes until
  /// the move lands, and a move whose answer was lost is not taken for a conflict.
  /// (`MoveRenameTests` has the copy-then-delete a server without move gets.)
  @Test func renamesOnGCSAreMovedByTheServer() async throws {
    try await MountFixture.scope { fx in
      let big = randomData(6 << 20, seed: 17)
      _ = try await fx.put("g/big.bin", big)
      _ = try await fx.put("g/dir/x.txt", Data("x".utf8))
      _ = try await fx.put("g/dir/sub/y.txt", Data("y".utf8))
      let m = try fx.mount(options: ["writable", "read_timeout=2", "metadata_ttl=60"], extra: ["--api", "gcs"])
      var before = stat()
      #expect(stat(m.path("g/big.bin"), &before) == 0)
      #expect(try FileManager.default.contentsOfDirectory(atPath: m.path("g/dir")).sorted() == ["sub", "x.txt"])
      let emulator = fx.emulator!
      let (sent, received) = (emulator.bodyBytesSent, emulator.bodyBytesReceived)

      // The bucket refuses moves for now: the renames wait in the queue, and show at once.
      var refusing = Faults()
      refusing.errorStatus = 503
      refusing.errorFraction = 1
      refusing.pathFilter = "moveTo"
      emulator.setFaults(refusing)
      var (status, output) = shell("mv g/big.bin g/moved.bin; mv g/dir g/folder", in: m)
      #expect(status == 0, "\(output)")
      var after = stat()
      #expect(stat(m.path("g/moved.bin"), &after) == 0 && after.st_size == big.count)
      #expect(after.st_mtim.tv_sec == before.st_mtim.tv_sec)
      #expect(try readFile(m.path("g/moved.bin")).get() == big)
      #expect(try readFile(m.path("g/folder/sub/y.txt")).get() == Data("y".utf8))
      #expect(try FileManager.default.contentsOfDirectory(atPath: m.path("g")).sorted() == ["folder", "moved.bin"])
      #expect(try getxattr(m.path("g/moved.bin"), "user.sync_state").get() != "synced")
      #expect(await object(fx, "g/big.bin") == big)

      // The answer to the file's move is lost: the move was made, and its retry must see that
      // (and still give the moved object the file's time).
      var losing = Faults()
      losing.loseAnswerTo = "moveTo/o/g%2Fmoved.bin"
      losing.limit = 1
      emulator.setFaults(losing)
      (status, output) = bucketSync(m)
      #expect(status == 0, "\(output)")
      let all = try await names(fx, under: "g")
      #expect(all == ["g/folder/", "g/folder/sub/", "g/folder/sub/y.txt", "g/folder/x.txt", "g/moved.bin"], "\(all)")
      #expect(await object(fx, "g/moved.bin") == big)
      #expect(await object(fx, "g/folder/x.txt") == Data("x".utf8))
      // The mount read the moved file once (this test read big.bin and moved.bin once more each
      // with the Swift API); nothing went up but folder placeholders.
      #expect(emulator.bodyBytesSent - sent - 2 * big.count < big.count + (1 << 20))
      #expect(emulator.bodyBytesReceived - received < 64 << 10)
      let m2 = try await fx.storage.reference(withPath: "g/moved.bin").getMetadata()
      #expect(m2.customMetadata?["mtime"] != nil)
      #expect(m.conflicts == 0, "\(m.log)")
      #expect(emulator.faultsInjected == 1)
      // Three files moved; the one whose answer was lost took a second try (404) and is not
      // counted among those moved in one request.
      #expect(m.count("renames on the server", "moved in one request") == 2, "\(String(describing: m.stat("renames on the server")))")
    }
  }

  /// The server makes the first version, and its answer is lost: the retry's precondition
  /// fails on the version it made. That is our version, not a conflict, and what follows it
  /// (appends fsync'd after it) lands on the name.
  @Test(arguments: ["firebase", "gcs"]) func anUploadWhoseAnswerWasLostIsNotAConflict(api: String) async throws {
    try await MountFixture.scope { fx in
      let emulator = try #require(fx.emulator)
      let m = try fx.mount(options: ["writable"], extra: ["--api", api], name: api)
      var losing = Faults()
      // The name in the upload's query, over both APIs (name=lost%2Fchain.txt).
      losing.loseAnswerTo = "name=lost%2Fchain.txt"
      losing.limit = 1
      emulator.setFaults(losing)
      var (status, output) = shell("mkdir -p lost; printf 'one\\n' > lost/chain.txt", in: m)
      #expect(status == 0, "\(output)")
      (status, output) = bucketSync(m)
      #expect(status == 0, "\(output)")
      emulator.setFaults(Faults())
      (status, output) = shell("printf 'two\\n' >> lost/chain.txt; sync lost/chain.txt; printf 'three\\n' >> lost/chain.txt", in: m)
      #expect(status == 0, "\(output)")
      (status, output) = bucketSync(m)
      #expect(status == 0, "\(output)")
      #expect(await object(fx, "lost/chain.txt") == Data("one\ntwo\nthree\n".utf8))
      #expect(try await names(fx, under: "lost") == ["lost/", "lost/chain.txt"])
      #expect(m.conflicts == 0, "\(m.log)")
      #expect(try getxattr(m.path("lost/chain.txt"), "user.sync_state").get() == "synced")
    }
  }

  /// A name the bucket cannot hold exactly is refused when it is made, never stored as another
  /// name: bytes that are not UTF-8 (EILSEQ), a line break (EINVAL), an object name past 1,024
  /// bytes (ENAMETOOLONG), and a second spelling of a name in one folder (NFD beside NFC: the
  /// bucket keeps both, the mount could not tell them apart).
  @Test func namesTheBucketCannotHoldExactlyAreRefused() async throws {
    try await MountFixture.scope { fx in
      let nfd = "cafe\u{301}"
      _ = try await fx.put("names/remote-\(nfd).txt", Data("remote nfd".utf8))
      let m = try fx.mount(options: ["writable"])
      let dir = m.path("names")
      func create(_ name: [UInt8]) -> Int32 {
        let path = Array(dir.utf8) + [UInt8(ascii: "/")] + name + [0]
        let fd = path.withUnsafeBufferPointer { p in
          p.baseAddress!.withMemoryRebound(to: CChar.self, capacity: p.count) { open($0, O_CREAT | O_WRONLY, 0o644) }
        }
        if fd < 0 { return errno }
        _ = write(fd, name, name.count)
        close(fd)
        return 0
      }
      #expect(create([0xFF, 0xFE, 0x2D, 0x78]) == EILSEQ)
      #expect(create([0xFE, 0xFF, 0x2D, 0x78]) == EILSEQ)
      #expect(create(Array("line\nbreak".utf8)) == EINVAL)
      #expect(create(Array("carriage\rreturn".utf8)) == EINVAL)
      let nfc = "caf\u{e9}"
      #expect(create(Array("\(nfc).txt".utf8)) == 0)
      #expect(create(Array("\(nfd).txt".utf8)) == EILSEQ)
      // The remote NFD object: its NFC spelling is neither it nor makeable.
      #expect(readFile(m.path("names/remote-\(nfc).txt")) == .failure(Errno(ENOENT)))
      #expect(create(Array("remote-\(nfc).txt".utf8)) == EILSEQ)
      #expect(try readFile(m.path("names/remote-\(nfd).txt")).get() == Data("remote nfd".utf8))
      #expect(mkdir(m.path("names/bad\ndir"), 0o755) == -1 && errno == EINVAL)
      // names/ and five folders of 250 bytes: the fifth would be an object name of 1,260 bytes.
      let deep = (0..<5).map { _ in String(repeating: "d", count: 250) }.joined(separator: "/")
      var (status, output) = shell("mkdir -p names/\(deep)", in: m)
      #expect(status != 0 && output.contains("File name too long"), "\(output)")
      #expect(create(Array("ok.txt".utf8)) == 0)
      #expect(rename(m.path("names/ok.txt"), m.path("names/moved\nname")) == -1 && errno == EINVAL)
      #expect(rename(m.path("names/ok.txt"), m.path("names/\(nfd).txt")) == -1 && errno == EILSEQ)
      (status, output) = bucketSync(m)
      #expect(status == 0, "\(output)")
      let stored = try await names(fx, under: "names")
      #expect(stored.allSatisfy { $0.utf8.count <= 1024 })
      #expect(
        stored.filter { !$0.hasPrefix("names/ddd") } == ["names/caf\u{e9}.txt", "names/ok.txt", "names/remote-\(nfd).txt"].sorted(),
        "\(stored)")
      #expect(stored.contains { Array($0.utf8) == Array("names/caf\u{e9}.txt".utf8) })
      #expect(await object(fx, "names/caf\u{e9}.txt") == Data("caf\u{e9}.txt".utf8))
      #expect(await object(fx, "names/ok.txt") == Data("ok.txt".utf8))
    }
  }

  /// `bucketfs sync` lists what waits with the names' control characters escaped: a name that
  /// holds a terminal's retitle and clear-screen sequences is printed as text, not obeyed.
  @Test func syncPrintsNamesEscaped() async throws {
    try await MountFixture.scope { fx in
      let m = try fx.mount(options: ["writable"])
      var denying = Faults()
      denying.errorStatus = 403
      denying.errorFraction = 1
      denying.pathFilter = "name=evil"
      fx.emulator!.setFaults(denying)
      let evil = "evil\u{1b}]0;TITLE\u{07}\u{1b}[2J.txt"
      #expect(FileManager.default.createFile(atPath: m.path(evil), contents: Data("x".utf8)))
      let (status, output) = bucketSync(m)
      #expect(status == 1)
      #expect(!output.utf8.contains(0x1b) && !output.utf8.contains(0x07), "\(output.debugDescription)")
      #expect(output.contains("evil\\x1b]0;TITLE\\x07\\x1b[2J.txt"), "\(output.debugDescription)")
      fx.emulator!.setFaults(Faults())
    }
  }

  /// A queue damaged between mounts is never read silently: bytes that are not the ones queued,
  /// a journal damaged in the middle (every record from there on), and bytes no record owns are
  /// kept aside in the queue's damaged/ folder, said by the log, `bucketfs sync` and the
  /// metrics, and nothing of them reaches the bucket; the sound changes go, and so does a queue
  /// an earlier version left (a record file per change).
  @Test func aDamagedQueueIsKeptAsideNotCarriedOut() async throws {
    try await MountFixture.scope { fx in
      let offline = try fx.mount(options: ["writable", "offline"], name: "offline")
      // One change each: open, write, close (FileManager writes under a temporary name and renames).
      for name in ["good", "cut-bytes", "late-1", "late-2"] {
        let fd = open(offline.path("\(name).txt"), O_WRONLY | O_CREAT | O_EXCL, 0o644)
        let text = Data("the \(name) file\n".utf8)
        #expect(fd >= 0 && text.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == text.count)
        #expect(close(fd) == 0)
      }
      #expect(bucketSync(offline, timeout: 1).0 == 1)
      offline.unmount()
      // staging/<the bucket's folder>/queue
      let staging = fx.root.appendingPathComponent("staging")
      let bucketFolder = try #require(try FileManager.default.contentsOfDirectory(atPath: staging.path).first)
      let queue = staging.appendingPathComponent(bucketFolder).appendingPathComponent("queue")
      let records = queueRecords(queue).live
      func record(of name: String) throws -> (sequence: UInt64, fields: [String: Any], data: URL) {
        let (sequence, fields) = try #require(records.first { $0.value["name"] as? String == "\(name).txt" })
        return (sequence, fields, queue.appendingPathComponent(String(format: "%012llu.data", sequence)))
      }
      try Data("the cut".utf8).write(to: try record(of: "cut-bytes").data)
      // One byte of late-1's first record changed: it and every record after it are kept aside.
      let log = queue.appendingPathComponent("changes.log")
      var journal = try Data(contentsOf: log)
      let late = try #require(journal.range(of: Data("\"late-1.txt\"".utf8)))
      journal[late.lowerBound + 2] ^= 0x20
      try journal.write(to: log)
      // Bytes no record owns (a copy of good's under a number no record has).
      try FileManager.default.copyItem(at: try record(of: "good").data, to: queue.appendingPathComponent("000000009999.data"))
      // A queue of the version before: its record file is read, and moved into the journal.
      var legacy = try record(of: "good").fields
      legacy["sequence"] = 7777
      legacy["name"] = "legacy.txt"
      legacy.removeValue(forKey: "dataSize")
      legacy.removeValue(forKey: "dataCRC32C")
      try JSONSerialization.data(withJSONObject: legacy).write(to: queue.appendingPathComponent("000000007777.json"))
      try Data("the legacy file\n".utf8).write(to: queue.appendingPathComponent("000000007777.data"))
      // Not damage: a close cut short before its record (bytes under a temporary name only) is
      // dropped, and one cut short between its two renames is finished.
      try Data("never acknowledged".utf8).write(to: queue.appendingPathComponent("000000008888.data.tmp"))
      let good = try record(of: "good").data
      try FileManager.default.moveItem(at: good, to: good.appendingPathExtension("tmp"))

      let online = try fx.mount(options: ["writable"], name: "online")
      let (status, output) = bucketSync(online)
      // cut-bytes; the journal's end; late-1's, late-2's and the copied bytes, which no record owns.
      #expect(status == 1 && output.contains("5 damaged records kept aside"), "\(output)")
      #expect(await object(fx, "good.txt") == Data("the good file\n".utf8))
      #expect(await object(fx, "legacy.txt") == Data("the legacy file\n".utf8))
      for name in ["cut-bytes", "late-1", "late-2"] { #expect(await object(fx, "\(name).txt") == nil, "\(name)") }
      #expect(try await names(fx).filter { $0.contains("conflict") }.isEmpty)
      #expect(online.stat("damaged queue records") == "5 kept aside, not carried out")
      #expect(online.log.contains("the journal is damaged"), "\(online.log)")
      let aside = try FileManager.default.contentsOfDirectory(atPath: queue.appendingPathComponent("damaged").path)
      // Five reasons; cut-bytes' record and bytes, the journal's end, three sets of bytes.
      #expect(aside.filter { $0.hasSuffix(".why") }.count == 5 && aside.count == 5 + 6, "\(aside.sorted())")
      #expect(aside.contains { $0.hasSuffix("changes.log.rest") })
      #expect(!FileManager.default.fileExists(atPath: queue.appendingPathComponent("000000008888.data.tmp").path))
      #expect(!FileManager.default.fileExists(atPath: queue.appendingPathComponent("000000007777.json").path))
      online.unmount()
      // The journal was rewritten with what is live: the next mount finds nothing damaged again.
      let again = try fx.mount(options: ["writable"], name: "again")
      #expect(bucketSync(again).0 == 1)
      #expect(!again.log.contains("kept aside in"), "\(again.log)")
    }
  }

  /// A folder rename with the server away either happens or fails: it needs every object under
  /// the folder, and the staged copies are only some of them, so it answers EIO and moves
  /// nothing (it had returned 0, moved the staged files only and deleted the placeholders).
  @Test func aFolderRenameWithTheServerAwayFailsAndMovesNothing() async throws {
    try await MountFixture.scope { fx in
      for i in 0..<30 { _ = try await fx.put("big/f\(i).txt", Data("file \(i)".utf8)) }
      _ = try await fx.put("big/", Data())
      // metadata_ttl=0: every listing asks the server.
      let m = try fx.mount(options: ["writable", "metadata_ttl=0"])
      // Two of them staged: the part of the folder a listing from staged copies would show.
      #expect(try readFile(m.path("big/f1.txt")).get() == Data("file 1".utf8))
      #expect(try readFile(m.path("big/f2.txt")).get() == Data("file 2".utf8))
      fx.stopEmulator()
      #expect(rename(m.path("big"), m.path("moved")) == -1 && errno == EIO)
      #expect(try readFile(m.path("big/f1.txt")).get() == Data("file 1".utf8))
      let (status, output) = bucketSync(m, timeout: 1)
      #expect(status == 0, "nothing may be queued: \(output)")
    }
  }

  /// A server that stops answering does not stop a writable mount from making files: a lookup
  /// it leaves unanswered past read_timeout is taken as absent (said once in the log), the new
  /// file is made and queued, and it lands when the server answers again. A read-only mount
  /// answers the same lookup EIO.
  @Test func aLookupTheServerDoesNotAnswerLetsAWritableMountMakeTheFile() async throws {
    try await MountFixture.scope { fx in
      let emulator = try #require(fx.emulator)
      // Two objects: the folder's one-item probe is then not its whole listing, so a lookup in
      // it must ask the server.
      _ = try await fx.put("frozen/old.txt", Data("old".utf8))
      _ = try await fx.put("frozen/older.txt", Data("older".utf8))
      let m = try fx.mount(options: ["writable", "read_timeout=2"])
      let ro = try fx.mount(options: ["read_timeout=2"], name: "ro")
      var frozen = Faults()
      // Every request about the new name is held unanswered until the faults are cleared.
      frozen.hold = true
      frozen.pathFilter = "new.txt"
      emulator.setFaults(frozen)
      var st = stat()
      let roStat = stat(ro.path("frozen/new.txt"), &st) == -1 ? errno : 0
      #expect(roStat == EIO, "\(String(cString: strerror(roStat))): \(ro.log)")
      let (status, output) = shell("printf 'made while the server froze' > frozen/new.txt", in: m)
      #expect(status == 0, "\(output)")
      #expect(try readFile(m.path("frozen/new.txt")).get() == Data("made while the server froze".utf8))
      emulator.setFaults(Faults())
      let synced = bucketSync(m)
      #expect(synced.0 == 0, "\(synced.1)")
      #expect(await object(fx, "frozen/new.txt") == Data("made while the server froze".utf8))
    }
  }

  /// fsync waits for its file's upload within its bound (read_timeout): a server that takes
  /// the upload and never answers does not hold it, and the bytes, safe in the queue, reach the
  /// bucket once the server answers again.
  @Test func fsyncAnswersWithinItsBoundWhileTheServerHoldsTheUpload() async throws {
    try await MountFixture.scope { fx in
      let emulator = try #require(fx.emulator)
      let m = try fx.mount(options: ["writable", "read_timeout=2"])
      var frozen = Faults()
      // The upload of the name is held unanswered until the faults are cleared.
      frozen.hold = true
      frozen.pathFilter = "held.txt"
      emulator.setFaults(frozen)
      let (status, output) = shell(
        "python3 -c \"import os; f = open('held.txt', 'w'); f.write('fsynced while held'); f.flush(); os.fsync(f.fileno()); f.close()\"",
        in: m)
      #expect(status == 0, "fsync failed: \(output)")
      // (A listing: a read of the object itself would be held too.)
      #expect(try await !names(fx).contains("held.txt"))
      #expect(try getxattr(m.path("held.txt"), "user.sync_state").get() != "synced")
      emulator.setFaults(Faults())
      let synced = bucketSync(m)
      #expect(synced.0 == 0, "\(synced.1)")
      #expect(await object(fx, "held.txt") == Data("fsynced while held".utf8))
    }
  }

  /// A listing the server does not answer within read_timeout is answered with what the mount
  /// knows: the folder's last listing and this mount's own changes (said once in the log), not
  /// EIO.
  @Test func aListingTheServerDoesNotAnswerShowsWhatTheMountKnows() async throws {
    try await MountFixture.scope { fx in
      let emulator = try #require(fx.emulator)
      _ = try await fx.put("seen/old.txt", Data("old".utf8))
      // metadata_ttl=0: every listing asks the server, so the next one meets the frozen server.
      let m = try fx.mount(options: ["writable", "read_timeout=2", "metadata_ttl=0"])
      #expect(try FileManager.default.contentsOfDirectory(atPath: m.path("seen")) == ["old.txt"])
      #expect(FileManager.default.createFile(atPath: m.path("seen/mine.txt"), contents: Data("mine".utf8)))
      var frozen = Faults()
      frozen.hold = true
      frozen.pathFilter = "prefix="
      emulator.setFaults(frozen)
      #expect(try FileManager.default.contentsOfDirectory(atPath: m.path("seen")).sorted() == ["mine.txt", "old.txt"])
      #expect(m.log.contains("listed as last seen"), "\(m.log)")
      emulator.setFaults(Faults())
    }
  }

  /// With half the requests answered 503, what is written through the mount still lands, every
  /// byte, with nothing failed and no conflict (the hostile probe found 15 of 31 changes still
  /// queued after 120 s).
  @Test func writesLandWhenHalfTheRequestsFail() async throws {
    try await MountFixture.scope { fx in
      let emulator = try #require(fx.emulator)
      let m = try fx.mount(options: ["writable", "upload_chunk=1M"])
      var flaky = Faults()
      flaky.errorStatus = 503
      flaky.errorFraction = 0.5
      emulator.setFaults(flaky)
      let files = (0..<12).map { i in randomData(i == 0 ? 3 << 20 : 40_000 + i * 1000, seed: UInt64(4200 + i)) }
      for (i, data) in files.enumerated() {
        #expect(FileManager.default.createFile(atPath: m.path("flaky-\(i).bin"), contents: data))
      }
      let (status, output) = bucketSync(m, timeout: 300)
      emulator.setFaults(Faults())
      #expect(status == 0, "\(output)")
      for (i, data) in files.enumerated() { #expect(await object(fx, "flaky-\(i).bin") == data, "flaky-\(i).bin") }
      #expect(m.conflicts == 0, "\(m.log)")
    }
  }

  @Test func aReadOnlyMountRefusesEveryChange() async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("ro/a.txt", Data("a".utf8))
      let m = try fx.mount()
      for script in ["echo x > ro/new.txt", "echo x >> ro/a.txt", "rm ro/a.txt", "mkdir ro/d", "mv ro/a.txt ro/b.txt", "touch ro/a.txt"] {
        let (status, output) = shell(script, in: m)
        #expect(status != 0 && output.contains("Read-only file system"), "\(script): \(output)")
      }
      #expect(await object(fx, "ro/a.txt") == Data("a".utf8))
    }
  }
}
