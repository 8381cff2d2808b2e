import ChildProcess
import Foundation
import TestSupport
import Testing

/// A writer elsewhere replaces an object every 0–100 ms with versions of random sizes while
/// programs open and read it through a mount whose metadata lasts 0 or 1 s: every read gives
/// exactly one version a writer wrote, whole. Never one cut to another version's length or
/// padded with zeros up to it (the kernel's idea of the size came from a newer lookup or
/// getattr while the handle served the version it opened, or the other way round).
@Suite(.serialized) struct WholeVersionReadsTests {
  /// Version `i` of `size` bytes: a header with its number and length, then lines that say
  /// the number again, so that any cut, any padding and any splice of two versions shows.
  static let versions = #"""
    def version(i, size):
        head = b"v%010d n%010d\n" % (i, size)
        line = b"%010d " % i + bytes(97 + (i + k) % 26 for k in range(52)) + b"\n"
        body = head + line * (size // len(line) + 1)
        return body[:size]

    def check(data):
        """None when `data` is one whole version; else what is wrong with it."""
        if len(data) < 24:
            return "%d bytes, no header" % len(data)
        try:
            i, n = int(data[1:11]), int(data[13:23])
        except ValueError:
            return "no header: %r" % data[:24]
        want = version(i, n)
        if data == want:
            return None
        if len(data) < n and want.startswith(data):
            return "v%d cut to %d of its %d bytes" % (i, len(data), n)
        if len(data) > n and data.startswith(want) and not data[n:].strip(b"\0"):
            return "v%d (%d bytes) padded with zeros to %d" % (i, n, len(data))
        return "v%d (%d bytes) read as %d other bytes" % (i, n, len(data))
    """#

  /// Writes versions 1, 2, … of NAME over the GCS JSON API, each of a random size (a third
  /// under a page, a third within the first two cache pages, a third up to 700 KB), until
  /// STOP exists; touches STARTED once the first is in.
  static let writer = versions + "\n" + #"""
    import os, random, sys, time, urllib.parse, urllib.request
    host, bucket, name, started, stop = sys.argv[1:6]
    upload = f"http://{host}/upload/storage/v1/b/{bucket}/o?uploadType=media&name={urllib.parse.quote(name, safe='')}"
    i = 0
    while not os.path.exists(stop):
        i += 1
        size = random.choice([random.randint(24, 4096), random.randint(4097, 262144), random.randint(262145, 700000)])
        request = urllib.request.Request(upload, data=version(i, size), method="POST", headers={"Content-Type": "application/octet-stream"})
        urllib.request.urlopen(request).close()
        if i == 1:
            open(started, "w").close()
        time.sleep(random.random() * 0.1)
    print(i)
    """#

  /// Opens and reads PATH whole for SECONDS, in turn with cat, os.read loops of several
  /// buffer sizes, an mmap of the size fstat gives, and cp; prints one JSON object: reads per
  /// way, reads that were not one whole version (with a few examples), failed reads, and maps
  /// refused (ENODEV: the kernel maps no file opened with direct I/O, which an open of a newer
  /// version gets while an older one is read through the page cache).
  static let reader = versions + "\n" + #"""
    import json, mmap, os, random, subprocess, sys, time
    path, seconds, scratch = sys.argv[1], float(sys.argv[2]), sys.argv[3]

    def by_cat():
        done = subprocess.run(["cat", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if done.returncode != 0:
            raise OSError(done.stderr.decode().strip())
        return done.stdout

    def by_read():
        chunk = random.choice([4096, 65536, 131072, 1 << 20])
        fd = os.open(path, os.O_RDONLY)
        try:
            out = bytearray()
            while True:
                b = os.read(fd, chunk)
                if not b:
                    return bytes(out)
                out += b
        finally:
            os.close(fd)

    def mapped():
        fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            if size == 0:
                return b""
            with mmap.mmap(fd, size, prot=mmap.PROT_READ) as m:
                return m[:]
        finally:
            os.close(fd)

    def by_mmap():
        # In a child: a page past the end of what the mapping holds kills it with SIGBUS.
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            try:
                got = b"D" + mapped()
            except OSError as e:
                got = b"E" + str(e).encode()
            except BaseException as e:
                # Python's mmap asks fstat again: "mmap length is greater than file size"
                # when the second answer is smaller than the first.
                got = b"W" + repr(e).encode()
            with os.fdopen(w, "wb") as out:
                out.write(got)
            os._exit(0)
        os.close(w)
        with os.fdopen(r, "rb") as f:
            got = f.read()
        _, status = os.waitpid(pid, 0)
        if os.WIFSIGNALED(status):
            return "killed by signal %d" % os.WTERMSIG(status)
        if got[:1] == b"E":
            raise OSError(got[1:].decode())
        if got[:1] == b"W":
            return got[1:].decode()
        return got[1:]

    def by_cp():
        target = os.path.join(scratch, "copy")
        done = subprocess.run(["cp", path, target], stderr=subprocess.PIPE)
        if done.returncode != 0:
            raise OSError(done.stderr.decode().strip())
        with open(target, "rb") as f:
            return f.read()

    ways = {"cat": by_cat, "read": by_read, "mmap": by_mmap, "cp": by_cp}
    reads = {w: 0 for w in ways}
    bad = {w: 0 for w in ways}
    examples, errors, refused = [], [], 0
    end = time.time() + seconds
    k = 0
    while time.time() < end:
        way = list(ways)[k % len(ways)]
        k += 1
        try:
            data = ways[way]()
        except OSError as e:
            if way == "mmap" and "No such device" in str(e):
                refused += 1
            else:
                errors.append(f"{way}: {e}")
            continue
        reads[way] += 1
        wrong = data if isinstance(data, str) else check(data)
        if wrong:
            bad[way] += 1
            if len(examples) < 8:
                examples.append(f"{way}: {wrong}")
    print(json.dumps({"reads": reads, "bad": bad, "examples": examples, "errors": errors[:8], "failed": len(errors), "refused": refused}))
    """#

  /// What the readers saw: reads, reads that were not one whole version, reads that failed,
  /// and maps refused.
  struct Outcome {
    var reads = 0
    var bad = 0
    var failed = 0
    var refused = 0
    var text = ""
  }

  /// Mounts with `metadata_ttl=ttl` over `api`, runs the writer and `readers` readers side by
  /// side for `seconds`, and returns what the readers saw.
  func readBesideWriter(api: String, ttl: Int, seconds: Int, readers: Int = 1) async throws -> Outcome {
    var outcome = Outcome()
    try await MountFixture.scope { fx in
      let notes = try fx.folder("notes")
      let writerScript = notes.appendingPathComponent("writer.py")
      let readerScript = notes.appendingPathComponent("reader.py")
      try Self.writer.write(to: writerScript, atomically: true, encoding: .utf8)
      try Self.reader.write(to: readerScript, atomically: true, encoding: .utf8)
      let started = notes.appendingPathComponent("started")
      let stop = notes.appendingPathComponent("stop")
      let writerErrors = notes.appendingPathComponent("writer.errors")
      let writer = try ChildProcess(
        "/bin/sh",
        ["-c", "exec /usr/bin/python3 \"$@\" 2>>'\(writerErrors.path)'", "python"]
          + [writerScript.path, fx.address, fx.bucket, "f", started.path, stop.path],
        environment: ProcessInfo.processInfo.environment)
      defer {
        FileManager.default.createFile(atPath: stop.path, contents: nil)
        let ended = writer.wait(timeout: .seconds(30))
        #expect(ended == .exited(0), "the writer: \((try? String(contentsOf: writerErrors, encoding: .utf8)) ?? "")")
        if ended == nil {
          writer.send(SIGKILL)
          writer.wait()
        }
      }
      #expect(await eventually(timeout: .seconds(30)) { FileManager.default.fileExists(atPath: started.path) }, "the writer wrote nothing")
      let m = try fx.mount(options: ["metadata_ttl=\(ttl)"], extra: ["--api", api], name: "\(api)-\(ttl)")
      // The other readers in processes of their own, all at once; the first here.
      var others: [ChildProcess] = []
      for n in 1..<readers {
        let scratch = try fx.folder("scratch-\(n)")
        others.append(
          try ChildProcess(
            "/usr/bin/python3", [readerScript.path, m.path("f"), String(seconds), scratch.path],
            environment: ProcessInfo.processInfo.environment, output: .pipe))
      }
      let (status, text) = runTool("/usr/bin/python3", [readerScript.path, m.path("f"), String(seconds), notes.path])
      #expect(status == 0, "\(text)")
      var texts = [text]
      for other in others {
        let done = other.readToEnd(until: .now + .seconds(Double(seconds) + 60))
        if other.wait(timeout: .seconds(10)) == nil {
          other.send(SIGKILL)
          other.wait()
        }
        texts.append(String(decoding: done.output, as: UTF8.self))
      }
      outcome.text = texts.joined(separator: "\n")
      for text in texts {
        guard let json = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any],
          let reads = json["reads"] as? [String: Int], let bad = json["bad"] as? [String: Int]
        else {
          Issue.record("a reader said: \(text)")
          continue
        }
        outcome.reads += reads.values.reduce(0, +)
        outcome.bad += bad.values.reduce(0, +)
        outcome.failed += json["failed"] as? Int ?? 0
        outcome.refused += json["refused"] as? Int ?? 0
      }
      if outcome.bad > 0 || outcome.failed > 0 { print("the mount's log: \(m.log.suffix(2000))") }
    }
    return outcome
  }

  /// One reader: no read fails either (a new open never fails because someone else replaced
  /// the file), and every map is made.
  @Test(arguments: ["gcs", "firebase"], [0, 1])
  func everyReadIsOneWholeVersion(api: String, ttl: Int) async throws {
    let outcome = try await readBesideWriter(api: api, ttl: ttl, seconds: 4)
    print("api=\(api) metadata_ttl=\(ttl): \(outcome.text)")
    #expect(outcome.reads >= 20, "\(outcome.text)")
    #expect(outcome.bad == 0, "\(outcome.text)")
    #expect(outcome.failed == 0 && outcome.refused == 0, "\(outcome.text)")
  }

  /// Three readers at once: opens of several versions overlap (one read through the page
  /// cache, the newer ones with direct I/O), and each still reads one version whole. A map of
  /// a newer version may be refused then, never made of the older version's pages.
  @Test(arguments: ["gcs", "firebase"], [0, 1])
  func everyReadIsOneWholeVersionWithThreeReaders(api: String, ttl: Int) async throws {
    let outcome = try await readBesideWriter(api: api, ttl: ttl, seconds: 4, readers: 3)
    print("api=\(api) metadata_ttl=\(ttl) readers=3: \(outcome.text)")
    #expect(outcome.reads >= 60, "\(outcome.text)")
    #expect(outcome.bad == 0, "\(outcome.text)")
    #expect(outcome.failed == 0, "\(outcome.text)")
  }
}

/// A reader holds version 0 of a file open and read (its pages in the kernel's page cache)
/// while a writer elsewhere replaces it: a program that opens the file then gets the newer
/// version as a file of its own, whole by every way it may read (its size by fstat and by
/// lseek to the end, read(2), a private map it touches), and the first reader's later reads
/// still give version 0 whole. The kernel keeps one page cache per inode: an open of the newer
/// version on the same inode, with direct I/O, still filled those pages through a private map,
/// and the first reader read the newer bytes from the middle of its file on (issue 54's F1);
/// its fstat gave the older size, and `tail -c` cut the newer version short (F2).
@Suite(.serialized) struct NewerVersionBesideOlderOpenTests {
  static let probe = WholeVersionReadsTests.versions + "\n" + #"""
    import mmap, os, sys, time, urllib.parse, urllib.request
    path, host, bucket, name = sys.argv[1:5]
    upload = f"http://{host}/upload/storage/v1/b/{bucket}/o?uploadType=media&name={urllib.parse.quote(name, safe='')}"

    def put(i, size):
        body = version(i, size)
        request = urllib.request.Request(upload, data=body, method="POST", headers={"Content-Type": "application/octet-stream"})
        urllib.request.urlopen(request).close()
        return body

    def whole(fd, size):
        out = bytearray()
        while True:
            b = os.pread(fd, 1 << 20, len(out))
            if not b:
                return bytes(out)
            out += b

    def opened_now():
        """What a new open sees: its fstat size, lseek(END), read(2), a touched private map."""
        fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            end = os.lseek(fd, 0, os.SEEK_END)
            data = whole(fd, size)
            mapped = b""
            if size:
                with mmap.mmap(fd, size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE) as m:
                    mapped = m[:]
            if os.fstat(fd).st_ino != os.fstat(a).st_ino:
                wrong.append("the newer version's open shows inode %d, the older's %d (cp takes it for another file)"
                             % (os.fstat(fd).st_ino, os.fstat(a).st_ino))
            return size, end, data, mapped
        finally:
            os.close(fd)

    # The sizes: longer, shorter, much shorter, much longer than version 0.
    v0 = version(0, 300000)
    if path == "--first":
        put(0, len(v0))
        sys.exit(0)
    a = os.open(path, os.O_RDONLY)
    first = whole(a, len(v0))
    if first != v0:
        sys.exit("the first reader did not read version 0: %s" % check(first))
    wrong = []
    for i, size in [(1, 420000), (2, 150000), (3, 5000), (4, 650000)]:
        want = put(i, size)
        deadline = time.time() + 60
        while True:
            size_seen, end, data, mapped = opened_now()
            if not (size_seen == end == len(data) == len(mapped)) or data != mapped or check(data):
                wrong.append("v%d: a new open saw fstat %d, lseek %d, %d bytes read (%s), %d mapped (%s)"
                             % (i, size_seen, end, len(data), check(data), len(mapped), check(mapped)))
            held = whole(a, len(v0))
            if held != v0 or os.fstat(a).st_size != len(v0):
                wrong.append("v%d: the first reader then read %s, fstat %d" % (i, check(held), os.fstat(a).st_size))
            if data == want or wrong or time.time() > deadline:
                break
        if data != want and not wrong:
            wrong.append("v%d: no new open saw it in 60 s" % i)
        if wrong:
            break
        # Reopened without a lookup (/proc/self/fd/N): still the first reader's version, and a
        # touched private map of it does not put the newer bytes into the first reader's pages.
        b = os.open("/proc/self/fd/%d" % a, os.O_RDONLY)
        try:
            again = whole(b, len(v0))
            with mmap.mmap(b, len(v0), flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE) as m:
                mapped = m[:]
            if again != v0 or mapped != v0 or os.fstat(b).st_size != len(v0):
                wrong.append("v%d: a reopen of the first reader through /proc/self/fd read %s, mapped %s, fstat %d"
                             % (i, check(again), check(mapped), os.fstat(b).st_size))
        finally:
            os.close(b)
        held = whole(a, len(v0))
        if held != v0:
            wrong.append("v%d: after the reopen the first reader read %s" % (i, check(held)))
            break
    os.close(a)
    print("\n".join(wrong) if wrong else "ok")
    sys.exit(1 if wrong else 0)
    """#

  @Test(arguments: ["gcs", "firebase"], [0, 1])
  func aNewerVersionOpensAsAFileOfItsOwn(api: String, ttl: Int) async throws {
    try await MountFixture.scope { fx in
      let notes = try fx.folder("notes")
      let script = notes.appendingPathComponent("probe.py")
      try Self.probe.write(to: script, atomically: true, encoding: .utf8)
      let (put, said) = runTool("/usr/bin/python3", [script.path, "--first", fx.address, fx.bucket, "f"])
      #expect(put == 0, "\(said)")
      let m = try fx.mount(options: ["metadata_ttl=\(ttl)"], extra: ["--api", api], name: "\(api)-\(ttl)")
      let (status, text) = runTool("/usr/bin/python3", [script.path, m.path("f"), fx.address, fx.bucket, "f"])
      #expect(status == 0, "api=\(api) metadata_ttl=\(ttl): \(text)")
      if status != 0 { print("the mount's log: \(m.log.suffix(3000))") }
    }
  }
}

/// Issue 54, F5: a reader in the same mount as two appenders (a shell's `>>` and a logger that
/// holds one `O_APPEND` descriptor and fsyncs each line), beside a writer elsewhere appending
/// over the GCS API, reads only bytes someone wrote, each line whole: never zeros where another
/// version's bytes were (an edit of a newer version wrote into pages an older version's reader
/// had filled). Each trial starts on a fresh object.
@Suite(.serialized) struct SameMountReaderBesideAppendersTests {
  static let probe = #"""
    import os, random, subprocess, sys, threading, time, urllib.parse, urllib.request
    mount, host, bucket, trials = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    def url(name, media):
        q = urllib.parse.quote(name, safe="")
        return f"http://{host}/storage/v1/b/{bucket}/o/{q}" + ("?alt=media" if media else "")
    def get(name):
        with urllib.request.urlopen(url(name, True)) as r:
            return r.read()
    def generation(name):
        import json
        with urllib.request.urlopen(url(name, False)) as r:
            return json.loads(r.read())["generation"]
    def put(name, data, match=None):
        q = urllib.parse.quote(name, safe="")
        u = f"http://{host}/upload/storage/v1/b/{bucket}/o?uploadType=media&name={q}"
        if match is not None:
            u += f"&ifGenerationMatch={match}"
        urllib.request.urlopen(urllib.request.Request(u, data=data, method="POST")).close()
    bad, reads = [], 0
    for k in range(trials):
        name = "d/f%d" % k
        put(name, b"INIT\n")
        path = os.path.join(mount, name)
        stop = False
        def reader():
            global reads
            while not stop:
                try:
                    f = open(path, "rb")
                except OSError as e:
                    bad.append("trial %d: a reader's open failed: %s" % (k, e))
                    continue
                try:
                    with f:
                        d = f.read()
                except OSError:
                    # Its version replaced under it: a handle may fail, a new open may not.
                    continue
                reads += 1
                lines = d.split(b"\n")
                if b"\0" in d or not d.endswith(b"\n") or any(l not in (b"INIT",) and l[:3] not in (b"SRV", b"SH-", b"LG-") for l in lines[:-1]):
                    bad.append("trial %d: %r" % (k, d[-48:]))
        def logger():
            # A new open never fails because another process or writer came meanwhile.
            try:
                fd = os.open(path, os.O_WRONLY | os.O_APPEND)
            except OSError as e:
                bad.append("trial %d: the logger's open failed: %s" % (k, e))
                return
            for i in range(5):
                os.write(fd, b"LG-%d\n" % i)
                os.fsync(fd)
                time.sleep(random.random() * 0.02)
            os.close(fd)
        def outside():
            for i in range(3):
                while True:
                    try:
                        g = generation(name)
                        put(name, get(name) + b"SRV-%d\n" % i, match=g)
                        break
                    except Exception:
                        continue
                time.sleep(random.random() * 0.04)
        threads = [threading.Thread(target=f) for f in (reader, logger, outside)]
        for t in threads:
            t.start()
        for i in range(5):
            said = subprocess.run(["sh", "-c", "echo SH-%d >> '%s'" % (i, path)], capture_output=True)
            if said.returncode != 0:
                bad.append("trial %d: echo SH-%d >> failed: %r" % (k, i, said.stderr))
            time.sleep(random.random() * 0.02)
        threads[1].join(); threads[2].join()
        stop = True
        threads[0].join()
    print("reads %d, bad %d" % (reads, len(bad)))
    for b in bad[:6]:
        print(b)
    sys.exit(2 if reads < trials else 1 if bad else 0)
    """#

  @Test(arguments: ["gcs", "firebase"]) func aSameMountReaderReadsOnlyWrittenBytes(api: String) async throws {
    try await MountFixture.scope { fx in
      let notes = try fx.folder("notes")
      let script = notes.appendingPathComponent("probe.py")
      try Self.probe.write(to: script, atomically: true, encoding: .utf8)
      let m = try fx.mount(options: ["writable", "metadata_ttl=0"], extra: ["--api", api], name: "appenders-\(api)")
      let (status, text) = runTool("/usr/bin/python3", [script.path, m.mountpoint.path, fx.address, fx.bucket, "40"], timeout: .seconds(600))
      print("api=\(api): \(text)")
      // Zero-ended reads came from pages filled short beside appends that sized the inode:
      // a reader of this mount's bytes through the pages (now direct I/O, 2.5% of reads of a
      // reader in a loop, `ReaderBesideAppenderTests`) and a version's reader beside a
      // writer's second try (its edit now held open between the tries, about 1 in 400 trials).
      #expect(status == 0, "api=\(api): \(text)")
      let (synced, said) = runTool(bucketfsBinary, ["sync", m.mountpoint.path, "--timeout", "60"])
      #expect(synced == 0, "\(said)")
      // Every line anyone wrote is in the bucket, once (the outside writer appends with a
      // precondition and tries again).
      for k in 0..<40 {
        let lines = (await fx.object("d/f\(k)")).map { String(decoding: $0, as: UTF8.self).split(separator: "\n").map(String.init) } ?? []
        let want = ["INIT"] + (0..<3).map { "SRV-\($0)" } + (0..<5).map { "SH-\($0)" } + (0..<5).map { "LG-\($0)" }
        #expect(lines.sorted() == want.sorted(), "api=\(api): d/f\(k): \(lines)")
      }
    }
  }
}

/// A reader holds version 0 open (read(2) and a shared map) while a writer elsewhere replaces
/// the file and then a program of this mount rewrites it (`>`) or appends to it (`>>`): the
/// edit starts from the newer version and goes to an inode of its own, and the reader keeps
/// version 0 whole, its size too. (Its inode, detached from the name, answered a stat with
/// the name's edit: fstat gave the edit's size, a read stopped there, the map died with SIGBUS.)
@Suite(.serialized) struct OwnEditBesideOlderReaderTests {
  static let probe = WholeVersionReadsTests.versions + "\n" + #"""
    import mmap, os, sys, time, urllib.parse, urllib.request
    path, host, bucket, name, kind = sys.argv[1:6]
    upload = f"http://{host}/upload/storage/v1/b/{bucket}/o?uploadType=media&name={urllib.parse.quote(name, safe='')}"
    def put(i, size):
        body = version(i, size)
        urllib.request.urlopen(urllib.request.Request(upload, data=body, method="POST")).close()
        return body
    v0 = version(0, 100000)
    if kind == "first":
        put(0, len(v0))
        sys.exit(0)
    a = os.open(path, os.O_RDONLY)
    os.read(a, 4096)
    shared = mmap.mmap(a, len(v0), mmap.MAP_SHARED, mmap.PROT_READ)
    shared[0]
    v1 = put(1, 120000)
    # A new open of the name sees version 1 (metadata_ttl=0), then this mount edits it.
    deadline = time.time() + 30
    while open(path, "rb").read() != v1:
        if time.time() > deadline:
            sys.exit("no new open saw version 1")
    with open(path, "wb" if kind == "trunc" else "ab") as w:
        w.write(b"MINE\n" * 1000)
    wrong = []
    if os.fstat(a).st_size != len(v0):
        wrong.append("fstat %d" % os.fstat(a).st_size)
    data = os.pread(a, 1 << 20, 0)
    if data != v0:
        wrong.append("read(2): %s" % check(data))
    if shared[:] != v0:
        wrong.append("shared map: %s" % check(shared[:]))
    print("; ".join(wrong) if wrong else "ok")
    sys.exit(1 if wrong else 0)
    """#

  @Test(arguments: ["gcs", "firebase"], ["trunc", "append"]) func theReaderKeepsItsVersion(api: String, kind: String) async throws {
    try await MountFixture.scope { fx in
      let notes = try fx.folder("notes")
      let script = notes.appendingPathComponent("probe.py")
      try Self.probe.write(to: script, atomically: true, encoding: .utf8)
      let (put, said) = runTool("/usr/bin/python3", [script.path, "-", fx.address, fx.bucket, "d/f", "first"])
      #expect(put == 0, "\(said)")
      let m = try fx.mount(options: ["writable", "metadata_ttl=0"], extra: ["--api", api], name: "\(api)-\(kind)")
      // In a child process: a map past what the kernel holds kills it with SIGBUS.
      let (status, text) = runTool("/usr/bin/python3", [script.path, m.path("d/f"), fx.address, fx.bucket, "d/f", kind])
      #expect(status == 0, "api=\(api) \(kind): \(text)")
    }
  }
}

/// A file a logger holds open with `O_APPEND` maps shared, in another process and through a
/// descriptor that reads and appends: the logger's writes bypass the page cache (direct I/O),
/// and other opens of the file must not (the kernel refuses a shared map of a direct I/O
/// handle with ENODEV; the adversary of issue 54 found every reader's map refused while a
/// logger was open).
@Suite(.serialized) struct SharedMapBesideAppenderTests {
  static let probe = #"""
    import mmap, os, subprocess, sys
    path = sys.argv[1]
    logger = os.open(path, os.O_WRONLY | os.O_APPEND)
    os.write(logger, b"logged\n")
    wrong = []
    r = subprocess.run([sys.executable, "-c", "import mmap,sys;f=open(sys.argv[1],'rb');m=mmap.mmap(f.fileno(),0,access=mmap.ACCESS_READ);sys.stdout.write(m[:].decode())", path], capture_output=True, text=True)
    if r.returncode != 0 or r.stdout != "first\nlogged\n":
        wrong.append("another process's shared map: %r %r" % (r.stdout, r.stderr[-200:]))
    both = os.open(path, os.O_RDWR | os.O_APPEND)
    try:
        m = mmap.mmap(both, 0, mmap.MAP_SHARED, mmap.PROT_READ)
        if m[:] != b"first\nlogged\n":
            wrong.append("O_RDWR|O_APPEND shared map read %r" % m[:])
        m.close()
    except OSError as e:
        wrong.append("O_RDWR|O_APPEND shared map: %s" % e)
    os.write(logger, b"again\n")
    os.close(both)
    os.close(logger)
    if open(path, "rb").read() != b"first\nlogged\nagain\n":
        wrong.append("read back %r" % open(path, "rb").read())
    print("; ".join(wrong) if wrong else "ok")
    sys.exit(1 if wrong else 0)
    """#

  @Test(arguments: ["gcs", "firebase"]) func aLoggedFileMapsShared(api: String) async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("log", Data("first\n".utf8))
      let notes = try fx.folder("notes")
      let script = notes.appendingPathComponent("probe.py")
      try Self.probe.write(to: script, atomically: true, encoding: .utf8)
      let m = try fx.mount(options: ["writable"], extra: ["--api", api], name: "shared-\(api)")
      let (status, text) = runTool("/usr/bin/python3", [script.path, m.path("log")], timeout: .seconds(120))
      #expect(status == 0, "api=\(api): \(text)")
    }
  }
}
