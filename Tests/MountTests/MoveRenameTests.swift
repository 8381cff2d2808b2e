import ChildProcess
import Foundation
import StorageCore
import StorageEmulator
import TestSupport
import Testing

/// A rename through a writable mount over the GCS API is one `objects.move` (no copy of the
/// bytes, no delete), with the generations the mount saw as preconditions, and falls back to
/// copy-then-delete where the server has no move.
@Suite(.serialized) struct MoveRenameTests {
  func sh(_ script: String, in m: MountedBucket) -> (Int32, String) {
    runTool("/bin/sh", ["-c", "set -e; cd '\(m.mountpoint.path)'; " + script])
  }

  func failing(_ filter: String? = nil) -> Faults {
    var f = Faults()
    f.errorStatus = 503
    f.errorFraction = 1
    f.pathFilter = filter
    return f
  }

  /// "N moved in one request, M copied then deleted".
  func renames(_ m: MountedBucket) -> (moved: Int?, copied: Int?) {
    (m.count("renames on the server", "moved in one request"), m.count("renames on the server", "copied then deleted"))
  }

  @Test func aRenameOfALargeFileIsOneRequestAndNoCopy() async throws {
    try await MountFixture.scope { fx in
      let bytes = randomData(6 << 20, seed: 56)
      let local = try fx.folder("local").appendingPathComponent("file.bin")
      try bytes.write(to: local)
      let m = try fx.mount(options: ["writable"], extra: ["--api", "gcs"])
      // Written through the mount, so the object keeps its time (a file written by another
      // client without one costs a second request: the time the mount showed is set after the
      // move, which gives the object a new `updated`).
      var (status, output) = sh("mkdir big; cp '\(local.path)' big/file.bin", in: m)
      #expect(status == 0, "\(output)")
      (status, output) = m.sync()
      #expect(status == 0, "\(output)")
      (status, output) = sh("ls -l big >/dev/null; test ! -e big/renamed.bin", in: m)
      #expect(status == 0, "\(output)")
      let doneBefore = m.queueDone ?? 0
      let requests = fx.emulator!.requestsServed
      let received = fx.emulator!.bodyBytesReceived
      let sent = fx.emulator!.bodyBytesSent
      (status, output) = sh("mv big/file.bin big/renamed.bin", in: m)
      #expect(status == 0, "\(output)")
      (status, output) = m.sync()
      #expect(status == 0, "\(output)")
      let used = fx.emulator!.requestsServed - requests
      // The move, and nothing else reached the server: no copy, no delete, no bytes either way.
      #expect(used == 1, "\(used) requests for a rename")
      #expect(fx.emulator!.bodyBytesReceived - received < 4096 && fx.emulator!.bodyBytesSent - sent < 4096)
      #expect(renames(m).moved == 1 && renames(m).copied == 0, "\(String(describing: m.stat("renames on the server")))")
      #expect(m.queueDone == doneBefore + 2 && m.queueFailed == 0)
      #expect(await fx.object("big/renamed.bin") == bytes)
      #expect(await fx.object("big/file.bin") == nil)
      #expect(try readFile(m.path("big/renamed.bin")).get() == bytes)
    }
  }

  /// A server without `objects.move` (404 on the route): the first rename learns it and copies,
  /// then deletes; the mount remembers, so the next rename does not ask again.
  @Test func aServerWithoutMoveGetsCopyThenDelete() async throws {
    try await MountFixture.scope(movesObjects: false) { fx in
      _ = try await fx.put("d/a.txt", Data("first".utf8))
      _ = try await fx.put("d/b.txt", Data("second".utf8))
      let m = try fx.mount(options: ["writable"], extra: ["--api", "gcs"])
      var (status, output) = sh("mv d/a.txt d/a2.txt", in: m)
      #expect(status == 0, "\(output)")
      (status, output) = m.sync()
      #expect(status == 0, "\(output)")
      (status, output) = sh("mv d/b.txt d/b2.txt", in: m)
      #expect(status == 0, "\(output)")
      (status, output) = m.sync()
      #expect(status == 0, "\(output)")
      #expect(renames(m).moved == 0 && renames(m).copied == 2, "\(String(describing: m.stat("renames on the server")))\n\(m.log)")
      #expect(m.log.components(separatedBy: "has no objects.move").count == 2, "\(m.log)")
      #expect(await fx.object("d/a2.txt") == Data("first".utf8))
      #expect(await fx.object("d/b2.txt") == Data("second".utf8))
      #expect(await fx.object("d/a.txt") == nil)
      #expect(await fx.object("d/b.txt") == nil)
    }
  }

