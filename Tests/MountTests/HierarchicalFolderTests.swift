import Foundation
import StorageCore
import StorageEmulator
import TestSupport
import Testing

/// A writable mount of a bucket with a hierarchical namespace (HNS), where folders are resources
/// of their own: a folder rename is one `folders.rename` on the server, mkdir makes a folder that
/// lasts empty, rmdir deletes it (and the server refuses one that holds something), and listings
/// show empty folders. What the server holds is asked of it directly, not through the mount.
@Suite(.serialized) struct HierarchicalFolderTests {
  /// Every object name in the bucket.
  func names(_ fx: MountFixture) async throws -> [String] {
    var out: [String] = []
    var token: String? = nil
    repeat {
      let page = try await fx.storage.reference(withPath: "").listPage(delimiter: nil, pageToken: token)
      out += page.items
      token = page.nextPageToken
    } while token != nil
    return out
  }

  func isDirectory(_ path: String) -> Bool {
    var isDir: ObjCBool = false
    return FileManager.default.fileExists(atPath: path, isDirectory: &isDir) && isDir.boolValue
  }

  /// Requests whose path holds `text` are held unanswered until the faults are set again.
  func holding(_ text: String) -> Faults {
    var f = Faults()
    f.hold = true
    f.pathFilter = text
    return f
  }

  /// `mv` of a folder the mount has nothing queued in: one folders.rename, done on the server by
  /// the time `mv` returns (moves of single objects are held, so only that can have moved them),
  /// the empty folder inside it too, and the mount shows it under the new name.
  @Test func aFolderRenameIsOneFolderRenameOnTheServer() async throws {
    try await MountFixture.scope(hierarchical: true) { fx in
      for i in 0..<20 { _ = try await fx.put("tree/f\(i).txt", Data("file \(i)".utf8)) }
      _ = try await fx.put("tree/sub/deep.txt", Data("deep".utf8))
      #expect(fx.makeFolder("tree/empty/") == 200)
      let m = try fx.mount(options: ["writable"], extra: ["--api", "gcs"])
      #expect(try FileManager.default.contentsOfDirectory(atPath: m.path("tree")).count == 22)
      fx.emulator!.setFaults(holding("moveTo"))
      let (status, output) = m.shell("mv tree moved")
      #expect(status == 0, "\(output)\n\(m.log)")
      let all = try await names(fx)
      fx.emulator!.setFaults(Faults())
      #expect(!all.contains { $0.hasPrefix("tree/") }, "\(all)")
      #expect(all.filter { $0.hasPrefix("moved/") }.count == 21, "\(all)")
      #expect(fx.folderStatus("moved/empty/") == 200 && fx.folderStatus("moved/sub/") == 200)
      #expect(fx.folderStatus("tree/") == 404 && fx.folderStatus("tree/empty/") == 404)
      #expect(m.count("folder renames on the server", "as one folders.rename") == 1, "\(String(describing: m.stat("folder renames on the server")))")
      #expect(try readFile(m.path("moved/f3.txt")).get() == Data("file 3".utf8))
      #expect(try readFile(m.path("moved/sub/deep.txt")).get() == Data("deep".utf8))
      #expect(isDirectory(m.path("moved/empty")))
      #expect(!FileManager.default.fileExists(atPath: m.path("tree")))
      #expect(try FileManager.default.contentsOfDirectory(atPath: m.path("moved")).count == 22)
      #expect(try !FileManager.default.contentsOfDirectory(atPath: m.mountpoint.path).contains("tree"))
      // A name the folder calls' paths must encode, there and back.
      let odd = "odd %#?+ ü\\"
      #expect(rename(m.path("moved"), m.path(odd)) == 0, "\(m.log)")
      #expect(rename(m.path(odd), m.path("moved")) == 0, "\(m.log)")
      #expect(m.count("folder renames on the server", "as one folders.rename") == 3)
      #expect(try await names(fx).filter { $0.hasPrefix("moved/") }.count == 21)
      // Nothing was queued for it, and no object was moved on its own.
      let (synced, said) = m.sync()
      #expect(synced == 0 && m.queueDone == 0, "\(said)")
      #expect(m.count("renames on the server", "moved in one request") == 0)
    }
  }

