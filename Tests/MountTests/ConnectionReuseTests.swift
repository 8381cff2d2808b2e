import Foundation
import StorageCore
import StorageEmulator
import Testing

/// Connections are reused on every path: a reader going through a folder file by file opens no
/// more connections than it has requests in flight at once. (Each ranged GET once ended by
/// aborting its transfer at the range's last byte, which closed the connection: one new TCP
/// connection, and over TLS two or three more round trips, per file.)
@Suite(.serialized) struct ConnectionReuseTests {
  @Test(arguments: ["firebase", "gcs"]) func readingManySmallFilesReusesConnections(api: String) async throws {
    let fx = try MountFixture()
    defer { withExtendedLifetime(fx) {} }
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

  /// Names a shell, an editor or `git` probes in a folder just listed cost no request: the
  /// listing says they are not there.
  @Test(arguments: ["firebase", "gcs"]) func missingNamesInAListedFolderCostNothing(api: String) async throws {
    let fx = try MountFixture()
    defer { withExtendedLifetime(fx) {} }
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

  @Test func theSwiftAPIReusesItsConnection() async throws {
    let fx = try MountFixture()
    defer { withExtendedLifetime(fx) {} }
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