  /// Issue 53 (a probe's finding): an append right after renaming a file the bucket holds, over
  /// the GCS API, while the move lands: the edit read its bytes from the move's source, gone by
  /// then, and the open failed with ESTALE. Each append opens whatever way the race goes.
  @Test func anAppendRightAfterARenameAlwaysOpens() async throws {
    try await MountFixture.scope { fx in
      let rounds = 40
      // Large enough that reading the source takes a while.
      let body = Data(repeating: UInt8(ascii: "x"), count: 1 << 20)
      for i in 0..<rounds { _ = try await fx.put("r/a\(i)", body + Data("line \(i)\n".utf8)) }
      let m = try fx.mount(options: ["writable"], extra: ["--api", "gcs"])
      // Each append is opened the moment the server has moved the object (the source gone
      // there), before the mount has heard the move's answer: a condition, not a clock.
      let source = "http://\(fx.address)/storage/v1/b/\(fx.bucket)/o/r%2Fa"
      let (status, output) = sh(
        "for i in $(seq 0 \(rounds - 1)); do mv r/a$i r/b$i; while curl -sf -o /dev/null \(source)$i; do :; done; echo more >> r/b$i; done",
        in: m)
      #expect(status == 0, "\(output)")
      #expect(m.sync().0 == 0)
      for i in 0..<rounds {
        #expect(await fx.object("r/b\(i)") == body + Data("line \(i)\nmore\n".utf8), "r/b\(i)")
        #expect(await fx.object("r/a\(i)") == nil)
      }
    }
  }

