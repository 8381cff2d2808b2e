import Foundation
import TestSupport
import Testing

/// An `O_CREAT` open never fails because the name went meanwhile, as on a disk: a `>>` beside
/// an `rm` of the same name in a loop came to the inode the `rm` had just unlinked, whose
/// getattr (the open's permission check) answered ENOENT, and the line was lost (adversary: 4
/// to 17 per 10 s; this probe: 33 and 73 of 1,500 before).
@Suite(.serialized) struct CreateBesideRemoveTests {
  static let probe = #"""
    import errno, os, sys, threading
    path, rounds = sys.argv[1], int(sys.argv[2])
    failed, done = [], threading.Event()
    def appender():
        try:
            for i in range(rounds):
                try:
                    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                except OSError as e:
                    failed.append("open %d: %s" % (i, e))
                    continue
                os.write(fd, b"L-%d\n" % i)
                os.close(fd)
        finally:
            done.set()
    def remover():
        while not done.is_set():
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
    threads = [threading.Thread(target=appender), threading.Thread(target=remover)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("failed %d of %d: %s" % (len(failed), rounds, failed[:5]))
    sys.exit(1 if failed else 0)
    """#

  @Test(arguments: ["gcs", "firebase"]) func anAppendBesideRemovesNeverFindsItsNameGone(api: String) async throws {
    try await MountFixture.scope { fx in
      let notes = try fx.folder("notes")
      let script = notes.appendingPathComponent("probe.py")
      try Self.probe.write(to: script, atomically: true, encoding: .utf8)
      let m = try fx.mount(options: ["writable"], extra: ["--api", api], name: "\(api)-create-rm")
      let (status, text) = runTool("/usr/bin/python3", [script.path, m.path("f"), "600"], timeout: .seconds(300))
      #expect(status == 0, "api=\(api): \(text)")
      #expect(m.isMounted, "\(m.log)")
    }
  }
}
