import Foundation
import StorageCore
import TestSupport
import Testing

/// `-o metadata_cache_size`: a walk of more names than the budget holds completes, correctly,
/// with listings evicted and the bytes held within the budget, and an open file reads on.
@Suite(.serialized) struct MetadataBudgetTests {
  @Test func aWalkLargerThanTheBudgetCompletesWithinIt() async throws {
    try await MountFixture.scope { fx in
      let folders = 30
      let perFolder = 150
      let names = (0..<folders).flatMap { d in (0..<perFolder).map { String(format: "walk/d%02d/file-with-a-longer-name-%04d.txt", d, $0) } }
      try await withThrowingTaskGroup(of: Void.self) { group in
        var next = 0
        while next < names.count {
          let batch = names[next..<min(next + 16, names.count)]
          for name in batch { group.addTask { _ = try await fx.put(name, Data(name.utf8)) } }
          try await group.waitForAll()
          next += 16
        }
      }
      _ = try await fx.put("keep/open.txt", Data("still readable".utf8))
      // 1M: three quarters for listings, about 200 bytes a name plus its long name: 4,500
      // names do not fit.
      let m = try fx.mount(options: ["metadata_cache_size=1M", "metadata_ttl=300"], extra: ["--api", "gcs"], name: "budget")
      let fd = open(m.path("keep/open.txt"), O_RDONLY)
      #expect(fd >= 0)
      defer { if fd >= 0 { close(fd) } }
      let (status, found) = runTool("/usr/bin/find", [m.path("walk"), "-type", "f"])
      #expect(status == 0)
      let listed = Set(found.split(separator: "\n").map { String($0.dropFirst(m.mountpoint.path.count + 1)) })
      #expect(listed == Set(names), "find listed \(listed.count) of \(names.count)")
      // Every file's size is right, through the walk's evictions.
      let (duStatus, du) = runTool("/usr/bin/du", ["-sb", m.path("walk")])
      #expect(duStatus == 0)
      let expected = names.reduce(0) { $0 + $1.utf8.count }
      #expect(du.split(separator: "\t").first.flatMap { Int($0) }.map { $0 >= expected } == true, "\(du)")
      let line = try #require(m.stat("metadata cache"))
      let parts = line.split(separator: " ")
      let held = try #require(Int(parts[2]))
      let budget = try #require(Int(parts[5].dropLast()))
      let evicted = try #require(Int(parts[6]))
      #expect(budget == 1 << 20)
      #expect(held <= budget, "\(line)")
      #expect(evicted > 0, "\(line)")
      #expect(try pread(fd, offset: 0, count: 100).get() == Data("still readable".utf8))
    }
  }
}

/// A walk's folders are listed ahead of it: `find` goes into folder after folder, and the next
/// folders' listings are fetched while it reads the one it is in, each once; a single folder
/// looked at alone lists nothing ahead.
@Suite(.serialized) struct FolderListingAheadTests {
  func requests(_ m: MountedBucket) -> Int? {
    m.stat("requests to the bucket")?.split(separator: " ").first.flatMap { Int($0) }
  }

  @Test func findListsTheNextFoldersAheadEachOnce() async throws {
    try await MountFixture.scope { fx in
      let folders = 12
      var names: [String] = []
      for d in 0..<folders {
        for i in 0..<5 { names.append(String(format: "ahead/d%02d/f%d.txt", d, i)) }
      }
      try await withThrowingTaskGroup(of: Void.self) { group in
        for name in names { group.addTask { _ = try await fx.put(name, Data(name.utf8)) } }
        try await group.waitForAll()
      }
      let m = try fx.mount(options: ["metadata_ttl=300"], extra: ["--api", "gcs"], name: "ahead")
      // One folder looked at alone: nothing is listed ahead.
      let (one, listedOne) = runTool("/bin/ls", [m.path("ahead/d05")])
      #expect(one == 0 && listedOne.split(separator: "\n").count == 5, "\(listedOne)")
      #expect(m.stat("folders listed ahead") == "0")
      let before = try #require(requests(m))
      let (status, found) = runTool("/usr/bin/find", [m.path("ahead"), "-type", "f"])
      #expect(status == 0)
      let listed = Set(found.split(separator: "\n").map { String($0.dropFirst(m.mountpoint.path.count + 1)) })
      #expect(listed == Set(names))
      let ahead = try #require(m.stat("folders listed ahead").flatMap { Int($0) })
      #expect(ahead > 0, "no folder was listed ahead of find")
      // Each folder listed once: the ones fetched ahead were not asked for again when opened
      // (d05 was listed before; "ahead" itself once).
      let after = try #require(requests(m))
      #expect(after - before <= folders, "find of \(folders) folders made \(after - before) requests")
    }
  }
}
