import Foundation
import TestSupport
import StorageCore
import StorageEmulator
import Testing

/// Read-ahead across files: once a process opens a folder's files in listing order, the next
/// small files are fetched before they are opened (each once); files opened out of order fetch
/// only themselves.
@Suite(.serialized) struct FolderReadAheadTests {
  func setUp(_ fx: MountFixture, count: Int) async throws -> [Data] {
    var files: [Data] = []
    for i in 0..<count {
      let data = randomData(3000 + i, seed: UInt64(14_000 + i))
      _ = try await fx.put("seq/f\(String(format: "%03d", i)).txt", data)
      files.append(data)
    }
    return files
  }

  func path(_ m: MountedBucket, _ i: Int) -> String { m.path("seq/f\(String(format: "%03d", i)).txt") }

  /// Lists the folder and takes every file's attributes, so that only content is fetched later.
  func listAndStat(_ m: MountedBucket) throws {
    for name in try FileManager.default.contentsOfDirectory(atPath: m.path("seq")) {
      var st = stat()
      #expect(stat(m.path("seq/" + name), &st) == 0)
    }
  }

  @Test(arguments: ["firebase", "gcs"]) func filesOpenedInListingOrderAreFetchedAhead(api: String) async throws {
    try await MountFixture.scope { fx in
      let files = try await setUp(fx, count: 40)
      let m = try fx.mount(extra: ["--api", api], name: api)
      try listAndStat(m)
      let emulator = try #require(fx.emulator)
      let before = emulator.requestsServed
      for i in 0..<3 { #expect(try readFile(path(m, i)).get() == files[i]) }
      // The next files arrive without being opened.
      var ahead = 0
      for _ in 0..<100 {
        ahead = emulator.requestsServed - before - 3
        if ahead >= 4 { break }
        try await Task.sleep(for: .milliseconds(50))
      }
      #expect(ahead >= 4, "\(ahead) files fetched ahead of a reader in listing order")
      // Reading on finds them, and every file is fetched once in all (BucketFSTests holds the
      // count exactly; here the kernel's own reads are counted too).
      for i in 3..<40 { #expect(try readFile(path(m, i)).get() == files[i]) }
      let requests = emulator.requestsServed - before
      #expect(requests <= 40, "\(requests) requests to read 40 files")
    }
  }

  /// GNU cp -r reads a folder in d_ino order; listed entries are numbered in listing order, so
  /// that order is the listing's and the files are fetched ahead (they were numbered by a hash,
  /// and cp -r of 1,000 files at 10 ms took 25 s instead of 1).
  @Test func cpDashRIsReadAhead() async throws {
    try await MountFixture.scope { fx in
      let files = try await setUp(fx, count: 40)
      let m = try fx.mount()
      let out = fx.root.appendingPathComponent("copy")
      let (status, output) = runTool("/bin/cp", ["-r", m.path("seq"), out.path])
      #expect(status == 0, "\(output)")
      for i in 0..<40 {
        #expect(try Data(contentsOf: out.appendingPathComponent("f\(String(format: "%03d", i)).txt")) == files[i])
      }
      let stats = try getxattr(m.mountpoint.path, "user.bucketfs.stats").get()
      let ahead = stats.split(separator: "\n").first { $0.hasPrefix("files read ahead") }
        .flatMap { $0.split(separator: "\t").last }.flatMap { Int($0) } ?? 0
      #expect(ahead >= 30, "cp -r had \(ahead) of 40 files fetched ahead: \(stats)")
    }
  }

  @Test func filesOpenedOutOfOrderFetchOnlyThemselves() async throws {
    try await MountFixture.scope { fx in
      let files = try await setUp(fx, count: 30)
      let m = try fx.mount()
      try listAndStat(m)
      let emulator = try #require(fx.emulator)
      let before = emulator.requestsServed
      let order = [17, 3, 25, 9, 12, 0, 28, 21, 6, 14]
      for i in order { #expect(try readFile(path(m, i)).get() == files[i]) }
      let requests = emulator.requestsServed - before
      #expect(requests == order.count, "\(requests) requests to read \(order.count) files opened out of order")
      // Decided at each open: none of these started a read-ahead.
      let stats = try getxattr(m.mountpoint.path, "user.bucketfs.stats").get()
      #expect(stats.contains("files read ahead\t0"), "\(stats)")
      // In order from here on, it does.
      for i in 0..<4 { #expect(try readFile(path(m, i)).get() == files[i]) }
      let after = try getxattr(m.mountpoint.path, "user.bucketfs.stats").get()
      #expect(!after.contains("files read ahead\t0"), "\(after)")
    }
  }
}
