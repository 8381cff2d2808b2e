import Foundation
import ChildProcess
import TestSupport
import StorageCore
import Synchronization
import Testing

/// The read path against a real mount: staged copies filled by the reads' own GETs (each byte
/// fetched once), a staging disk that fills up, and the daemon's memory with many readers.
@Suite(.serialized) struct ReadPathTests {
  func sent(_ fx: MountFixture) -> Int { fx.emulator?.bodyBytesSent ?? 0 }

  /// An object stored with `Content-Encoding: gzip` reads as stored through the mount (size,
  /// ranges and the staged copy's hash check agree with the bucket), on both APIs: the reads ask
  /// with `Accept-Encoding: gzip`, as gcsfuse and rclone do.
  @Test(arguments: ["firebase", "gcs"]) func aGzipObjectReadsAsStored(api: String) async throws {
    try await MountFixture.scope { fx in
      let plain = Data(String(repeating: "a line of a log that compresses well\n", count: 20_000).utf8)
      let stored = try gzip(plain)
      let metadata = StorageMetadata()
      metadata.contentEncoding = "gzip"
      _ = try await fx.storage.reference(withPath: "gz/app.log").putDataAsync(stored, metadata: metadata)
      let m = try fx.mount(extra: ["--api", api], name: api)
      var st = stat()
      #expect(stat(m.path("gz/app.log"), &st) == 0 && st.st_size == stored.count)
      #expect(try readFile(m.path("gz/app.log")).get() == stored)
      let fd = open(m.path("gz/app.log"), O_RDONLY)
      #expect(fd >= 0)
      defer { close(fd) }
      var buffer = [UInt8](repeating: 0, count: 100)
      #expect(pread(fd, &buffer, 100, 50) == 100 && Data(buffer) == stored[50..<150])
    }
  }

  @Test func aSequentialReadFetchesEachByteOnceAndStagesTheFile() async throws {
    try await MountFixture.scope { fx in
      let size = 48 << 20
      let data = randomData(size, seed: 901)
      _ = try await fx.put("big/seq.bin", data)
      let m = try fx.mount()
      let before = sent(fx)
      #expect(try readFile(m.path("big/seq.bin")).get() == data)
      try await waitStaged(m.path("big/seq.bin"))
      let fetched = sent(fx) - before
      // The staged copy is filled by the reader's GETs and the filler: nothing twice. (Listing and
      // metadata answers are a few kilobytes.)
      #expect(fetched >= size)
      #expect(Double(fetched) <= Double(size) * 1.05, "the server sent \(fetched) bytes for a \(size)-byte file")
      // A second read comes from the staged copy (or the page cache): no object bytes at all.
      let again = sent(fx)
      #expect(try readFile(m.path("big/seq.bin"), chunk: 1 << 20).get() == data)
      #expect(sent(fx) - again < 64 << 10)
    }
  }

  @Test func scatteredReadsThenTheWholeFileAreRightAndFetchedOnce() async throws {
    try await MountFixture.scope { fx in
      let size = 24 << 20 + 12_345
      let data = randomData(size, seed: 902)
      _ = try await fx.put("big/scattered.bin", data)
      let m = try fx.mount()
      let before = sent(fx)
      let fd = open(m.path("big/scattered.bin"), O_RDONLY)
      #expect(fd >= 0)
      defer { close(fd) }
      // The end, the middle, block edges, the start: each against the object.
      for (offset, count) in [(size - 100, 4096), (size / 2, 200_000), (65_535, 2), (1 << 20, 1 << 20), (0, 10), (size - 1, 1)] {
        let expected = data.subdata(in: offset..<min(size, offset + count))
        #expect(try pread(fd, offset: Int64(offset), count: count).get() == expected, "pread \(offset)+\(count)")
      }
      #expect(try readFile(m.path("big/scattered.bin")).get() == data)
      try await waitStaged(m.path("big/scattered.bin"))
      let fetched = sent(fx) - before
      #expect(Double(fetched) <= Double(size) * 1.05, "the server sent \(fetched) bytes for a \(size)-byte file")
    }
  }

  /// Random reads leave holes between the blocks they fetched; the filler fetches around them.
  /// (It once claimed every gap of a 4 MiB stretch but fetched only the first, and a read that
  /// needed one of the others waited for good.)
  @Test func randomReadsWhileTheFillerRunsAreAnsweredRightAndOnce() async throws {
    try await MountFixture.scope { fx in
      let size = 64 << 20
      let data = randomData(size, seed: 904)
      _ = try await fx.put("big/random.bin", data)
      let m = try fx.mount()
      let before = sent(fx)
      let fd = open(m.path("big/random.bin"), O_RDONLY)
      #expect(fd >= 0)
      defer { close(fd) }
      // A fixed sequence of offsets (an LCG), so that a failure replays.
      var state: UInt64 = 905
      var wrong = 0
      for _ in 0..<400 {
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        let offset = Int((state >> 11) % UInt64(size - 4096))
        guard let got = try? pread(fd, offset: Int64(offset), count: 4096).get(), got == data.subdata(in: offset..<(offset + 4096)) else {
          wrong += 1
          continue
        }
      }
      #expect(wrong == 0, "\(wrong) of 400 random reads failed or were wrong; log: \(m.log)")
      try await waitStaged(m.path("big/random.bin"))
      #expect(try readFile(m.path("big/random.bin"), chunk: 1 << 20).get() == data)
      let fetched = sent(fx) - before
      #expect(Double(fetched) <= Double(size) * 1.05, "the server sent \(fetched) bytes for a \(size)-byte file")
    }
  }

