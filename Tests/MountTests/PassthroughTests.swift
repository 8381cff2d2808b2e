import Foundation
import TestSupport
import StorageCore
import Testing

/// A complete staged copy is read by the kernel itself (FUSE passthrough): no READ reaches the
/// daemon, the bytes are the object's, and the kernel's rules for mixing passthrough and cached
/// opens of one inode never surface as an error to a reader.
@Suite(.serialized) struct PassthroughTests {
  /// FUSE requests the daemon answered so far.
  func requests(_ m: MountedBucket) -> Int { Int(m.stat("FUSE operations") ?? "") ?? -1 }

  func passthroughOpens(_ m: MountedBucket) -> Int { Int(m.stat("opens by passthrough") ?? "") ?? -1 }

  /// Waits until the daemon holds no open file: the kernel sends RELEASE after close(2) has
  /// returned, and an inode's next open joins the mode of the opens still counted.
  func released(_ m: MountedBucket) async {
    let done = await eventually(timeout: .seconds(30)) { m.stat("open handles") == "0" }
    #expect(done, "open handles: \(m.stat("open handles") ?? "?")")
  }

  /// A mount on which `name` (`data`) is staged completely, by a first mount that read it.
  func staged(_ fx: MountFixture, _ name: String, _ data: Data, options: [String] = []) async throws -> MountedBucket {
    _ = try await fx.put(name, data)
    let first = try fx.mount(options: options, name: "stage")
    #expect(try readFile(first.path(name)).get() == data)
    try await waitStaged(first.path(name))
    first.unmount()
    return try fx.mount(options: options)
  }

  @Test func aStagedFileIsReadByTheKernel() async throws {
    try await MountFixture.scope { fx in
      let data = randomData(16 << 20, seed: 71)
      let m = try await staged(fx, "p/big.bin", data)
      let before = requests(m)
      #expect(try readFile(m.path("p/big.bin"), chunk: 1 << 20).get() == data)
      // 16 MiB through the daemon is at least 16 READs of 1 MiB; by passthrough there are none
      // (a lookup, a getattr or two, open, flush, release).
      #expect(requests(m) - before < 12, "the daemon answered \(requests(m) - before) requests for one read")
      #expect(passthroughOpens(m) == 1)
      // Random reads and mmap go to the staged copy too, and read the object's bytes.
      let fd = open(m.path("p/big.bin"), O_RDONLY)
      #expect(fd >= 0)
      defer { close(fd) }
      for (i, offset) in [0, 4096, 7 << 20, (16 << 20) - 4096, 1_234_567].enumerated() {
        #expect(try pread(fd, offset: Int64(offset), count: 4096).get() == data[offset..<(offset + 4096)], "read \(i)")
      }
      let map = mmap(nil, data.count, PROT_READ, MAP_SHARED, fd, 0)
      #expect(map != MAP_FAILED)
      if let map, map != MAP_FAILED {
        #expect(Data(bytes: map, count: data.count) == data)
        munmap(map, data.count)
      }
      #expect(passthroughOpens(m) == 2)
    }
  }

  @Test func offlineMountsReadStagedFilesByPassthrough() async throws {
    try await MountFixture.scope { fx in
      let data = randomData(10 << 20, seed: 79)
      let online = try await staged(fx, "p/offline.bin", data)
      online.unmount()
      fx.stopEmulator()
      let m = try fx.mount(extra: ["--offline"], name: "offline")
      let before = requests(m)
      #expect(try readFile(m.path("p/offline.bin"), chunk: 1 << 20).get() == data)
      #expect(requests(m) - before < 10)
      #expect(passthroughOpens(m) == 1)
    }
  }

