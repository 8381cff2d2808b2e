import Foundation
import TestSupport
import StorageCore
import StorageEmulator
import Testing

@Suite(.serialized) struct ConsistencyTests {
  @Test func overwriteWhileOpenFailsInsteadOfMixing() async throws {
    try await MountFixture.scope { fx in
      let first = randomData(8 << 20, seed: 1)
      _ = try await fx.put("changing.bin", first)
      let m = try fx.mount(options: ["stage_max_file=0", "cache_size=4M"])
      let fd = open(m.path("changing.bin"), O_RDONLY)
      #expect(fd >= 0)
      defer { close(fd) }
      #expect(try pread(fd, offset: 0, count: 4096).get() == first.prefix(4096))
      _ = try await fx.put("changing.bin", randomData(8 << 20, seed: 2))
      // A part of the file never read before: the old generation is gone, so the read must fail.
      let result = pread(fd, offset: 6 << 20, count: 4096)
      switch result {
      case .success(let data): #expect(data == first.subdata(in: (6 << 20)..<((6 << 20) + 4096)), "a read may only return old bytes")
      case .failure(let e): #expect(e.code == ESTALE || e.code == EIO)
      }
      if case .success = result { Issue.record("reading an overwritten object's unread range should fail") }
      // The failure is logged by the operation that met it, with the object and the reason.
      let logged = await eventually {
        m.log.split(separator: "\n").contains { $0.contains("read gs://\(fx.bucket)/changing.bin: ") && $0.contains("generation") }
      }
      #expect(logged, "log: \(m.log)")
      // A new open sees the new version.
      close(open(m.path("changing.bin"), O_RDONLY))
    }
  }

  @Test func emulatorStoppedMidReadGivesEIOWithinTheBound() async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("far.bin", randomData(32 << 20, seed: 4))
      let m = try fx.mount(options: ["stage_max_file=0", "read_timeout=2", "cache_size=4M"])
      let fd = open(m.path("far.bin"), O_RDONLY)
      #expect(fd >= 0)
      defer { close(fd) }
      _ = try pread(fd, offset: 0, count: 4096).get()
      fx.stopEmulator()
      let started = Date()
      let result = pread(fd, offset: 30 << 20, count: 4096)
      let elapsed = Date().timeIntervalSince(started)
      #expect(result == .failure(Errno(EIO)))
      #expect(elapsed < 10, "took \(elapsed) s")
    }
  }

  @Test func stalledServerGivesEIOWithinTheBound() async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("stall.bin", randomData(16 << 20, seed: 5))
      let m = try fx.mount(options: ["stage_max_file=0", "read_timeout=2", "cache_size=4M"])
      let fd = open(m.path("stall.bin"), O_RDONLY)
      #expect(fd >= 0)
      defer { close(fd) }
      var faults = Faults()
      faults.stallAfterBytes = 0
      fx.emulator?.setFaults(faults)
      let started = Date()
      let result = pread(fd, offset: 12 << 20, count: 4096)
      #expect(result == .failure(Errno(EIO)))
      #expect(Date().timeIntervalSince(started) < 12)
      fx.emulator?.setFaults(Faults())
    }
  }
}