  @Test func aFullStagingDiskFallsBackToTheServer() async throws {
    try await MountFixture.scope { fx in
      // A 2 MiB filesystem for staging: a 12 MiB object cannot be staged there.
      let tiny = try fx.folder("tiny-staging")
      let (mounted, why) = runTool("/bin/mount", ["-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", tiny.path])
      try #require(mounted == 0, "\(why)")
      defer { _ = runTool("/bin/umount", [tiny.path]) }
      let data = randomData(12 << 20, seed: 903)
      _ = try await fx.put("full/big.bin", data)
      let m = try fx.mount(options: ["staging_dir=\(tiny.path)"])
      defer { m.unmount() }
      #expect(try readFile(m.path("full/big.bin")).get() == data)
      #expect(try readFile(m.path("full/big.bin"), chunk: 1 << 20).get() == data)
      // The copy's space is reserved when it is made, so the full disk is found then (a file
      // system that cannot reserve finds it at the first write that fails).
      let logged = await eventually { m.log.contains("No space left on device") }
      #expect(logged, "log: \(m.log)")
      #expect(getxattr(m.path("full/big.bin"), "user.staged") != .success("complete"))
    }
  }

  /// A daemon's resident bytes: its peak (VmHWM) or now (VmRSS).
  func memory(_ m: MountedBucket, _ field: String) throws -> Int {
    let status = try String(contentsOfFile: "/proc/\(m.process.pid)/status", encoding: .utf8)
    let line = status.split(separator: "\n").first { $0.hasPrefix(field + ":") } ?? ""
    return (Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0) << 10
  }

  /// How far above its resident size when idle the mount's daemon went while 32 readers of
  /// different files ran at once.
  func peakMemory(_ fx: MountFixture, options: [String], files: Int, data: [Data], name: String) throws -> Int {
    let m = try fx.mount(options: options, name: name)
    defer { m.unmount() }
    _ = try FileManager.default.contentsOfDirectory(atPath: m.path("many"))
    let idle = try memory(m, "VmRSS")
    let failures = Mutex<[String]>([])
    let group = DispatchGroup()
    for i in 0..<files {
      group.enter()
      let thread = Thread {
        switch readFile(m.path("many/f\(i).bin"), chunk: 256 << 10) {
        case .success(let bytes) where bytes == data[i]: break
        case .success(let bytes): failures.withLock { $0.append("f\(i): \(bytes.count) bytes, not the object's") }
        case .failure(let error): failures.withLock { $0.append("f\(i): \(error)") }
        }
        group.leave()
      }
      thread.start()
    }
    group.wait()
    #expect(failures.withLock { $0 }.isEmpty, "\(name): \(failures.withLock { $0 }); log: \(m.log.suffix(3000))")
    return try memory(m, "VmHWM") - idle
  }

  @Test func memoryStaysWithinTheCacheBudgetWith32Readers() async throws {
    try await MountFixture.scope { fx in
      let files = 32
      let data = (0..<files).map { randomData(8 << 20, seed: 950 + UInt64($0)) }
      for i in 0..<files { _ = try await fx.put("many/f\(i).bin", data[i]) }
      let budget = 16 << 20
      // What the design lets the daemon hold beyond its idle size: the block cache's budget;
      // for each reader a reply of at most 1 MiB (max_read) and half a MiB of what its
      // threads leave in the allocator's arenas; the staging writer's 4 MiB pool; 8 MiB more.
      // The files are 256 MiB: a daemon that held them would be far past it.
      let bound = budget + files * (3 << 19) + (4 << 20) + (8 << 20)
      // Through the block cache (staging off) and through staged copies (the default).
      // 32 readers share 16 MiB of cache on two cores: a read may wait longer than the
      // fixture's 3 s for its pages, so the mounts keep the default bound (30 s).
      let cached = try peakMemory(fx, options: ["cache_size=16M", "stage_max_file=1", "read_timeout=30"], files: files, data: data, name: "nostage")
      #expect(cached < bound, "peak RSS \(cached >> 20) MiB above idle with cache_size=16M, staging off (bound \(bound >> 20) MiB)")
      let staged = try peakMemory(fx, options: ["cache_size=16M", "read_timeout=30"], files: files, data: data, name: "staged")
      #expect(staged < bound, "peak RSS \(staged >> 20) MiB above idle with cache_size=16M, staging on (bound \(bound >> 20) MiB)")
    }
  }
}
