import Foundation
import StorageCore
import TestSupport
import Testing

/// What other writers do to the bucket shows up through a mount: a name missing from a listed
/// folder is asked again after negative_ttl (not metadata_ttl), and `bucketfs refresh` or
/// SIGHUP drops what the mount and the kernel cached at once.
@Suite(.serialized) struct OtherWritersTests {
  func exists(_ path: String) -> Bool {
    var st = stat()
    return stat(path, &st) == 0
  }

  /// The folder is listed, then an object is written into it elsewhere: with listings kept an
  /// hour, it shows up once negative_ttl (1 s here) has passed — before, it stayed invisible to
  /// `cat` by name for all of metadata_ttl.
  @Test func anObjectWrittenElsewhereAfterAListingShowsUp() async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("shared/first.txt", Data("first".utf8))
      let m = try fx.mount(options: ["metadata_ttl=3600", "negative_ttl=1"])
      #expect(try FileManager.default.contentsOfDirectory(atPath: m.path("shared")) == ["first.txt"])
      #expect(!exists(m.path("shared/later.txt")))
      _ = try await fx.put("shared/later.txt", Data("written elsewhere".utf8))
      #expect(await eventually(every: .milliseconds(200)) { exists(m.path("shared/later.txt")) })
      #expect(try readFile(m.path("shared/later.txt")).get() == Data("written elsewhere".utf8))
    }
  }

  /// With every cache kept an hour, `bucketfs refresh MOUNTPOINT PATH` shows a new object, a
  /// replaced one and a deleted one at once, and leaves other folders as they were; SIGHUP does
  /// the same for the whole mount.
  @Test func refreshAndSIGHUPShowChangesAtOnce() async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("a/kept.txt", Data("old".utf8))
      _ = try await fx.put("a/gone.txt", Data("gone".utf8))
      _ = try await fx.put("b/one.txt", Data("one".utf8))
      let m = try fx.mount(options: ["metadata_ttl=3600", "negative_ttl=3600"])
      #expect(try FileManager.default.contentsOfDirectory(atPath: m.path("a")).sorted() == ["gone.txt", "kept.txt"])
      #expect(try FileManager.default.contentsOfDirectory(atPath: m.path("b")) == ["one.txt"])
      #expect(try readFile(m.path("a/kept.txt")).get() == Data("old".utf8))
      #expect(!exists(m.path("a/new.txt")))
      #expect(!exists(m.path("b/new.txt")))
      _ = try await fx.put("a/new.txt", Data("new".utf8))
      _ = try await fx.put("a/kept.txt", Data("replaced".utf8))
      try await fx.storage.reference(withPath: "a/gone.txt").delete()
      _ = try await fx.put("b/new.txt", Data("b new".utf8))
      // Nothing shows before the refresh: every cache here lasts an hour.
      #expect(!exists(m.path("a/new.txt")))
      let (status, output) = runTool(bucketfsBinary, ["refresh", m.mountpoint.path, "a"])
      #expect(status == 0, "\(output)")
      #expect(try FileManager.default.contentsOfDirectory(atPath: m.path("a")).sorted() == ["kept.txt", "new.txt"])
      #expect(try readFile(m.path("a/new.txt")).get() == Data("new".utf8))
      #expect(try readFile(m.path("a/kept.txt")).get() == Data("replaced".utf8))
      // The other folder was not refreshed.
      #expect(!exists(m.path("b/new.txt")))
      m.process.send(SIGHUP)
      #expect(await eventually(every: .milliseconds(100)) { exists(m.path("b/new.txt")) })
      #expect(m.isMounted, "SIGHUP refreshes; it does not unmount")
      #expect(try readFile(m.path("b/new.txt")).get() == Data("b new".utf8))
      #expect(runTool(bucketfsBinary, ["refresh", fx.root.path]).0 != 0, "not a mount")
    }
  }
}
