import Foundation
import TestSupport
import StorageCore
import StorageEmulator
import Testing

/// Connections are reused on every path: a reader going through a folder file by file opens no
/// more connections than it has requests in flight at once. (Each ranged GET once ended by
/// aborting its transfer at the range's last byte, which closed the connection: one new TCP
/// connection, and over TLS two or three more round trips, per file.)
@Suite(.serialized) struct ConnectionReuseTests {
  @Test(arguments: ["firebase", "gcs"]) func readingManySmallFilesReusesConnections(api: String) async throws {
    try await MountFixture.scope { fx in
      let count = 200
      var files: [Data] = []
      for i in 0..<count {
        let data = randomData(4096 + i, seed: UInt64(12_000 + i))
        _ = try await fx.put("small/s\(String(format: "%03d", i)).txt", data)
        files.append(data)
      }
      let m = try fx.mount(extra: ["--api", api], name: api)
      // The listing and the attributes first: over v0 they are fetched 32 at a time, so they
      // may open that many connections, which the reads then find idle.
      for name in try FileManager.default.contentsOfDirectory(atPath: m.path("small")) {
        var st = stat()
        #expect(stat(m.path("small/" + name), &st) == 0)
      }
      let before = fx.emulator!.connectionsAccepted
      for i in 0..<count {
        #expect(try readFile(m.path("small/s\(String(format: "%03d", i)).txt")).get() == files[i])
      }
      // In flight at once: the reader's own GET and up to 16 read ahead of it.
      let opened = fx.emulator!.connectionsAccepted - before
      #expect(opened <= 20, "\(opened) connections for \(count) files read one after another")
    }
  }

  /// Names a shell, an editor or `git` probes in a folder just listed cost no request: the
  /// listing says they are not there.
  @Test(arguments: ["firebase", "gcs"]) func missingNamesInAListedFolderCostNothing(api: String) async throws {
    try await MountFixture.scope { fx in
      for i in 0..<3 { _ = try await fx.put("probe/f\(i).txt", Data("x".utf8)) }
      let m = try fx.mount(options: ["metadata_ttl=60"], extra: ["--api", api], name: api)
      #expect(try FileManager.default.contentsOfDirectory(atPath: m.path("probe")).sorted() == ["f0.txt", "f1.txt", "f2.txt"])
      let before = fx.emulator!.requestsServed
      for i in 0..<20 {
        var st = stat()
        #expect(stat(m.path("probe/missing\(i).py"), &st) != 0 && errno == ENOENT)
      }
      #expect(fx.emulator!.requestsServed == before, "\(fx.emulator!.requestsServed - before) requests for 20 missing names")
    }
  }

  /// A walk that takes far longer than `metadata_ttl` (here 1 s, with a pause of 1.2 s at every
  /// file, as a copy of large files would make) lists each folder once: its steps in listing
  /// order keep the listings it is inside. A second look at a file afterwards asks again.
  @Test(arguments: ["firebase", "gcs"]) func aLongWalkListsEachFolderOnce(api: String) async throws {
    try await MountFixture.scope { fx in
      for d in 0..<2 {
        for f in 0..<3 { _ = try await fx.put("tree/d\(d)/f\(f).txt", Data("file \(d) \(f)".utf8)) }
      }
      let m = try fx.mount(options: ["metadata_ttl=1"], extra: ["--api", api], name: api)
      #expect(try FileManager.default.contentsOfDirectory(atPath: m.path("tree")).sorted() == ["d0", "d1"])
      let before = fx.emulator!.requestsServed
      var attributeRequests = 0
      // As fts (find, du, cp -r) walks: each name relative to its open folder.
      let tree = open(m.path("tree"), O_RDONLY | O_DIRECTORY)
      #expect(tree >= 0)
      defer { close(tree) }
      for d in 0..<2 {
        var st = stat()
        #expect(fstatat(tree, "d\(d)", &st, AT_SYMLINK_NOFOLLOW) == 0)
        let folder = openat(tree, "d\(d)", O_RDONLY | O_DIRECTORY)
        #expect(folder >= 0)
        defer { close(folder) }
        let names = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd/\(folder)").sorted()
        #expect(names == ["f0.txt", "f1.txt", "f2.txt"])
        for name in names {
          try await Task.sleep(for: .milliseconds(1200))
          #expect(fstatat(folder, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_size == 8)
        }
        // Over v0 a listing names the files only: one attributes request for each, once, and
        // one for the folder's placeholder (its mode, owner and times; GCS lists them).
        if api == "firebase" { attributeRequests += names.count + 1 }
      }
      let walk = fx.emulator!.requestsServed - before
      #expect(walk == 2 + attributeRequests, "\(walk) requests for a walk over 2 folders of 3 files")
      try await Task.sleep(for: .milliseconds(1200))
      let again = fx.emulator!.requestsServed
      var st = stat()
      #expect(stat(m.path("tree/d0/f0.txt"), &st) == 0)
      #expect(fx.emulator!.requestsServed > again, "a second look after metadata_ttl was answered from the old listing")
    }
  }

  @Test func theSwiftAPIReusesItsConnection() async throws {
    try await MountFixture.scope { fx in
      for i in 0..<50 { _ = try await fx.put("api/f\(i)", randomData(10_000, seed: UInt64(13_000 + i))) }
      let before = fx.emulator!.connectionsAccepted
      for i in 0..<50 {
        let ref = fx.storage.reference().object(named: "api/f\(i)")
        _ = try await ref.data(maxSize: 1 << 20)
        _ = try await ref.data(range: 100..<5000)
        _ = try await ref.getMetadata()
      }
      let opened = fx.emulator!.connectionsAccepted - before
      #expect(opened <= 2, "\(opened) connections for 150 requests one after another")
    }
  }
}
