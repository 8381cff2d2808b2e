import Foundation
import TestSupport
import Testing

/// A program alone with its file gets every write where it sent it. A rule that moved a plain
/// write at the end the handle was told (to merge a seeking appender's line after another
/// writer's) also moved a program's own rewrite of what it had just written there: a header
/// rewritten after its payload was appended again, and sqlite's PERSIST journal corrupted its
/// database (adversary H1, H2 of issue 54). Each run is compared with the same program on a
/// local file.
@Suite(.serialized) struct OwnWritesStayPutTests {
  /// argv: DIR (the mount's folder) LOCAL (a local folder) JOURNAL SEED. Writes `hdr` (an
  /// existing file: header at its end, payload, header rewritten) and `db` (an existing sqlite
  /// database: random transactions) in both folders; prints what differs, exits 1 if anything.
  static let program = #"""
    import os, random, sqlite3, sys
    mount, local, journal, seed = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    wrong = []

    def header_then_payload(path):
        fd = os.open(path, os.O_RDWR)
        end = os.lseek(fd, 0, os.SEEK_END)
        os.pwrite(fd, b"HDR:len=????\n", end)
        os.pwrite(fd, b"payload payload\n", end + 13)
        os.pwrite(fd, b"HDR:len=0016\n", end)
        os.close(fd)
        return open(path, "rb").read()

    def transactions(path):
        r = random.Random(seed)
        c = sqlite3.connect(path)
        c.execute("PRAGMA journal_mode=%s" % journal)
        for t in range(30):
            for k in range(r.randint(1, 8)):
                op = r.random()
                if op < 0.6:
                    c.execute("insert into t(v) values (?)", ("x%d-%d" % (t, k) * r.randint(1, 300),))
                elif op < 0.8:
                    c.execute("update t set v=? where id % 7 = ?", ("u%d" % t * r.randint(1, 200), r.randint(0, 6)))
                else:
                    c.execute("delete from t where id % 11 = ?", (r.randint(0, 10),))
            c.commit()
        check = c.execute("PRAGMA integrity_check").fetchall()
        rows = c.execute("select * from t order by id").fetchall()
        c.close()
        return check, rows

    ours = header_then_payload(os.path.join(mount, "hdr"))
    theirs = header_then_payload(os.path.join(local, "hdr"))
    if ours != theirs:
        wrong.append("hdr: %r, a local file: %r" % (ours[-60:], theirs[-60:]))
    ours = transactions(os.path.join(mount, "db"))
    theirs = transactions(os.path.join(local, "db"))
    if ours[0] != [("ok",)]:
        wrong.append("db: integrity_check %s" % ours[0][:3])
    if ours[1] != theirs[1]:
        wrong.append("db: %d rows, a local file %d; differing ids %s" % (len(ours[1]), len(theirs[1]),
                     [a[0] for a, b in zip(ours[1], theirs[1]) if a != b][:5]))
    print("\n".join(wrong) or "ok")
    sys.exit(1 if wrong else 0)
    """#

  @Test(arguments: ["firebase", "gcs"], ["PERSIST", "DELETE"])
  func aProgramsOwnRewritesLandWhereItSentThem(api: String, journal: String) async throws {
    try await MountFixture.scope { fx in
      let local = try fx.folder("local")
      // The same starting bytes here and in the bucket: a few lines, and an empty database.
      let lines = Data((0..<10).map { "LINE-\(String(format: "%03d", $0))\n" }.joined().utf8)
      try lines.write(to: local.appendingPathComponent("hdr"))
      let (made, said) = runTool(
        "/usr/bin/python3", ["-c", "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('create table t(id integer primary key, v text)'); c.commit()", local.appendingPathComponent("db").path])
      #expect(made == 0, "\(said)")
      _ = try await fx.put("w/hdr", lines)
      _ = try await fx.put("w/db", try Data(contentsOf: local.appendingPathComponent("db")))
      let m = try fx.mount(options: ["writable"], extra: ["--api", api], name: "\(api)-\(journal)")
      let script = local.appendingPathComponent("own.py")
      try Self.program.write(to: script, atomically: true, encoding: .utf8)
      let (status, text) = runTool("/usr/bin/python3", [script.path, m.path("w"), local.path, journal, "7"])
      #expect(status == 0, "api=\(api) journal=\(journal): \(text)")
      let (synced, output) = m.sync(timeout: 60)
      #expect(synced == 0, "\(output)")
      #expect(await fx.object("w/hdr") == (try? Data(contentsOf: local.appendingPathComponent("hdr"))))
    }
  }
}