  /// The server renames the folder but its operation is never answered (the polls held): the
  /// rename cannot say whether it happened, so it answers EIO rather than success or a
  /// per-object rename of objects that moved, and the mount shows what the server has once it
  /// answers again.
  @Test func aRenameWhoseOperationIsNeverAnsweredIsEIOAndTheMountShowsTheServer() async throws {
    try await MountFixture.scope(hierarchical: true) { fx in
      for i in 0..<5 { _ = try await fx.put("w/f\(i).txt", Data("w\(i)".utf8)) }
      let m = try fx.mount(options: ["writable"], extra: ["--api", "gcs"])
      #expect(try FileManager.default.contentsOfDirectory(atPath: m.path("w")).count == 5)
      fx.emulator!.setFaults(holding("/operations/"))
      let result = rename(m.path("w"), m.path("v"))
      let failure = errno
      fx.emulator!.setFaults(Faults())
      #expect(result == -1 && failure == EIO, "\(result) \(failure)")
      #expect(fx.folderStatus("v/") == 200 && fx.folderStatus("w/") == 404)
      #expect(try FileManager.default.contentsOfDirectory(atPath: m.path("v")).sorted() == (0..<5).map { "f\($0).txt" })
      #expect(!FileManager.default.fileExists(atPath: m.path("w")))
      #expect(try readFile(m.path("v/f2.txt")).get() == Data("w2".utf8))
      let (status, output) = m.sync()
      #expect(status == 0 && m.queueDone == 0, "\(output)")
    }
  }

  /// The rename's request is carried out and its answer lost (the connection reset): the retry
  /// finds the source gone and the target there, and the rename is done, once.
  @Test func aFolderRenameWhoseAnswerIsLostIsDone() async throws {
    try await MountFixture.scope(hierarchical: true) { fx in
      for i in 0..<5 { _ = try await fx.put("l/f\(i).txt", Data("l\(i)".utf8)) }
      let m = try fx.mount(options: ["writable"], extra: ["--api", "gcs"])
      #expect(try FileManager.default.contentsOfDirectory(atPath: m.path("l")).count == 5)
      var lose = Faults()
      lose.loseAnswerTo = "renameTo"
      lose.limit = 1
      fx.emulator!.setFaults(lose)
      #expect(rename(m.path("l"), m.path("n")) == 0, "\(errno) \(m.log)")
      #expect(fx.emulator!.faultsInjected == 1)
      #expect(try FileManager.default.contentsOfDirectory(atPath: m.path("n")).count == 5)
      #expect(try await names(fx).sorted() == (0..<5).map { "n/f\($0).txt" })
      #expect(fx.folderStatus("l/") == 404 && fx.folderStatus("n/") == 200)
      // Done on the server, not object by object after a refusal.
      #expect(m.count("folder renames on the server", "as one folders.rename") == 1, "\(m.log)")
      #expect(m.sync().0 == 0 && m.queueDone == 0)
    }
  }

  /// A file written into the folder is still queued (its upload held) when the folder is
  /// renamed: a rename on the server would move the folder from under the queued upload, which
  /// would then land under the old name. The mount renames object by object behind it instead,
  /// and the old folder itself is deleted on the server once the objects are out of it.
  @Test func aFolderWithQueuedChangesIsRenamedObjectByObject() async throws {
    try await MountFixture.scope(hierarchical: true) { fx in
      _ = try await fx.put("q/a.txt", Data("a".utf8))
      _ = try await fx.put("q/b.txt", Data("b".utf8))
      let m = try fx.mount(options: ["writable"], extra: ["--api", "gcs"])
      fx.emulator!.setFaults(holding("/upload/"))
      var (status, output) = m.shell("ls q >/dev/null; echo new > q/new.txt; mv q r")
      fx.emulator!.setFaults(Faults())
      #expect(status == 0, "\(output)\n\(m.log)")
      #expect(m.count("folder renames on the server", "as one folders.rename") == 0)
      (status, output) = m.sync(timeout: 60)
      #expect(status == 0, "\(output)\n\(m.log)")
      let all = try await names(fx)
      #expect(!all.contains { $0.hasPrefix("q/") }, "\(all)")
      #expect(await fx.object("r/a.txt") == Data("a".utf8))
      #expect(await fx.object("r/b.txt") == Data("b".utf8))
      #expect(await fx.object("r/new.txt") == Data("new\n".utf8))
      #expect(fx.folderStatus("q/") == 404 && fx.folderStatus("r/") == 200)
      m.unmount()
      let again = try fx.mount(options: ["writable"], extra: ["--api", "gcs"], name: "again")
      let top = try FileManager.default.contentsOfDirectory(atPath: again.mountpoint.path)
      #expect(top.contains("r") && !top.contains("q"), "\(top)")
    }
  }

