import Foundation
import ChildProcess
import StorageCore
import TestSupport
import Testing

@Suite(.serialized) struct NamespaceTests {
  @Test func implicitFoldersPlaceholdersAndShadowedObjects() async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("implicit/deep/file.txt", Data("deep".utf8))
      _ = try await fx.put("placeholder/", Data())
      _ = try await fx.put("a", Data("object a".utf8))
      _ = try await fx.put("a/b", Data("object a/b".utf8))
      _ = try await fx.put("bad//empty-segment", Data("x".utf8))
      _ = try await fx.put(String(repeating: "n", count: 300), Data("long".utf8))
      let m = try fx.mount()
      let top = try FileManager.default.contentsOfDirectory(atPath: m.mountpoint.path).sorted()
      #expect(top == ["a", "a.object", "bad", "implicit", "placeholder"])
      var isDir: ObjCBool = false
      #expect(FileManager.default.fileExists(atPath: m.path("implicit/deep"), isDirectory: &isDir) && isDir.boolValue)
      #expect(FileManager.default.fileExists(atPath: m.path("placeholder"), isDirectory: &isDir) && isDir.boolValue)
      #expect(try FileManager.default.contentsOfDirectory(atPath: m.path("placeholder")).isEmpty)
      #expect(try readFile(m.path("a/b")).get() == Data("object a/b".utf8))
      #expect(try readFile(m.path("a.object")).get() == Data("object a".utf8))
      #expect(try FileManager.default.contentsOfDirectory(atPath: m.path("bad")).isEmpty)
      #expect(m.log.contains("leaving out \"bad//empty-segment\"") || m.log.contains("leaving out \"bad//\""))
      #expect(m.log.contains("not a valid file name"))
      // A fresh lookup (no listing cached) finds the shadowed object too.
      let m2 = try fx.mount(name: "fresh")
      #expect(try readFile(m2.path("a.object")).get() == Data("object a".utf8))
      #expect(access(m2.path("missing-name"), F_OK) != 0 && errno == ENOENT)
    }
  }

  /// Names looked up one after another in a folder the mount has not listed, as a loop that
  /// makes new files does (each `open(…, "w")` looks its name up first): after the first miss,
  /// one listing of the folder answers for every other name, instead of two requests a name.
  /// The files made there show in the folder while and after they land.
  @Test func missingNamesInAFolderNotListedAreAnsweredByOneListing() async throws {
    try await MountFixture.scope { fx in
      for i in 0..<5 { _ = try await fx.put("there/old-\(i)", Data("old \(i)".utf8)) }
      for api in ["gcs", "firebase"] {
        let m = try fx.mount(options: ["writable", "metadata_ttl=300", "negative_ttl=300"], extra: ["--api", api], name: api)
        func requests() -> Int? { m.stat("requests to the bucket")?.split(separator: " ").first.flatMap { Int($0) } }
        var st = stat()
        #expect(lstat(m.path("there"), &st) == 0)
        let before = try #require(requests())
        for i in 0..<60 {
          #expect(access(m.path("there/none-\(api)-\(i)"), F_OK) != 0 && errno == ENOENT)
        }
        let asked = try #require(requests()) - before
        // The first miss asks about its name (two requests), the second lists the folder.
        #expect(asked <= 3, "60 missing names took \(asked) requests (\(api))")
        #expect(try readFile(m.path("there/old-3")).get() == Data("old 3".utf8))
        for i in 0..<30 {
          #expect(FileManager.default.createFile(atPath: m.path("there/new-\(api)-\(i)"), contents: Data("\(i)".utf8)))
        }
        let shown = Set(try FileManager.default.contentsOfDirectory(atPath: m.path("there")))
        let made = Set((0..<30).map { "new-\(api)-\($0)" })
        #expect(made.isSubset(of: shown) && shown.isSuperset(of: (0..<5).map { "old-\($0)" }), "\(shown.sorted())")
        let (status, synced) = runTool(bucketfsBinary, ["sync", m.mountpoint.path, "--timeout", "60"])
        #expect(status == 0, "\(synced)")
        let landed = Set(try FileManager.default.contentsOfDirectory(atPath: m.path("there")))
        #expect(made.isSubset(of: landed), "\(landed.sorted())")
        for i in [0, 17, 29] { #expect(try readFile(m.path("there/new-\(api)-\(i)")).get() == Data("\(i)".utf8)) }
        m.unmount()
      }
    }
  }

  /// Names that are there, looked up one after another in a folder not listed (tar -x over a
  /// tree that exists), through the GCS API whose listing carries what a probe learns: the
  /// second lookup lists the folder, and the listing answers the rest with the same attributes.
  @Test func namesThereInAFolderNotListedAreAnsweredByOneListing() async throws {
    try await MountFixture.scope { fx in
      var sizes: [String: Int] = [:]
      for i in 0..<40 {
        let data = Data(repeating: UInt8(i), count: i * 3)
        _ = try await fx.put("tree/f\(i).bin", data)
        sizes["f\(i).bin"] = data.count
      }
      let m = try fx.mount(options: ["metadata_ttl=300", "negative_ttl=300"], extra: ["--api", "gcs"])
      func requests() -> Int? { m.stat("requests to the bucket")?.split(separator: " ").first.flatMap { Int($0) } }
      var st = stat()
      #expect(lstat(m.path("tree"), &st) == 0)
      let before = try #require(requests())
      for (name, size) in sizes.sorted(by: { $0.key > $1.key }) {
        #expect(lstat(m.path("tree/" + name), &st) == 0 && Int(st.st_size) == size, "\(name)")
      }
      let asked = try #require(requests()) - before
      #expect(asked <= 3, "40 names took \(asked) requests")
    }
  }

  @Test func lsOf2500ObjectsMatchesTheBucket() async throws {
    try await MountFixture.scope { fx in
      var sizes: [String: Int] = [:]
      let names = (0..<2500).map { String(format: "f%05d.txt", $0) }
      try await withThrowingTaskGroup(of: Void.self) { group in
        var next = 0
        for _ in 0..<16 {
          let name = names[next]
          next += 1
          group.addTask { _ = try await fx.put("big/" + name, Data(repeating: 65, count: name.hashValue & 0xFF)) }
        }
        while try await group.next() != nil {
          guard next < names.count else { continue }
          let name = names[next]
          next += 1
          group.addTask { _ = try await fx.put("big/" + name, Data(repeating: 65, count: name.hashValue & 0xFF)) }
        }
      }
      for name in names { sizes[name] = name.hashValue & 0xFF }
      let m = try fx.mount()
      let listing = try ChildProcess.run(
        "/bin/ls", ["-l", "--time-style=+%s", m.path("big")], environment: ProcessInfo.processInfo.environment,
        timeout: .seconds(300))
      let out = listing.text
      #expect(listing.termination == .exited(0), "\(listing.errorText)")
      var seen = 0
      for line in out.split(separator: "\n") where !line.hasPrefix("total") {
        let fields = line.split(separator: " ", omittingEmptySubsequences: true)
        guard fields.count >= 7, let name = fields.last.map(String.init) else { continue }
        #expect(fields[0] == "-r--r--r--")
        #expect(Int(fields[4]) == sizes[name], "\(name)")
        seen += 1
      }
      #expect(seen == 2500)
      // stat agrees with the object's metadata.
      let meta = try await fx.storage.reference().object(named: "big/f00042.txt").getMetadata()
      let attrs = try FileManager.default.attributesOfItem(atPath: m.path("big/f00042.txt"))
      #expect((attrs[.size] as? NSNumber)?.int64Value == meta.size)
      let mtime = (attrs[.modificationDate] as? Date)?.timeIntervalSince1970 ?? 0
      #expect(abs(mtime - (meta.updated?.timeIntervalSince1970 ?? 0)) < 0.002)
    }
  }

  @Test func oddNamesAreFiles() async throws {
    try await MountFixture.scope { fx in
      let names = [
        "with space.txt", "unicode-é-ü-ß.txt", "日本語/ファイル.txt", "emoji-🙂.txt", "percent%20literal", "100%",
        "hash#tag", "question?mark", "plus+sign", "amp&ersand", "quote'single", "quote\"double", "back\\slash",
        "star*", "colon:name", "tab\tname", "bell\u{07}name", "-dash-start", ".hidden", "...", String(repeating: "x", count: 255),
      ]
      for name in names { _ = try await fx.put("odd/" + name, Data(("content of " + name).utf8)) }
      let m = try fx.mount()
      let listed = Set(try FileManager.default.contentsOfDirectory(atPath: m.path("odd")))
      for name in names {
        let top = String(name.split(separator: "/").first!)
        #expect(listed.contains(top), "\(name.debugDescription)")
        #expect(try readFile(m.path("odd/" + name)).get() == Data(("content of " + name).utf8), "\(name.debugDescription)")
      }
    }
  }
}
