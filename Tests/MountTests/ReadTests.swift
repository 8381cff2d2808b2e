import Foundation
import TestSupport
import StorageCore
import Testing

@Suite(.serialized) struct ReadTests {
  @Test func filesOfEdgeSizesReadBack() async throws {
    try await MountFixture.scope { fx in
      let sizes = [0, 1, 4095, 4096, (1 << 20) + 1, 64 << 20]
      var expected: [String: String] = [:]
      for size in sizes {
        let data = randomData(size, seed: UInt64(size) + 1)
        _ = try await fx.put("sizes/f\(size).bin", data)
        expected["f\(size).bin"] = sha256(data)
      }
      let m = try fx.mount()
      for size in sizes {
        let path = m.path("sizes/f\(size).bin")
        let attrs = try FileManager.default.attributesOfItem(atPath: path)
        #expect((attrs[.size] as? NSNumber)?.intValue == size)
        let got = try readFile(path).get()
        #expect(sha256(got) == expected["f\(size).bin"], "size \(size)")
      }
      // A second read of the big file (cache and staged copy) is still right.
      #expect(sha256(try readFile(m.path("sizes/f\(64 << 20).bin")).get()) == expected["f\(64 << 20).bin"])
      m.unmount()
      #expect(!m.isMounted)
    }
  }

  @Test func thousandRandomPreadsMatchTheSource() async throws {
    try await MountFixture.scope { fx in
      let data = randomData(24 << 20, seed: 99)
      _ = try await fx.put("random.bin", data)
      // No staging: every read goes through ranged GETs and the block cache.
      let m = try fx.mount(options: ["stage_max_file=0"])
      let fd = open(m.path("random.bin"), O_RDONLY)
      #expect(fd >= 0)
      defer { close(fd) }
      var rng = SystemRandomNumberGenerator()
      for _ in 0..<1000 {
        let offset = Int64.random(in: 0..<Int64(data.count), using: &rng)
        let count = Int.random(in: 1...65536, using: &rng)
        let got = try pread(fd, offset: offset, count: count).get()
        let end = min(data.count, Int(offset) + count)
        #expect(got == data.subdata(in: Int(offset)..<end), "pread \(offset)+\(count)")
      }
      #expect(try pread(fd, offset: Int64(data.count), count: 10).get().isEmpty)
    }
  }

  @Test func eightConcurrentReaders() async throws {
    try await MountFixture.scope { fx in
      var hashes: [String] = []
      for i in 0..<4 {
        let data = randomData((6 << 20) + i * 1000, seed: UInt64(i) + 50)
        hashes.append(sha256(data))
        _ = try await fx.put("many/f\(i).bin", data)
      }
      let m = try fx.mount(options: ["stage_max_file=0"])
      let results = ResultsBox(count: 8)
      DispatchQueue.concurrentPerform(iterations: 8) { i in
        results.set(i, (try? readFile(m.path("many/f\(i % 4).bin")).get()).map(sha256) ?? "failed")
      }
      for i in 0..<8 { #expect(results.get(i) == hashes[i % 4], "reader \(i)") }
    }
  }

  @Test func prefixMountShowsTheSubfolder() async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("photos/2024/cat.jpg", Data("cat".utf8))
      _ = try await fx.put("photos/dog.jpg", Data("dog".utf8))
      _ = try await fx.put("other/x.txt", Data("x".utf8))
      let m = try fx.mount(prefix: "photos")
      #expect(try FileManager.default.contentsOfDirectory(atPath: m.mountpoint.path).sorted() == ["2024", "dog.jpg"])
      #expect(try readFile(m.path("2024/cat.jpg")).get() == Data("cat".utf8))
      #expect(!FileManager.default.fileExists(atPath: m.path("other")))
      #expect(getxattr(m.path("dog.jpg"), "user.gs_url") == .success("gs://mnt-bucket/photos/dog.jpg"))
    }
  }

  @Test func writesAreRefusedReadOnly() async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("ro.txt", Data("ro".utf8))
      let m = try fx.mount()
      let fd = open(m.path("ro.txt"), O_WRONLY)
      let err = errno
      #expect(fd < 0 && err == EROFS)
      #expect(open(m.path("new.txt"), O_CREAT | O_WRONLY, 0o644) < 0)
      #expect(mkdir(m.path("newdir"), 0o755) != 0 && errno == EROFS)
      #expect(unlink(m.path("ro.txt")) != 0 && errno == EROFS)
    }
  }
}

final class ResultsBox: @unchecked Sendable {
  private let lock = NSLock()
  private var values: [String]
  init(count: Int) { values = Array(repeating: "", count: count) }
  func set(_ i: Int, _ v: String) { lock.lock(); values[i] = v; lock.unlock() }
  func get(_ i: Int) -> String { lock.lock(); defer { lock.unlock() }; return values[i] }
}
