import Foundation
import ChildProcess
import StorageCore
import StorageEmulator
import TestSupport
import Testing

/// Issue 55, 2: a server that dies or stalls around a listing never makes a full folder look
/// empty. A folder the mount listed before answers with that listing (said in the log and the
/// stats); one it never listed answers EIO. Mounted with `metadata_ttl=0`, so that every `ls`
/// asks the server and no test waits for a listing to expire.
@Suite(.serialized) struct LostServerListingTests {
  static let count = 1_200

  static func seed(_ fx: MountFixture) async throws {
    try await withThrowingTaskGroup(of: Void.self) { group in
      var next = 0
      while next < count {
        for i in next..<min(next + 16, count) { group.addTask { _ = try await fx.put(String(format: "many/f%04d", i), Data("\(i)".utf8)) } }
        try await group.waitForAll()
        next += 16
      }
    }
    _ = try await fx.put("unseen/a", Data("a".utf8))
    _ = try await fx.put("unseen/b", Data("b".utf8))
  }

  static let names = Set((0..<count).map { String(format: "f%04d", $0) })

  /// `ls -1` of `folder` in the mount: its status and the lines it printed (errors too).
  static func ls(_ m: MountedBucket, _ folder: String) -> (Int32, [String]) {
    let (status, output) = runTool("/bin/ls", ["-1", m.path(folder)], timeout: .seconds(60))
    return (status, output.split(separator: "\n").map(String.init))
  }

  /// A folder that fails to list: `ls` fails with EIO and prints no name.
  static func expectEIO(_ m: MountedBucket, _ folder: String, _ label: String) {
    let dir = opendir(m.path(folder))
    let errorNumber = errno
    if let dir { closedir(dir) }
    #expect(dir == nil && errorNumber == EIO, "\(label): \(folder) opened (\(errorNumber))")
    let (status, lines) = ls(m, folder)
    #expect(status != 0 && lines.count == 1 && lines[0].contains("Input/output error"), "\(label): \(status) \(lines)")
  }

  /// "listings answered from the last listing" in the stats.
  static func answeredFromLast(_ m: MountedBucket) -> Int? {
    m.stat("listings answered from the last listing").flatMap { Int($0.split(separator: " ").first ?? "") }
  }

  /// Killed: the folder listed before shows that listing whole; the folder never listed fails
  /// (EIO), though the mount knows it is a folder and has staging.
  @Test(arguments: ["firebase", "gcs"]) func aKilledServerLeavesTheLastListingOrEIO(api: String) async throws {
    try await MountFixture.scope { fx in
      try await Self.seed(fx)
      let m = try fx.mount(options: ["metadata_ttl=0", "read_timeout=2"], extra: ["--api", api], name: "killed-\(api)")
      // The root listed (as a user does before going into a folder), and the folder.
      #expect(Self.ls(m, "").0 == 0)
      var (status, listed) = Self.ls(m, "many")
      #expect(status == 0 && Set(listed) == Self.names, "\(api): \(listed.count) names")
      var st = stat()
      #expect(stat(m.path("unseen"), &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR)
      #expect(Self.answeredFromLast(m) == 0, "\(api): \(String(describing: m.stat("listings answered from the last listing")))")
      fx.stopEmulator()
      (status, listed) = Self.ls(m, "many")
      #expect(status == 0 && Set(listed) == Self.names && listed.count == Self.count, "\(api): \(status), \(listed.count) names")
      #expect((Self.answeredFromLast(m) ?? 0) >= 1, "\(api): \(String(describing: m.stat("listings answered from the last listing")))")
      #expect(m.log.contains("from its last listing"), "\(api): \(m.log.suffix(2000))")
      // Never listed: no answer is better than a false one.
      Self.expectEIO(m, "unseen", api)
      // A name in it: not "no such file" (the mount cannot know); one the listed folder lacks is.
      #expect(stat(m.path("unseen/a"), &st) != 0 && errno == EIO, "\(api): unseen/a answered errno \(errno)")
      #expect(stat(m.path("many/absent"), &st) != 0 && errno == ENOENT, "\(api): many/absent answered errno \(errno)")
      let found = stat(m.path("many/f0007"), &st)
      // Over GCS the listing carried its attributes; a v0 listing has names only, so the
      // mount cannot say what it is (EIO), but never that it is not there.
      let error = errno
      if api == "gcs" {
        #expect(found == 0 && st.st_size == 1, "\(api): many/f0007 errno \(error); \(m.log.suffix(1500))")
      } else {
        #expect(found == 0 || error == EIO, "\(api): many/f0007 errno \(error)")
      }
    }
  }

