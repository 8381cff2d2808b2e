import Foundation
import TestSupport
import StorageCore
import Testing

@Suite struct RoundTripTests {
  @Test(arguments: [0, 1, 256 * 1024 - 1, 256 * 1024, 256 * 1024 + 1, 8 << 20])
  func putDataThenDownloadMatches(size: Int) async throws {
    try await EmulatorFixture.scope { fx in
      let ref = fx.storage.reference(withPath: "rt/obj-\(size).bin")
      let bytes = randomData(size, seed: UInt64(size))
      let metadata = try await ref.putDataAsync(bytes)
      #expect(metadata.size == Int64(size))
      #expect(metadata.path == "rt/obj-\(size).bin")
      #expect(metadata.contentType == "application/octet-stream")
      #expect(metadata.generation > 0)

      let inMemory = try await ref.data(maxSize: Int64(size) + 1)
      #expect(sha256(inMemory) == sha256(bytes))

      let file = fx.scratch("down-\(size)")
      try await ref.write(toFile: file).result()
      #expect(sha256(file: file) == sha256(bytes))
      let leftovers = try FileManager.default.contentsOfDirectory(atPath: fx.root.path).filter { $0.hasSuffix(".part") }
      #expect(leftovers.isEmpty)
    }
  }

  @Test func hundredMebibytesThroughFiles() async throws {
    try await EmulatorFixture.scope { fx in
      let source = fx.scratch("big.dat")
      let bytes = randomData(100 << 20, seed: 7)
      try bytes.write(to: source)
      fx.storage.uploadChunkSize = 16 << 20
      let ref = fx.storage.reference(withPath: "big/100MiB.dat")
      let metadata = try await ref.putFileAsync(from: source)
      #expect(metadata.size == 100 << 20)
      let dest = fx.scratch("big-copy.dat")
      try await ref.write(toFile: dest).result()
      #expect(sha256(file: dest) == sha256(bytes))
    }
  }

  @Test func rangedReadsAtEdges() async throws {
    try await EmulatorFixture.scope { fx in
      let bytes = randomData(10_000, seed: 3)
      let ref = fx.storage.reference(withPath: "edges.bin")
      let metadata = try await ref.putDataAsync(bytes)
      let cases: [Range<Int64>] = [0..<1, 0..<10_000, 9_999..<10_000, 4096..<8192, 5000..<20_000, 1..<2]
      for range in cases {
        let got = try await ref.data(range: range, generation: metadata.generation)
        let upper = Int(min(range.upperBound, 10_000))
        #expect(got == bytes.subdata(in: Int(range.lowerBound)..<upper), "range \(range)")
      }
      #expect(try await ref.data(range: 5..<5).isEmpty)
      // Past the end the object ends first: no bytes, on both APIs (GCS answers 416, the official
      // emulator the whole object with 200).
      #expect(try await ref.data(range: 10_000..<10_010).isEmpty)
      fx.storage.api = .gcs
      #expect(try await ref.data(range: 10_000..<10_010).isEmpty)
      #expect(try await ref.data(range: 9_999..<10_010) == bytes.suffix(1))
    }
  }

  @Test func overwriteIsDetectedByPinnedGeneration() async throws {
    try await EmulatorFixture.scope { fx in
      let ref = fx.storage.reference(withPath: "changing.txt")
      let first = try await ref.putDataAsync(Data("first version".utf8))
      let second = try await ref.putDataAsync(Data("second version".utf8))
      #expect(second.generation > first.generation)
      let error = await #expect(throws: StorageError.self) {
        try await ref.data(range: 0..<5, generation: first.generation)
      }
      #expect(error?.code == .objectChanged)
    }
  }

  @Test func metadataUpdateAndDelete() async throws {
    try await EmulatorFixture.scope { fx in
      let ref = fx.storage.reference(withPath: "docs/readme.txt")
      var upload = StorageMetadata()
      upload.contentType = "text/plain"
      upload.customMetadata = ["owner": "ada", "team": "core"]
      let created = try await ref.putDataAsync(Data("hello".utf8), metadata: upload)
      #expect(created.customMetadata == ["owner": "ada", "team": "core"])
      #expect(created.md5Hash == "XUFAKrxLKna5cZ2REBfFkg==")
      var change = StorageMetadata()
      change.cacheControl = "max-age=60"
      change.customMetadata = ["team": "storage"]
      let updated = try await ref.updateMetadata(change)
      #expect(updated.cacheControl == "max-age=60")
      #expect(updated.customMetadata?["team"] == "storage")
      #expect(updated.customMetadata?["owner"] == "ada")
      #expect(updated.metageneration == created.metageneration + 1)
      let url = try await ref.downloadURL()
      #expect(url.absoluteString.contains("/v0/b/test-bucket/o/docs%2Freadme.txt?alt=media&token="))
      try await ref.delete()
      let error = await #expect(throws: StorageError.self) { try await ref.getMetadata() }
      #expect(error?.code == .objectNotFound)
      let again = await #expect(throws: StorageError.self) { try await ref.delete() }
      #expect(again?.code == .objectNotFound)
    }
  }

  @Test func contentTypeInferredForFiles() async throws {
    try await EmulatorFixture.scope { fx in
      let file = fx.scratch("photo.JPG")
      try Data([0xFF, 0xD8, 0xFF]).write(to: file)
      let metadata = try await fx.storage.reference(withPath: "p/photo.JPG").putFileAsync(from: file)
      #expect(metadata.contentType == "image/jpeg")
    }
  }

  @Test func dataMaxSizeFailsOverTheLimit() async throws {
    try await EmulatorFixture.scope { fx in
      let ref = fx.storage.reference(withPath: "limit.bin")
      _ = try await ref.putDataAsync(randomData(1 << 20))
      let error = await #expect(throws: StorageError.self) { try await ref.data(maxSize: 1000) }
      #expect(error?.code == .downloadSizeExceeded)
      #expect(try await ref.data(maxSize: 1 << 20).count == 1 << 20)
    }
  }
}

@Suite struct RepeatedHeaderTests {
  /// GCS sends `x-goog-hash` twice (crc32c, then md5); both reach the client.
  @Test func bothHashHeadersArrive() async throws {
    try await EmulatorFixture.scope { fx in
      _ = try await fx.storage.reference(withPath: "hashes.bin").putDataAsync(Data("hash me".utf8))
      let url = "http://127.0.0.1:\(fx.emulator.port)/v0/b/\(fx.storage.bucket)/o/hashes.bin?alt=media"
      let response = try await HTTPClient.shared.send(HTTPRequest(method: "GET", url: url))
      let hashes = response.head["x-goog-hash"] ?? ""
      #expect(hashes.contains("crc32c=") && hashes.contains("md5="), "\(hashes)")
    }
  }
}