  @Test func passthroughNoKeepsReadsInTheDaemon() async throws {
    try await MountFixture.scope { fx in
      let data = randomData(16 << 20, seed: 72)
      let m = try await staged(fx, "p/big.bin", data, options: ["passthrough=no"])
      let before = requests(m)
      #expect(try readFile(m.path("p/big.bin"), chunk: 1 << 20).get() == data)
      #expect(requests(m) - before >= 16)
      #expect(passthroughOpens(m) == 0)
    }
  }

  /// An inode open in cached mode (its copy was filling) keeps that mode for every open until
  /// the last one closes; the next first open passes through.
  @Test func openedWhileFillingAndAgainOnceComplete() async throws {
    try await MountFixture.scope { fx in
      let data = randomData(48 << 20, seed: 73)
      _ = try await fx.put("p/filling.bin", data)
      let m = try fx.mount()
      let path = m.path("p/filling.bin")
      let early = open(path, O_RDONLY)
      #expect(early >= 0)
      #expect(try pread(early, offset: 0, count: 4096).get() == data[0..<4096])
      try await waitStaged(path)
      // The copy is complete, but the inode has a cached open: this one joins it.
      #expect(try readFile(path).get() == data)
      #expect(passthroughOpens(m) == 0)
      #expect(try pread(early, offset: 40 << 20, count: 4096).get() == data[(40 << 20)..<((40 << 20) + 4096)])
      close(early)
      await released(m)
      #expect(try readFile(path).get() == data)
      #expect(passthroughOpens(m) == 1)
    }
  }

  /// Readers racing the copy's completion: every open succeeds and reads the object's bytes,
  /// whichever mode the inode is in when it opens.
  @Test func readersRacingTheCopysCompletion() async throws {
    try await MountFixture.scope { fx in
      let data = randomData(40 << 20, seed: 74)
      _ = try await fx.put("p/race.bin", data)
      let m = try fx.mount()
      let path = m.path("p/race.bin")
      let expected = sha256(data)
      try await withThrowingTaskGroup(of: Void.self) { group in
        for reader in 0..<4 {
          group.addTask {
            for round in 0..<6 {
              let bytes = readFile(path, chunk: 256 << 10)
              #expect(bytes.map(sha256) == .success(expected), "reader \(reader), round \(round)")
            }
          }
        }
        try await group.waitForAll()
      }
      try await waitStaged(path)
      await released(m)
      #expect(try readFile(path).get() == data)
      #expect(passthroughOpens(m) >= 1)
    }
  }