  /// The per-object rename on a hierarchical bucket, the daemon killed (-9) halfway: each object
  /// is under exactly one of the two names, and the next mount finishes it from the queue,
  /// deleting the old folder itself only once everything has left it.
  @Test func aPerObjectRenameKilledHalfwayFinishesAndDeletesTheOldFolder() async throws {
    try await MountFixture.scope(hierarchical: true) { fx in
      let count = 30
      for i in 0..<count { _ = try await fx.put("k/f\(i).txt", Data("k\(i)".utf8)) }
      let m = try fx.mount(options: ["writable"], extra: ["--api", "gcs"])
      #expect(try FileManager.default.contentsOfDirectory(atPath: m.path("k")).count == count)
      // A file still queued in the folder: the rename goes object by object.
      fx.emulator!.setFaults(holding("/upload/"))
      var (status, output) = m.shell("echo late > k/late.txt; mv k j")
      #expect(status == 0, "\(output)")
      var slow = Faults()
      slow.latency = .milliseconds(150)
      slow.pathFilter = "moveTo"
      fx.emulator!.setFaults(slow)
      func placed() async throws -> (old: Int, new: Int, both: Int) {
        let all = Set(try await names(fx))
        var tally = (old: 0, new: 0, both: 0)
        for i in 0..<count {
          let (o, n) = (all.contains("k/f\(i).txt"), all.contains("j/f\(i).txt"))
          if o && n { tally.both += 1 } else if o { tally.old += 1 } else if n { tally.new += 1 }
        }
        return tally
      }
      #expect(try await eventually { try await placed().new >= 3 }, "no move landed")
      m.process.send(SIGKILL)
      m.process.wait()
      m.unmount()
      fx.emulator!.setFaults(Faults())
      let halfway = try await placed()
      #expect(halfway.both == 0 && halfway.old + halfway.new == count, "\(halfway)")
      #expect(fx.folderStatus("k/") == 200)
      let next = try fx.mount(options: ["writable"], extra: ["--api", "gcs"], name: "next")
      (status, output) = next.sync()
      #expect(status == 0, "\(output)\n\(next.log)")
      let done = try await placed()
      #expect(done.new == count && done.old == 0 && done.both == 0, "\(done)")
      #expect(await fx.object("j/late.txt") == Data("late\n".utf8))
      #expect(try await names(fx).allSatisfy { $0.hasPrefix("j/") })
      #expect(fx.folderStatus("k/") == 404 && fx.folderStatus("j/") == 200)
    }
  }

  /// mkdir makes the folder itself on the server: it lasts empty, a new mount lists it, and so
  /// do other clients' empty folders (listed beside the objects, and found by name where the
  /// mount has not listed their parent).
  @Test func mkdirMakesAFolderThatLastsEmpty() async throws {
    try await MountFixture.scope(hierarchical: true) { fx in
      _ = try await fx.put("keep.txt", Data("k".utf8))
      #expect(fx.makeFolder("theirs/") == 200)
      _ = try await fx.put("p/file.txt", Data("p".utf8))
      #expect(fx.makeFolder("p/q/") == 200)
      let m = try fx.mount(options: ["writable"], extra: ["--api", "gcs"])
      // Found by name in a folder not listed yet (p), then listed beside the objects.
      #expect(isDirectory(m.path("p/q")), "\(m.log)")
      #expect(try FileManager.default.contentsOfDirectory(atPath: m.mountpoint.path).contains("theirs"))
      var (status, output) = m.shell("mkdir mine; mkdir mine/inner")
      #expect(status == 0, "\(output)")
      (status, output) = m.sync()
      #expect(status == 0, "\(output)")
      #expect(fx.folderStatus("mine/") == 200 && fx.folderStatus("mine/inner/") == 200)
      m.unmount()
      let again = try fx.mount(extra: ["--api", "gcs"], name: "again")
      let top = try FileManager.default.contentsOfDirectory(atPath: again.mountpoint.path)
      #expect(Set(top) == ["keep.txt", "mine", "p", "theirs"], "\(top)")
      #expect(try FileManager.default.contentsOfDirectory(atPath: again.path("mine")) == ["inner"])
      #expect(try FileManager.default.contentsOfDirectory(atPath: again.path("p")).sorted() == ["file.txt", "q"])
    }
  }

