import Foundation
import StorageCore
import Testing

/// Every byte crosses the network once: `cat` of a file with staging on (the default) follows
/// the staging download instead of fetching the same bytes again.
@Suite(.serialized) struct FetchOnceTests {
  @Test func sequentialReadWithStagingFetchesEachByteOnce() async throws {
    let fx = try MountFixture()
    defer { withExtendedLifetime(fx) {} }
    let size = 128 << 20
    let data = randomData(size, seed: 91)
    _ = try await fx.put("once/big.bin", data)
    let m = try fx.mount(options: ["read_timeout=20"])
    let before = try #require(fx.emulator?.bodyBytesSent)
    let read = try readFile(m.path("once/big.bin"), chunk: 1 << 20).get()
    #expect(read == data)
    for _ in 0..<100 where (try? getxattr(m.path("once/big.bin"), "user.staged").get()) != "complete" {
      try await Task.sleep(for: .milliseconds(100))
    }
    #expect(getxattr(m.path("once/big.bin"), "user.staged") == .success("complete"))
    let sent = try #require(fx.emulator?.bodyBytesSent) - before
    #expect(Double(sent) <= Double(size) * 1.05, "the server sent \(sent) bytes for a \(size)-byte file")
  }
}