  /// A copy changed on disk since it was verified is verified whole again before the kernel
  /// reads it: intact (only touched), it passes through; damaged, it is dropped and the bytes
  /// come from the server, never from the copy.
  @Test func aChangedCopyIsVerifiedBeforeItIsHandedOver() async throws {
    try await MountFixture.scope { fx in
      let data = randomData(12 << 20, seed: 75)
      let m = try await staged(fx, "p/copy.bin", data)
      m.unmount()
      let staging = fx.root.appendingPathComponent("staging")
      let copies = (FileManager.default.enumerator(atPath: staging.path)?.allObjects as? [String] ?? []).filter { $0.hasSuffix(".data") }
      let copy = staging.appendingPathComponent(try #require(copies.first)).path
      // Touched: the same bytes, another change time.
      #expect(utimes(copy, nil) == 0)
      let touched = try fx.mount(name: "touched")
      #expect(try readFile(touched.path("p/copy.bin")).get() == data)
      #expect(passthroughOpens(touched) == 1)
      touched.unmount()
      // Damaged in the middle: dropped at open, read from the server.
      let handle = try FileHandle(forUpdating: URL(fileURLWithPath: copy))
      try handle.seek(toOffset: 6 << 20)
      try handle.write(contentsOf: Data([data[6 << 20] ^ 0xFF]))
      try handle.close()
      let damaged = try fx.mount(name: "damaged")
      #expect(try readFile(damaged.path("p/copy.bin")).get() == data)
      #expect(passthroughOpens(damaged) == 0)
      #expect(damaged.stagedDropped == 1, "\(damaged.stat("staged copies") ?? "no stats")")
    }
  }

  /// The staged copy is changed on disk while one process holds the file open by passthrough:
  /// a new open joins that inode's backing file only once the copy is verified again, so it
  /// never reads the changed bytes (its reads come to the daemon, which has the object's).
  @Test func aJoinedOpenGetsVerifiedBytesToo() async throws {
    try await MountFixture.scope { fx in
      let data = randomData(4 << 20, seed: 76)
      let m = try await staged(fx, "p/held.bin", data)
      let holder = open(m.path("p/held.bin"), O_RDONLY | O_CLOEXEC)
      #expect(holder >= 0)
      defer { close(holder) }
      #expect(passthroughOpens(m) == 1)
      let staging = fx.root.appendingPathComponent("staging")
      let copies = (FileManager.default.enumerator(atPath: staging.path)?.allObjects as? [String] ?? []).filter { $0.hasSuffix(".data") }
      let copy = staging.appendingPathComponent(try #require(copies.first)).path
      let handle = try FileHandle(forUpdating: URL(fileURLWithPath: copy))
      try handle.seek(toOffset: 1 << 20)
      try handle.write(contentsOf: Data([data[1 << 20] ^ 0xFF]))
      try handle.close()
      #expect(try readFile(m.path("p/held.bin")).get() == data, "a second open read the changed copy")
      #expect(passthroughOpens(m) == 1)
      #expect(m.stagedDropped == 1, "\(m.stat("staged copies") ?? "no stats")")
    }
  }

  /// The object replaced on the server while a passthrough open holds its old copy: the old
  /// handle keeps reading the version it opened, a new open reads the new one (through the
  /// daemon: the inode's backing file is the old copy's).
  @Test func anObjectReplacedWhileOpenByPassthrough() async throws {
    try await MountFixture.scope { fx in
      let old = randomData(12 << 20, seed: 76)
      let new = randomData(10 << 20, seed: 77)
      let m = try await staged(fx, "p/replaced.bin", old)
      let path = m.path("p/replaced.bin")
      let held = open(path, O_RDONLY)
      #expect(held >= 0)
      defer { close(held) }
      #expect(passthroughOpens(m) == 1)
      _ = try await fx.put("p/replaced.bin", new)
      // The mount sees the new generation once its metadata TTL (2 s) has passed.
      let updated = await eventually(timeout: .seconds(30)) { (try? readFile(path).get()) == new }
      #expect(updated, "a new open did not read the new version")
      #expect(try pread(held, offset: 0, count: 1 << 20).get() == old[0..<(1 << 20)])
    }
  }

  /// On a writable mount an unchanged staged file passes through; a write open beside a
  /// passthrough reader is answered (its reads and writes go to the daemon), and what it wrote
  /// is what the next open reads.
  @Test func writableMountsWriteBesideAPassthroughReader() async throws {
    try await MountFixture.scope { fx in
      let data = randomData(9 << 20, seed: 78)
      let m = try await staged(fx, "p/edit.bin", data, options: ["writable"])
      let path = m.path("p/edit.bin")
      let reader = open(path, O_RDONLY)
      #expect(reader >= 0)
      defer { close(reader) }
      #expect(passthroughOpens(m) == 1)
      let writer = open(path, O_WRONLY)
      #expect(writer >= 0, "a write open beside a passthrough reader failed: \(String(cString: strerror(errno)))")
      let patch = Data(repeating: 0x5A, count: 4096)
      #expect(patch.withUnsafeBytes { Foundation.pwrite(writer, $0.baseAddress, 4096, 4096) } == 4096)
      #expect(try pread(reader, offset: 0, count: 4096).get() == data[0..<4096])
      #expect(close(writer) == 0)
      var expected = data
      expected.replaceSubrange(4096..<8192, with: patch)
      #expect(try readFile(path).get() == expected)
    }
  }
}
