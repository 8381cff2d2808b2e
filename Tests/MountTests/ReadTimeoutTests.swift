import Foundation
import TestSupport
import StorageCore
import StorageEmulator
import Testing

/// `read_timeout` is what a reader sees: with the server stalling mid-download, a sequential
/// reader gets its data or EIO within read_timeout (+1 s) of the stall, whatever the prefetch,
/// staging and retry state.
@Suite(.serialized) struct ReadTimeoutTests {
  @Test func stallMidDownloadEndsWithinReadTimeout() async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("stall/big.bin", randomData(24 << 20, seed: 41))
      let m = try fx.mount(options: ["read_timeout=2"])
      // Every response stops sending after 2 MiB and holds the connection open.
      var faults = Faults()
      faults.stallAfterBytes = 2 << 20
      fx.emulator?.setFaults(faults)
      let fd = open(m.path("stall/big.bin"), O_RDONLY)
      try #require(fd >= 0)
      defer { close(fd) }
      let started = Date()
      var longest: TimeInterval = 0
      var buffer = [UInt8](repeating: 0, count: 128 << 10)
      var outcome: Int32 = 0
      while Date().timeIntervalSince(started) < 30 {
        let t = Date()
        let n = read(fd, &buffer, buffer.count)
        longest = max(longest, Date().timeIntervalSince(t))
        if n < 0 {
          outcome = errno
          break
        }
        if n == 0 { break }
      }
      let total = Date().timeIntervalSince(started)
      fx.emulator?.setFaults(Faults())
      #expect(outcome == EIO, "the reader got \(outcome == 0 ? "the whole file" : String(cString: strerror(outcome)))")
      #expect(longest <= 3, "one read() blocked \(longest) s")
      #expect(total <= 3.5, "the reader saw the error after \(total) s")
    }
  }

  /// A connection reset every 100 KB: each attempt resumes where the last one broke, so reads
  /// complete (a 4 MiB ranged GET once never did).
  @Test func persistentResetsStillComplete() async throws {
    try await MountFixture.scope { fx in
      let data = randomData(12 << 20, seed: 42)
      _ = try await fx.put("resets/file.bin", data)
      let m = try fx.mount(options: ["read_timeout=20", "stage_max_file=0"])
      var faults = Faults()
      faults.resetAfterBytes = 100_000
      faults.pathFilter = "resets"
      fx.emulator?.setFaults(faults)
      let started = Date()
      let read = readFile(m.path("resets/file.bin"))
      fx.emulator?.setFaults(Faults())
      #expect(try read.get() == data)
      #expect(Date().timeIntervalSince(started) < 20)
    }
  }
}
