import ChildProcess
import Foundation
import TestSupport
import Testing

/// Issue 54 F5: programs of one mount read a file in a loop while another appends to it, as
/// `tail`-like readers of a log do: a shell's `>>` (an open, a line, a close, again) or a
/// logger that holds one `O_APPEND` descriptor. Every read is a prefix of what was appended,
/// never ending in zeros. (A reader's page filled by the daemon just before an append landed
/// was read up to the size the append gave the inode, its end zeros: 2.5% of reads, found
/// once the probe dropped the outside writer and the pauses.) No other writer, no pause: the
/// race comes at once, and the test ends when the appender has written all its lines.
@Suite(.serialized) struct ReaderBesideAppenderTests {
  static let probe = #"""
    import mmap, os, sys, threading, time
    path, style, least = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with open(path, "wb") as f:
        f.write(b"INIT\n")
    # At least `least` lines, and on until the readers have read 3,000 times.
    most = 200000
    want = b"INIT\n" + b"".join(b"L-%d\n" % i for i in range(most))
    written = [0]
    done = threading.Event()
    bad, reads = [], [0]
    def reader(k):
        while not done.is_set():
            try:
                with open(path, "rb") as f:
                    if style == "mapped":
                        # Open, fstat, map that size, copy: shared and private maps.
                        n = os.fstat(f.fileno()).st_size
                        with mmap.mmap(f.fileno(), n, access=mmap.ACCESS_READ if k % 2 else mmap.ACCESS_COPY) as m:
                            d = m[:]
                    else:
                        d = f.read()
            except OSError as e:
                bad.append("a reader's open or read failed: %s" % e)
                continue
            reads[0] += 1
            if not whole(d):
                bad.append("%d bytes: %r" % (len(d), d[-32:]))
    def whole(d):
        """Lines someone wrote, each writer's in its order."""
        if style != "busy":
            return want.startswith(d)
        if not d.endswith(b"\n") or not d.startswith(b"INIT\n"):
            return False
        nxt = {b"L": 0, b"G": 0}
        for line in d.split(b"\n")[1:-1]:
            who, _, n = line.partition(b"-")
            if who not in nxt or n != b"%d" % nxt[who]:
                return False
            nxt[who] += 1
        return True
    logged = [0]
    def logger():
        # Holds the edit open across the shell's closes: its next write moves the edit to a
        # copy of its own (the closed bytes went to the queue).
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        while not done.is_set():
            os.write(fd, b"G-%d\n" % logged[0])
            logged[0] += 1
            time.sleep(0.001)
        os.close(fd)
    def neighbour():
        # Other files written and read beside them: the daemon opens and closes descriptors,
        # so a number read after its file was closed names another file.
        i = 0
        while not done.is_set():
            other = os.path.join(os.path.dirname(path), "other%d.txt" % (i % 7))
            with open(other, "wb") as f:
                f.write(b"z" * 3000)
            with open(os.path.join(os.path.dirname(path), "other%d.txt" % (i % 5)), "rb") as f:
                f.read()
            i += 1
    def appender():
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND) if style == "logger" else None
            for i in range(most):
                if i >= least and reads[0] >= (20000 if style == "mapped" else 3000):
                    break
                if style == "mapped":
                    # A program that appends by seeking to the end (no O_APPEND), through the pages.
                    fd = os.open(path, os.O_RDWR)
                    os.lseek(fd, 0, os.SEEK_END)
                elif style != "logger":
                    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
                os.write(fd, b"L-%d\n" % i)
                written[0] = i + 1
                if style != "logger":
                    os.close(fd)
            if style == "logger":
                os.close(fd)
        finally:
            done.set()
    threads = [threading.Thread(target=reader, args=(k,)) for k in range(2)] + [threading.Thread(target=appender)]
    if style == "busy":
        threads += [threading.Thread(target=neighbour), threading.Thread(target=logger)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with open(path, "rb") as f:
        final = f.read()
    mine = b"".join(l + b"\n" for l in final.split(b"\n")[:-1] if not l.startswith(b"G-"))
    if not whole(final) or mine != want[:len(b"INIT\n") + sum(len(b"L-%d\n" % i) for i in range(written[0]))]:
        bad.append("the file ends %r" % final[-32:])
    print("lines %d, logged %d, reads %d, bad %d" % (written[0], logged[0], reads[0], len(bad)))
    for b in bad[:5]:
        print(b)
    sys.exit(1 if bad else 0)
    """#

  /// `busy`: a shell's `>>` beside a program writing and reading other files: an edit's write
  /// after a close moves it to a copy of its own and closes the file it leaves, which a read
  /// racing it read by number: EBADF, or another file's bytes (the queue's journal) where the
  /// number was reused meanwhile.
  /// `mapped`: readers map the file (shared and private) beside a writer that seeks to the end
  /// and writes through the pages (the adversary: 1 map in ~10,000 ended in zeros).
  @Test(arguments: ["gcs", "firebase"], ["shell", "logger", "busy", "mapped"])
  func everyReadIsAPrefixOfTheAppends(api: String, style: String) async throws {
    try await MountFixture.scope { fx in
      let notes = try fx.folder("notes")
      let script = notes.appendingPathComponent("probe.py")
      try Self.probe.write(to: script, atomically: true, encoding: .utf8)
      let m = try fx.mount(options: ["writable", "metadata_ttl=0"], extra: ["--api", api], name: "\(api)-\(style)")
      let (status, text) = runTool("/usr/bin/python3", [script.path, m.path("log"), style, "3000"], timeout: .seconds(600))
      if style == "mapped" {
        // Still seen: about 1 map in 4,000 ends in zeros one line long (the writer's last
        // line, inside the size fstat gave): the map is filled through the reader's handle,
        // which reads the bytes it opened, shorter than the edit the writer sized the inode
        // with. read(2) and pread of the same readers are right.
        #expect(status == 0 || status == 1, "api=\(api) \(style): \(text)")
        withKnownIssue("issue 54 F2: a map of a file a seek-to-end writer of this mount appends to may end in zeros", isIntermittent: true) {
          #expect(status == 0, "api=\(api) \(style): \(text)")
        }
      } else {
        #expect(status == 0, "api=\(api) \(style): \(text)")
      }
      let lines = Int(text.split(separator: "\n").first { $0.hasPrefix("lines ") }?.dropFirst(6).prefix { $0.isNumber } ?? "") ?? -1
      #expect(lines >= 3000, "\(text)")
      let (synced, said) = runTool(bucketfsBinary, ["sync", m.mountpoint.path, "--timeout", "60"])
      #expect(synced == 0, "\(said)")
      let logged = Int(text.split(separator: "\n").first { $0.hasPrefix("lines ") }?.split(separator: " ").dropFirst(3).first?.prefix { $0.isNumber } ?? "") ?? -1
      let object = (await fx.object("log")).map { String(decoding: $0, as: UTF8.self).split(separator: "\n").map(String.init) } ?? []
      #expect(object.filter { !$0.hasPrefix("G-") } == ["INIT"] + (0..<max(lines, 0)).map { "L-\($0)" }, "api=\(api) \(style)")
      #expect(object.filter { $0.hasPrefix("G-") } == (0..<max(logged, 0)).map { "G-\($0)" }, "api=\(api) \(style)")
    }
  }
}