  /// rmdir deletes the folder on the server; one that another client put a file in after the
  /// mount listed it empty is refused (ENOTEMPTY), as the server refuses it, and keeps the file;
  /// a folder made, filled and emptied through the mount is gone once its queue is carried out.
  @Test func rmdirDeletesTheFolderAndRefusesOneNotEmptyOnTheServer() async throws {
    try await MountFixture.scope(hierarchical: true) { fx in
      #expect(fx.makeFolder("gone/") == 200)
      #expect(fx.makeFolder("full/") == 200)
      let m = try fx.mount(options: ["writable", "metadata_ttl=60"], extra: ["--api", "gcs"])
      #expect(try FileManager.default.contentsOfDirectory(atPath: m.path("full")).isEmpty)
      #expect(try FileManager.default.contentsOfDirectory(atPath: m.path("gone")).isEmpty)
      _ = try await fx.put("full/late.txt", Data("late".utf8))
      #expect(rmdir(m.path("full")) == -1 && errno == ENOTEMPTY)
      #expect(rmdir(m.path("gone")) == 0)
      var (status, output) = m.shell("mkdir made; echo x > made/x; rm made/x; rmdir made")
      #expect(status == 0, "\(output)")
      (status, output) = m.sync()
      #expect(status == 0, "\(output)\n\(m.log)")
      #expect(fx.folderStatus("gone/") == 404 && fx.folderStatus("made/") == 404)
      #expect(fx.folderStatus("full/") == 200)
      #expect(await fx.object("full/late.txt") == Data("late".utf8))
      let all = try await names(fx)
      #expect(all == ["full/late.txt"], "\(all)")
      #expect(try FileManager.default.contentsOfDirectory(atPath: m.path("full")) == ["late.txt"])
    }
  }
}

/// `bucketfs mv` of a folder on a hierarchical bucket: one folders.rename (single-object moves
/// are held, so only that can finish), and into a folder that exists, object by object.
@Suite(.serialized) struct HierarchicalMoveCommandTests {
  @Test func mvOfAFolderIsOneFolderRename() async throws {
    try await MountFixture.scope(hierarchical: true) { fx in
      for i in 0..<10 { _ = try await fx.put("src/f\(i).txt", Data("f\(i)".utf8)) }
      #expect(fx.makeFolder("src/empty/") == 200)
      var hold = Faults()
      hold.hold = true
      hold.pathFilter = "moveTo"
      fx.emulator!.setFaults(hold)
      let (status, output) = runTool(
        bucketfsBinary, ["mv", "gs://\(fx.bucket)/src", "gs://\(fx.bucket)/dst", "--emulator", fx.address, "--api", "gcs"],
        timeout: .seconds(30))
      fx.emulator!.setFaults(Faults())
      #expect(status == 0, "\(output)")
      #expect(await fx.object("dst/f7.txt") == Data("f7".utf8))
      #expect(await fx.object("src/f7.txt") == nil)
      #expect(fx.folderStatus("dst/empty/") == 200 && fx.folderStatus("src/") == 404)
    }
  }

  /// Into a folder that exists, mv merges object by object, at once (gsutil's way).
  @Test func mvIntoAFolderThatExistsMergesObjectByObject() async throws {
    try await MountFixture.scope(hierarchical: true) { fx in
      _ = try await fx.put("from/a.txt", Data("a".utf8))
      _ = try await fx.put("into/b.txt", Data("b".utf8))
      let (status, output) = runTool(
        bucketfsBinary, ["mv", "gs://\(fx.bucket)/from", "gs://\(fx.bucket)/into", "--emulator", fx.address, "--api", "gcs"],
        timeout: .seconds(30))
      #expect(status == 0, "\(output)")
      #expect(await fx.object("into/a.txt") == Data("a".utf8))
      #expect(await fx.object("into/b.txt") == Data("b".utf8))
      #expect(await fx.object("from/a.txt") == nil)
    }
  }
}

extension MountFixture {
  private func folderURL(_ folder: String) -> String {
    "http://\(address)/storage/v1/b/\(bucket)/folders/\(folder.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? folder)"
  }

  /// The HTTP status of a GET of folder resource `folder` (ending in "/").
  func folderStatus(_ folder: String) -> Int {
    Int(runTool("/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", folderURL(folder)]).1) ?? 0
  }

  /// Makes folder resource `folder` (and its parents) as another client would: the status.
  func makeFolder(_ folder: String) -> Int {
    let url = "http://\(address)/storage/v1/b/\(bucket)/folders?recursive=true"
    let body = "{\"name\": \"\(folder)\"}"
    return Int(
      runTool("/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", "-H", "Content-Type: application/json", "-d", body, url]).1)
      ?? 0
  }
}