  /// Over the Firebase API there is neither move nor copy: the bytes go up under the new name.
  @Test func aRenameOverTheFirebaseAPIStillWorks() async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("f/a.txt", Data("over v0".utf8))
      let m = try fx.mount(options: ["writable"], extra: ["--api", "firebase"])
      var (status, output) = sh("mv f/a.txt f/b.txt", in: m)
      #expect(status == 0, "\(output)")
      (status, output) = m.sync()
      #expect(status == 0, "\(output)")
      #expect(renames(m).moved == 0 && renames(m).copied == 0)
      #expect(await fx.object("f/b.txt") == Data("over v0".utf8))
      #expect(await fx.object("f/a.txt") == nil)
    }
  }

  /// Another writer replaces the source after the rename was queued and before it goes out: the
  /// move's ifSourceGenerationMatch fails, nothing moves, the other writer's version stays under
  /// the old name, and the new name gets nothing it did not have.
  @Test func aSourceReplacedMeanwhileIsNotMoved() async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("s/old.txt", Data("what the mount saw".utf8))
      let m = try fx.mount(options: ["writable"], extra: ["--api", "gcs"])
      #expect(try readFile(m.path("s/old.txt")).get() == Data("what the mount saw".utf8))
      fx.emulator!.setFaults(failing("moveTo"))
      var (status, output) = sh("mv s/old.txt s/new.txt", in: m)
      #expect(status == 0, "\(output)")
      _ = try await fx.put("s/old.txt", Data("another writer's".utf8))
      fx.emulator!.setFaults(Faults())
      (status, output) = m.sync(timeout: 60)
      #expect(await fx.object("s/old.txt") == Data("another writer's".utf8))
      #expect(await fx.object("s/new.txt") == nil)
      #expect(renames(m).moved == 0)
      #expect(m.queueFailed == 1, "\(output)\n\(m.log)")
      // The mount shows what the bucket holds, not what the refused rename would have left
      // (it listed the new name, whose open was ESTALE, and not the old one, issue 54 G4).
      let listed = try FileManager.default.contentsOfDirectory(atPath: m.path("s")).sorted()
      #expect(listed == ["old.txt"], "\(m.log)")
      #expect(try readFile(m.path("s/old.txt")).get() == Data("another writer's".utf8))
      if case .failure(let e) = readFile(m.path("s/new.txt")) { #expect(e.code == ENOENT) } else { Issue.record("s/new.txt reads") }
    }
  }

  /// A delete of an object another writer replaced meanwhile is dropped: the mount lists the
  /// object again and reads the other writer's version (it stayed out of the listing).
  @Test(arguments: ["gcs", "firebase"]) func aDroppedDeleteLeavesTheNameListed(api: String) async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("r/f.txt", Data("what the mount saw".utf8))
      let m = try fx.mount(options: ["writable", "metadata_ttl=60"], extra: ["--api", api])
      #expect(try readFile(m.path("r/f.txt")).get() == Data("what the mount saw".utf8))
      // Listed: the mount keeps the folder's listing, which the delete takes the name out of.
      #expect(try FileManager.default.contentsOfDirectory(atPath: m.path("r")) == ["f.txt"])
      // The delete (and any request about the object by its path) waits; the upload beside goes.
      fx.emulator!.setFaults(failing("o/r%2Ff.txt"))
      let (status, output) = sh("rm r/f.txt", in: m)
      #expect(status == 0, "\(output)")
      _ = try await fx.put("r/f.txt", Data("another writer's".utf8))
      fx.emulator!.setFaults(Faults())
      _ = m.sync(timeout: 60)
      #expect(await fx.object("r/f.txt") == Data("another writer's".utf8))
      // Once the queue dropped it (the sync's answer), the folder lists it again.
      #expect((try? FileManager.default.contentsOfDirectory(atPath: m.path("r"))) == ["f.txt"], "\(m.log)")
      #expect(try readFile(m.path("r/f.txt")).get() == Data("another writer's".utf8))
    }
  }

  /// The target appears elsewhere after the rename was queued: ifGenerationMatch=0 fails, the
  /// other writer's target stays, and ours moves beside it as a conflict copy (still one move).
  @Test func aTargetMadeMeanwhileIsNotOverwritten() async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("t/mine.txt", Data("mine".utf8))
      let m = try fx.mount(options: ["writable"], extra: ["--api", "gcs"])
      var (status, output) = sh("test ! -e t/taken.txt", in: m)
      fx.emulator!.setFaults(failing("moveTo"))
      (status, output) = sh("mv t/mine.txt t/taken.txt", in: m)
      #expect(status == 0, "\(output)")
      _ = try await fx.put("t/taken.txt", Data("theirs".utf8))
      fx.emulator!.setFaults(Faults())
      (status, output) = m.sync(timeout: 60)
      #expect(await fx.object("t/taken.txt") == Data("theirs".utf8))
      #expect(await fx.object("t/mine.txt") == nil)
      let names = try await fx.storage.reference(withPath: "t").listAll().items.map(\.name)
      let conflict = names.filter { $0.hasPrefix("taken.txt.conflict-") }
      #expect(conflict.count == 1, "\(names)")
      if let c = conflict.first { #expect(await fx.object("t/" + c) == Data("mine".utf8)) }
      #expect(renames(m).moved == 1 && renames(m).copied == 0)
    }
  }

  /// The move is carried out and its answer lost (the connection reset): the retry finds the
  /// source gone and the new name holding its bytes, and takes the rename as done.
  @Test func aMoveWhoseAnswerIsLostIsDone() async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("l/a.bin", randomData(300_000, seed: 7))
      let m = try fx.mount(options: ["writable"], extra: ["--api", "gcs"])
      var lose = Faults()
      lose.loseAnswerTo = "moveTo"
      lose.limit = 1
      fx.emulator!.setFaults(lose)
      var (status, output) = sh("mv l/a.bin l/b.bin", in: m)
      #expect(status == 0, "\(output)")
      (status, output) = m.sync(timeout: 60)
      #expect(status == 0, "\(output)")
      #expect(fx.emulator!.faultsInjected == 1)
      #expect(await fx.object("l/b.bin") == randomData(300_000, seed: 7))
      #expect(await fx.object("l/a.bin") == nil)
      #expect(m.queueFailed == 0 && m.conflicts == 0)
    }
  }

  /// A rename queued while the server fails, the daemon killed, and the next mount carries it
  /// out: as a move.
  @Test func aRenameQueuedOfflineGoesAsAMove() async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("o/old.txt", Data("offline".utf8))
      let m = try fx.mount(options: ["writable"], extra: ["--api", "gcs"])
      #expect(try readFile(m.path("o/old.txt")).get() == Data("offline".utf8))
      fx.emulator!.setFaults(failing())
      var (status, output) = sh("mv o/old.txt o/new.txt", in: m)
      #expect(status == 0, "\(output)")
      m.process.send(SIGKILL)
      m.process.wait()
      m.unmount()
      fx.emulator!.setFaults(Faults())
      #expect(await fx.object("o/old.txt") == Data("offline".utf8))
      let next = try fx.mount(options: ["writable"], extra: ["--api", "gcs"], name: "next")
      (status, output) = next.sync()
      #expect(status == 0, "\(output)")
      #expect(await fx.object("o/new.txt") == Data("offline".utf8))
      #expect(await fx.object("o/old.txt") == nil)
      #expect(renames(next).moved == 1 && renames(next).copied == 0, "\(String(describing: next.stat("renames on the server")))")
    }
  }

  /// `mv` of a folder on a flat bucket: one move per object, several in flight; the daemon
  /// killed (-9) halfway through, each object is under exactly one of the two names (never both,
  /// never neither), and the next mount finishes the rest from the queue.
  @Test func aFolderRenameKilledHalfwayLeavesEachObjectUnderOneName() async throws {
    try await MountFixture.scope { fx in
      let count = 40
      for i in 0..<count { _ = try await fx.put("tree/f\(i).txt", Data("file \(i)".utf8)) }
      let m = try fx.mount(options: ["writable", "metadata_ttl=60"], extra: ["--api", "gcs"])
      #expect(try FileManager.default.contentsOfDirectory(atPath: m.path("tree")).count == count)
      var slow = Faults()
      slow.latency = .milliseconds(150)
      slow.pathFilter = "moveTo"
      fx.emulator!.setFaults(slow)
      var (status, output) = sh("mv tree moved", in: m)
      #expect(status == 0, "\(output)")
      func names() async throws -> [String] {
        var out: [String] = []
        var token: String? = nil
        repeat {
          let page = try await fx.storage.reference(withPath: "").listPage(delimiter: nil, pageToken: token)
          out += page.items
          token = page.nextPageToken
        } while token != nil
        return out
      }
      func placed() async throws -> (old: Int, new: Int, both: Int, neither: Int) {
        let all = Set(try await names())
        var tally = (old: 0, new: 0, both: 0, neither: 0)
        for i in 0..<count {
          let (o, n) = (all.contains("tree/f\(i).txt"), all.contains("moved/f\(i).txt"))
          if o && n { tally.both += 1 } else if o { tally.old += 1 } else if n { tally.new += 1 } else { tally.neither += 1 }
        }
        return tally
      }
      #expect(try await eventually { try await placed().new >= 5 }, "no move landed")
      m.process.send(SIGKILL)
      m.process.wait()
      m.unmount()
      fx.emulator!.setFaults(Faults())
      let halfway = try await placed()
      #expect(halfway.both == 0 && halfway.neither == 0 && halfway.new > 0 && halfway.old > 0, "\(halfway)")
      let next = try fx.mount(options: ["writable"], extra: ["--api", "gcs"], name: "next")
      (status, output) = next.sync()
      #expect(status == 0, "\(output)")
      let done = try await placed()
      #expect(done.new == count && done.old == 0 && done.both == 0 && done.neither == 0, "\(done)")
      for i in [0, count / 2, count - 1] { #expect(await fx.object("moved/f\(i).txt") == Data("file \(i)".utf8)) }
    }
  }

  /// Names with characters the move's path must encode, renamed through the mount.
  @Test func oddNamesMoveThroughTheMount() async throws {
    try await MountFixture.scope { fx in
      let names = ["a b.txt", "100%.txt", "x#y?z", "ü ñ 日本.txt", "plus+&=.txt", "back\\slash"]
      for (i, name) in names.enumerated() { _ = try await fx.put("odd/\(name)", Data("n\(i)".utf8)) }
      let m = try fx.mount(options: ["writable"], extra: ["--api", "gcs"])
      #expect(try FileManager.default.contentsOfDirectory(atPath: m.path("odd")).count == names.count)
      for name in names { #expect(rename(m.path("odd/\(name)"), m.path("odd/moved \(name)")) == 0, "\(name)") }
      let (status, output) = m.sync()
      #expect(status == 0, "\(output)")
      for (i, name) in names.enumerated() {
        #expect(await fx.object("odd/moved \(name)") == Data("n\(i)".utf8), "\(name)")
        #expect(await fx.object("odd/\(name)") == nil, "\(name)")
      }
      #expect(renames(m).moved == names.count && renames(m).copied == 0, "\(String(describing: m.stat("renames on the server")))")
    }
  }
  /// A file a process holds open for writing keeps to the rename's contract (found by the
  /// adversary of issue 56): renamed while open, with or without writes, only the new name is
  /// left (the old name's delete was based on a version the open edit did not queue, and failed
  /// with "changed on the server", leaving both names); and an editor's save (`rename` of a new
  /// file over one another process holds open) replaces it, not a conflict copy beside the old
  /// bytes. Both APIs.
  @Test(arguments: ["gcs", "firebase"]) func renamesOfFilesHeldOpenForWritingLeaveOneName(api: String) async throws {
    try await MountFixture.scope { fx in
      for name in ["e0", "e1", "a3", "tw"] { _ = try await fx.put(name, Data("\(name)-orig".utf8)) }
      let m = try fx.mount(options: ["writable"], extra: ["--api", api])
      let script = """
        import os, sys
        M = sys.argv[1]
        fd = os.open(f"{M}/e0", os.O_RDWR); os.rename(f"{M}/e0", f"{M}/e0r"); os.close(fd)
        fd = os.open(f"{M}/e1", os.O_RDWR); os.rename(f"{M}/e1", f"{M}/e1r"); os.lseek(fd, 0, 2); os.write(fd, b"+appended"); os.close(fd)
        fd = os.open(f"{M}/a3", os.O_WRONLY | os.O_APPEND); os.write(fd, b"+a"); os.rename(f"{M}/a3", f"{M}/a3r"); os.write(fd, b"+b"); os.close(fd)
        fd = os.open(f"{M}/tw", os.O_RDWR); os.write(fd, b"TW-WRITER")
        open(f"{M}/tw.new", "wb").write(b"replacement")
        os.rename(f"{M}/tw.new", f"{M}/tw"); os.write(fd, b"-more"); os.close(fd)
        """
      var (status, output) = runTool("/usr/bin/python3", ["-c", script, m.mountpoint.path])
      #expect(status == 0, "\(output)")
      (status, output) = m.sync()
      #expect(status == 0, "\(api): \(output)")
      let expected: [String: String?] = [
        "e0": nil, "e0r": "e0-orig", "e1": nil, "e1r": "e1-orig+appended", "a3": nil, "a3r": "a3-orig+a+b", "tw": "replacement",
        "tw.new": nil,
      ]
      for (name, bytes) in expected {
        let held = await fx.object(name).map { String(decoding: $0, as: UTF8.self) }
        #expect(held == bytes, "\(api): \(name) holds \(String(describing: held)); \(m.log.suffix(1500))")
      }
      let (_, listing) = runTool("/bin/ls", ["-A", m.mountpoint.path])
      #expect(!listing.contains("conflict"), "\(api): \(listing)")
      #expect(m.queueFailed == 0)
      // Each went as an upload under the new name, then a delete of the old: counted so.
      #expect(m.count("renames on the server", "uploaded then deleted") == 4, "\(String(describing: m.stat("renames on the server")))")
    }
  }
}
