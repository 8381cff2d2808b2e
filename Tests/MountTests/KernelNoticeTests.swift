import ChildProcess
import Foundation
import TestSupport
import Testing

/// The mount tells the kernel to forget names (a refresh, a change the bucket did not take)
/// and inodes' attributes (an open for writing, before its reply). A name's notice waits in
/// the kernel for its folder's lock, which a request in the folder (a create: `>>`) holds until
/// it is answered. Sent under the lock the other notices take too, a `>>` whose open waited
/// for that lock was never answered, and the notice never got the folder: the mount stopped
/// answering for good, and a `kill -9` could not end it (adversary t23: `rm` and `mv` beside
/// readers and writers, 1 run in 3).
@Suite(.serialized) struct KernelNoticeTests {
  /// In one folder: two appenders (an open for writing, a line, a close), a file renamed back
  /// and forth, and the folder refreshed (each refresh drops the kernel's entries for its
  /// names), each `rounds` times.
  static let probe = #"""
    import os, sys, threading
    folder, rounds = sys.argv[1], int(sys.argv[2])
    done = {}
    def appender(name):
        path = os.path.join(folder, name)
        for i in range(rounds):
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            os.write(fd, b"L-%d\n" % i)
            os.close(fd)
            done[name] = i + 1
    def renamer():
        a, b = os.path.join(folder, "a"), os.path.join(folder, "b")
        with open(a, "wb") as f:
            f.write(b"moved\n")
        for i in range(rounds):
            os.rename(a, b)
            os.rename(b, a)
            done["renames"] = i + 1
    def refresher():
        for i in range(rounds):
            os.getxattr(folder, "user.bucketfs.refresh")
            done["refreshes"] = i + 1
    threads = [threading.Thread(target=appender, args=(n,)) for n in ("log1", "log2")]
    threads += [threading.Thread(target=renamer), threading.Thread(target=refresher)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    bad = []
    for name in ("log1", "log2"):
        with open(os.path.join(folder, name), "rb") as f:
            if f.read().split(b"\n")[:-1] != [b"L-%d" % i for i in range(rounds)]:
                bad.append(name)
    with open(os.path.join(folder, "a"), "rb") as f:
        if f.read() != b"moved\n":
            bad.append("a")
    print(done, "wrong:", bad)
    sys.exit(1 if bad else 0)
    """#

  @Test(arguments: ["gcs", "firebase"]) func namesForgottenBesideCreatesInTheirFolderHoldNothingUp(api: String) async throws {
    try await MountFixture.scope { fx in
      let notes = try fx.folder("notes")
      let script = notes.appendingPathComponent("probe.py")
      try Self.probe.write(to: script, atomically: true, encoding: .utf8)
      let m = try fx.mount(options: ["writable"], extra: ["--api", api], name: "\(api)-notices")
      try FileManager.default.createDirectory(atPath: m.path("d"), withIntermediateDirectories: false)
      let output = notes.appendingPathComponent("probe.out").path
      let probe = try ChildProcess("/bin/sh", ["-c", "exec /usr/bin/python3 \"$@\" >'\(output)' 2>&1", "python", script.path, m.path("d"), "200"], environment: ProcessInfo.processInfo.environment)
      // A mount that stopped answering leaves the probe waiting in the kernel: its connection
      // is aborted so that the test ends.
      let ended = probe.wait(timeout: .seconds(120))
      if ended == nil {
        m.abortConnection()
        probe.wait()
      }
      let said = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
      #expect(ended == .exited(0), "the probe \(ended == nil ? "was still waiting after 120 s" : "ended \(String(describing: ended))"): \(said)\n\(m.log)")
      #expect(m.isMounted, "\(m.log)")
    }
  }
}
