import Foundation
import TestSupport
import StorageCore
import Testing

@Suite(.serialized) struct GCSMountTests {
  @Test func gcsListingCarriesAttributesAndReadsPinTheGeneration() async throws {
    try await MountFixture.scope { fx in
      for i in 0..<60 { _ = try await fx.put("g/f\(i).txt", Data(repeating: 7, count: i)) }
      let big = randomData(5 << 20, seed: 31)
      _ = try await fx.put("g/big.bin", big)
      let m = try fx.mount(extra: ["--api", "gcs"], name: "gcs")
      let before = fx.emulator!.requestsServed
      let entries = try FileManager.default.contentsOfDirectory(atPath: m.path("g"))
      #expect(entries.count == 61)
      for i in 0..<60 {
        let size = (try FileManager.default.attributesOfItem(atPath: m.path("g/f\(i).txt"))[.size] as? NSNumber)?.intValue
        #expect(size == i)
      }
      // Attributes came with the listing: a few requests, not one per file.
      #expect(fx.emulator!.requestsServed - before < 10)
      #expect(sha256(try readFile(m.path("g/big.bin")).get()) == sha256(big))
      let fd = open(m.path("g/big.bin"), O_RDONLY)
      defer { close(fd) }
      _ = try pread(fd, offset: 0, count: 10).get()
      _ = try await fx.put("g/big.bin", randomData(5 << 20, seed: 32))
      // Cached pages stay the old generation's; new ranges of the pinned generation are gone.
      let result = pread(fd, offset: 4 << 20 + 12345, count: 10)
      if case .success(let data) = result {
        #expect(data == big.subdata(in: (4 << 20 + 12345)..<(4 << 20 + 12355)))
      }
    }
  }
}