  /// A writable mount with the server killed takes a name it cannot ask about as absent, so that
  /// a file can still be made there (queued, uploaded beside one found there later).
  @Test(arguments: ["firebase", "gcs"]) func aWritableMountStillMakesFilesWithTheServerGone(api: String) async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("unseen/a", Data("a".utf8))
      let m = try fx.mount(options: ["writable", "metadata_ttl=0", "read_timeout=2"], extra: ["--api", api], name: "writable-\(api)")
      #expect(Self.ls(m, "").0 == 0)
      fx.stopEmulator()
      let (status, output) = runTool("/bin/sh", ["-c", "echo new > '\(m.path("unseen/new"))' && cat '\(m.path("unseen/new"))'"], timeout: .seconds(60))
      #expect(status == 0 && output == "new\n", "\(api): \(status) \(output)")
    }
  }

  /// A folder listed a moment ago, in a root never listed, and the server killed: the folder
  /// is still there with its last listing (it answered "No such file or directory", and a
  /// script took the folder for gone).
  @Test(arguments: ["firebase", "gcs"]) func aFolderListedBeforeAKillIsNotGone(api: String) async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("a/x1", Data("1".utf8))
      _ = try await fx.put("a/x2", Data("2".utf8))
      let m = try fx.mount(options: ["metadata_ttl=1", "read_timeout=2"], extra: ["--api", api], name: "unlisted-root-\(api)")
      var (status, listed) = Self.ls(m, "a")
      #expect(status == 0 && listed == ["x1", "x2"], "\(listed)")
      fx.stopEmulator()
      // Past metadata_ttl (its lookup is asked again), without waiting on a clock: until the
      // kernel has let go of its entry, each try is answered by it.
      var st = stat()
      #expect(await eventually(timeout: .seconds(30)) {
        (status, listed) = Self.ls(m, "a")
        return m.log.contains("server unavailable") || status != 0
      })
      #expect(stat(m.path("a"), &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR, "errno \(errno); \(m.log.suffix(1500))")
      (status, listed) = Self.ls(m, "a")
      #expect(status == 0 && listed == ["x1", "x2"], "\(status) \(listed)")
    }
  }

  /// Frozen (the server takes connections and says nothing): after `read_timeout`, the same.
  @Test(arguments: ["firebase", "gcs"]) func aFrozenServerLeavesTheLastListingOrEIO(api: String) async throws {
    try await MountFixture.scope { fx in
      try await Self.seed(fx)
      let m = try fx.mount(options: ["metadata_ttl=0", "read_timeout=1"], extra: ["--api", api], name: "frozen-\(api)")
      #expect(Self.ls(m, "").0 == 0)
      var (status, listed) = Self.ls(m, "many")
      #expect(status == 0 && Set(listed) == Self.names)
      var st = stat()
      #expect(stat(m.path("unseen"), &st) == 0)
      var frozen = Faults()
      frozen.hold = true
      fx.emulator!.setFaults(frozen)
      (status, listed) = Self.ls(m, "many")
      #expect(status == 0 && Set(listed) == Self.names && listed.count == Self.count, "\(api): \(status), \(listed.count) names")
      Self.expectEIO(m, "unseen", api)
      #expect((Self.answeredFromLast(m) ?? 0) >= 1)
      fx.emulator!.setFaults(Faults())
    }
  }

  /// A listing that fails on a later page, on a mount with a change of its own in the folder
  /// (read whole, not streamed): never the pages that came as the whole folder, nor the
  /// staged copies' part of it.
  @Test(arguments: ["firebase", "gcs"]) func aListingBrokenOnALaterPageIsNeverShownAsTheFolder(api: String) async throws {
    try await MountFixture.scope { fx in
      try await Self.seed(fx)
      let m = try fx.mount(options: ["writable", "metadata_ttl=0", "read_timeout=1"], extra: ["--api", api], name: "broken-\(api)")
      // A change of this mount that waits in the queue (its upload refused until the faults go).
      var refuse = Faults()
      refuse.pathFilter = "mine.txt"
      refuse.errorStatus = 503
      refuse.errorFraction = 1
      fx.emulator!.setFaults(refuse)
      #expect(FileManager.default.createFile(atPath: m.path("many/mine.txt"), contents: Data("mine".utf8)))
      var failing = Faults()
      failing.pathFilter = "pageToken="
      failing.errorStatus = 503
      failing.errorFraction = 1
      fx.emulator!.setFaults(failing)
      let (status, listed) = Self.ls(m, "many")
      // Never listed whole: EIO, not 1,000 names and ours as if that were the folder.
      #expect(status != 0 && listed.count <= 1, "\(api): \(status), \(listed.count) names")
      fx.emulator!.setFaults(Faults())
      let (again, all) = Self.ls(m, "many")
      #expect(again == 0 && Set(all) == Self.names.union(["mine.txt"]), "\(api): \(again), \(all.count)")
    }
  }

  /// Frozen after the first page of a folder the mount reads as its pages arrive: `ls` shows
  /// what came and fails (EIO), never a short folder that looks whole; on both APIs.
  @Test(arguments: ["firebase", "gcs"]) func aServerFrozenMidListingEndsItWithEIO(api: String) async throws {
    try await MountFixture.scope { fx in
      try await Self.seed(fx)
      let m = try fx.mount(options: ["metadata_ttl=0", "read_timeout=1"], extra: ["--api", api], name: "midfrozen-\(api)")
      var held = Faults()
      held.pathFilter = "pageToken="
      held.hold = true
      fx.emulator!.setFaults(held)
      let (status, lines) = Self.ls(m, "many")
      fx.emulator!.setFaults(Faults())
      #expect(status != 0 && lines.contains { $0.contains("Input/output error") }, "\(api): \(status), \(lines.count) lines")
      #expect(lines.filter { $0.hasPrefix("f") }.count < Self.count, "\(api)")
      let (again, all) = Self.ls(m, "many")
      #expect(again == 0 && Set(all) == Self.names, "\(api): \(again) \(all.count)")
    }
  }

  /// A folder listed before whose listing then breaks on a later page (frozen, or refused with
  /// 503 past the retries) while `ls` reads its first pages: the listing goes on from the
  /// folder's last listing past the names the pages reached, whole, as the man page says (it
  /// ended with EIO, issue 55 adversary F2), and the stats count it.
  @Test(arguments: [("firebase", true), ("gcs", true), ("gcs", false)]) func aListingBrokenOnALaterPageGoesOnFromTheLastListing(
    api: String, frozen: Bool
  ) async throws {
    try await MountFixture.scope { fx in
      try await Self.seed(fx)
      let m = try fx.mount(options: ["metadata_ttl=0", "read_timeout=1"], extra: ["--api", api], name: "later-\(api)")
      let (first, listed) = Self.ls(m, "many")
      #expect(first == 0 && Set(listed) == Self.names, "\(api): \(first), \(listed.count)")
      var failing = Faults()
      failing.pathFilter = "pageToken="
      if frozen {
        failing.hold = true
      } else {
        failing.errorStatus = 503
        failing.errorFraction = 1
      }
      fx.emulator!.setFaults(failing)
      let (status, lines) = Self.ls(m, "many")
      fx.emulator!.setFaults(Faults())
      #expect(status == 0 && Set(lines) == Self.names && lines.count == Self.count, "\(api): \(status), \(lines.count) lines: \(lines.suffix(3))")
      #expect((Self.answeredFromLast(m) ?? 0) >= 1, "\(api): \(String(describing: m.stat("listings answered from the last listing")))")
    }
  }

  /// Killed after the first page had reached the reader: readdir ends with EIO, not at a short
  /// end. (The GCS API names files as they come; a v0 listing's arrive at its end.)
  @Test func aServerKilledMidListingEndsItWithEIO() async throws {
    try await MountFixture.scope { fx in
      try await Self.seed(fx)
      let m = try fx.mount(options: ["metadata_ttl=0"], extra: ["--api", "gcs"], name: "midkilled")
      var held = Faults()
      held.pathFilter = "pageToken="
      held.hold = true
      fx.emulator!.setFaults(held)
      let reader = StreamedListingTests.FolderReader(m.path("many"))
      #expect(await eventually(timeout: .seconds(30)) { reader.first.load(ordering: .acquiring) })
      fx.stopEmulator()
      #expect(await eventually { reader.done.load(ordering: .acquiring) })
      #expect(reader.error == EIO, "readdir ended with \(reader.error) after \(reader.read.count) entries")
      #expect(reader.read.count < Self.count)
    }
  }
}
