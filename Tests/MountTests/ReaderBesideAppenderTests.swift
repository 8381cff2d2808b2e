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
    import os, sys, threading
    path, style, least = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with open(path, "wb") as f:
        f.write(b"INIT\n")
    # At least `least` lines, and on until the readers have read 3,000 times.
    most = 200000
    want = b"INIT\n" + b"".join(b"L-%d\n" % i for i in range(most))
    written = [0]
    done = threading.Event()
    bad, reads = [], [0]
    def reader():
        while not done.is_set():
            try:
                with open(path, "rb") as f:
                    d = f.read()
            except OSError as e:
                bad.append("a reader's open or read failed: %s" % e)
                continue
            reads[0] += 1
            if not want.startswith(d):
                bad.append("%d bytes: %r" % (len(d), d[-32:]))
    def appender():
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND) if style == "logger" else None
            for i in range(most):
                if i >= least and reads[0] >= 3000:
                    break
                if style == "shell":
                    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
                os.write(fd, b"L-%d\n" % i)
                written[0] = i + 1
                if style == "shell":
                    os.close(fd)
            if style == "logger":
                os.close(fd)
        finally:
            done.set()
    threads = [threading.Thread(target=reader) for _ in range(2)] + [threading.Thread(target=appender)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with open(path, "rb") as f:
        final = f.read()
    if final != want[:len(b"INIT\n") + sum(len(b"L-%d\n" % i) for i in range(written[0]))]:
        bad.append("the file ends %r" % final[-32:])
    print("lines %d, reads %d, bad %d" % (written[0], reads[0], len(bad)))
    for b in bad[:5]:
        print(b)
    sys.exit(1 if bad else 0)
    """#

  @Test(arguments: ["gcs", "firebase"], ["shell", "logger"])
  func everyReadIsAPrefixOfTheAppends(api: String, style: String) async throws {
    try await MountFixture.scope { fx in
      let notes = try fx.folder("notes")
      let script = notes.appendingPathComponent("probe.py")
      try Self.probe.write(to: script, atomically: true, encoding: .utf8)
      let m = try fx.mount(options: ["writable", "metadata_ttl=0"], extra: ["--api", api], name: "\(api)-\(style)")
      let (status, text) = runTool("/usr/bin/python3", [script.path, m.path("log"), style, "3000"], timeout: .seconds(600))
      #expect(status == 0, "api=\(api) \(style): \(text)")
      let lines = Int(text.split(separator: "\n").first { $0.hasPrefix("lines ") }?.dropFirst(6).prefix { $0.isNumber } ?? "") ?? -1
      #expect(lines >= 3000, "\(text)")
      let (synced, said) = runTool(bucketfsBinary, ["sync", m.mountpoint.path, "--timeout", "60"])
      #expect(synced == 0, "\(said)")
      let object = await fx.object("log").map { String(decoding: $0, as: UTF8.self) }
      #expect(object == "INIT\n" + (0..<max(lines, 0)).map { "L-\($0)\n" }.joined(), "api=\(api) \(style)")
    }
  }
}
