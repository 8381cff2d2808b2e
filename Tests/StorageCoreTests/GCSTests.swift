import Foundation
import TestSupport
import StorageCore
import StorageEmulator
import Testing

@Suite struct GCSTests {
  /// A fixture whose client speaks the GCS JSON API.
  func gcsScope(_ body: (EmulatorFixture) async throws -> Void) async throws {
    try await EmulatorFixture.scope { fx in
      fx.storage.api = .gcs
      try await body(fx)
    }
  }

  @Test(arguments: [0, 1, 300_000, 8 << 20])
  func roundTripOverTheJSONAPI(size: Int) async throws {
    try await gcsScope { fx in
      fx.storage.uploadChunkSize = 1 << 20
      let bytes = randomData(size, seed: UInt64(size) + 3)
      let ref = fx.storage.reference(withPath: "gcs/obj-\(size)")
      let m = try await ref.putDataAsync(bytes)
      #expect(m.size == Int64(size) && m.generation > 0)
      #expect(try await ref.data(maxSize: Int64(size) + 1) == bytes)
      let file = fx.scratch("gcs-\(size)")
      try await ref.write(toFile: file, generation: m.generation).result()
      #expect(try Data(contentsOf: file) == bytes)
      if size > 10 {
        #expect(try await ref.data(range: 3..<10, generation: m.generation) == bytes.subdata(in: 3..<10))
      }
    }
  }

  /// rewriteTo: bytes and metadata copied by the server; the target's preconditions hold; a
  /// source generation the bucket no longer has is not found; the Firebase API has no copy.
  @Test func theServerCopiesAnObject() async throws {
    try await gcsScope { fx in
      let bytes = randomData(300_000, seed: 41)
      let source = fx.storage.reference(withPath: "c/source name.bin")
      let meta = StorageMetadata()
      meta.contentType = "application/x-test"
      meta.customMetadata = ["k": "v"]
      let m = try await source.putDataAsync(bytes, metadata: meta)
      let target = fx.storage.reference(withPath: "c/a/target.bin")
      let copied = try await source.copy(to: target, generation: m.generation, preconditions: Preconditions(ifGenerationMatch: 0))
      #expect(copied.path == "c/a/target.bin" && copied.size == m.size && copied.crc32c == m.crc32c && copied.generation > m.generation)
      #expect(copied.contentType == "application/x-test" && copied.customMetadata?["k"] == "v")
      #expect(try await target.data(maxSize: 1 << 20) == bytes)
      do throws(StorageError) {
        _ = try await source.copy(to: target, generation: m.generation, preconditions: Preconditions(ifGenerationMatch: 0))
        Issue.record("copied over an object with ifGenerationMatch=0")
      } catch {
        #expect(error.code == .preconditionFailed)
      }
      do throws(StorageError) {
        _ = try await source.copy(to: fx.storage.reference(withPath: "c/other"), generation: m.generation + 1, preconditions: Preconditions())
        Issue.record("copied a generation that does not exist")
      } catch {
        #expect(error.code == .objectNotFound)
      }
      fx.storage.api = .firebase
      do throws(StorageError) {
        _ = try await source.copy(to: target, generation: nil, preconditions: Preconditions())
        Issue.record("copied over the Firebase API")
      } catch {
        #expect(error.code == .invalidArgument)
      }
    }
  }

  @Test func listCarriesMetadataAndPages() async throws {
    try await gcsScope { fx in
      for i in 0..<25 { _ = try await fx.storage.reference(withPath: "l/f\(i).txt").putDataAsync(Data(repeating: 1, count: i)) }
      _ = try await fx.storage.reference(withPath: "l/sub/x").putDataAsync(Data("x".utf8))
      var items: [String] = []
      var token: String? = nil
      var pages = 0
      repeat {
        let page = try await fx.storage.reference(withPath: "l").listPage(pageToken: token, maxResults: 10)
        pages += 1
        items += page.items
        for name in page.items { #expect(page.metadata[name]?.size == Int64(Int(name.dropFirst(3).dropLast(4))!)) }
        token = page.nextPageToken
      } while token != nil
      #expect(items.count == 25)
      #expect(pages == 3)
    }
  }

  @Test func preconditionsAnd412() async throws {
    try await gcsScope { fx in
      let ref = fx.storage.reference(withPath: "pre.txt")
      let first = try await ref.putDataAsync(Data("one".utf8), preconditions: Preconditions(ifGenerationMatch: 0))
      let again = await #expect(throws: StorageError.self) {
        try await ref.putDataAsync(Data("two".utf8), preconditions: Preconditions(ifGenerationMatch: 0))
      }
      #expect(again?.code == .preconditionFailed && again?.httpStatus == 412)
      let second = try await ref.putDataAsync(Data("two".utf8), preconditions: Preconditions(ifGenerationMatch: first.generation))
      let stale = await #expect(throws: StorageError.self) {
        try await ref.delete(preconditions: Preconditions(ifGenerationMatch: first.generation))
      }
      #expect(stale?.code == .preconditionFailed)
      var change = StorageMetadata()
      change.contentLanguage = "en"
      let badMeta = await #expect(throws: StorageError.self) {
        try await ref.updateMetadata(change, preconditions: Preconditions(ifMetagenerationMatch: 7))
      }
      #expect(badMeta?.code == .preconditionFailed)
      _ = try await ref.updateMetadata(change, preconditions: Preconditions(ifMetagenerationMatch: 1))
      // A read pinned to the replaced generation fails as changed, never with the new bytes.
      let gone = await #expect(throws: StorageError.self) { try await ref.data(range: 0..<2, generation: first.generation) }
      #expect(gone?.code == .objectChanged)
      try await ref.delete(preconditions: Preconditions(ifGenerationMatch: second.generation))
    }
  }

  @Test func resumableUploadSurvivesResets() async throws {
    try await gcsScope { fx in
      fx.storage.uploadChunkSize = 1 << 20
      // Room for the resets on a busy machine: with two test runs beside it, the first try
      // took the fixture's whole 10 s ("gave up after 1 attempts").
      fx.storage.maxUploadRetryTime = 60
      var faults = Faults()
      faults.resetAfterBytes = 400_000
      faults.limit = 2
      faults.pathFilter = "upload_id"
      fx.emulator.setFaults(faults)
      let bytes = randomData((4 << 20) + 77, seed: 12)
      let m = try await fx.storage.reference(withPath: "r.bin").putDataAsync(bytes)
      #expect(m.size == Int64(bytes.count))
      fx.emulator.setFaults(Faults())
      #expect(try await fx.storage.reference(withPath: "r.bin").data(maxSize: 8 << 20) == bytes)
    }
  }

  @Test func bothAPIsSeeTheSameObjects() async throws {
    try await EmulatorFixture.scope { fx in
      var meta = StorageMetadata()
      meta.customMetadata = ["k": "v"]
      let viaFirebase = try await fx.storage.reference(withPath: "shared/a.txt").putDataAsync(Data("firebase".utf8), metadata: meta)
      let gcs = Storage(bucket: "test-bucket")
      gcs.api = .gcs
      gcs.useEmulator(host: "127.0.0.1", port: fx.emulator.port)
      let seen = try await gcs.reference(withPath: "shared/a.txt").getMetadata()
      #expect(seen.generation == viaFirebase.generation)
      #expect(seen.customMetadata == ["k": "v"])
      #expect(seen.downloadTokens == viaFirebase.downloadTokens)
      _ = try await gcs.reference(withPath: "shared/b.txt").putDataAsync(Data("gcs".utf8))
      #expect(try await fx.storage.reference(withPath: "shared/b.txt").data(maxSize: 10) == Data("gcs".utf8))
      let url = try await gcs.reference(withPath: "shared/a.txt").downloadURL()
      #expect(url.absoluteString.contains("/v0/b/test-bucket/o/shared%2Fa.txt?alt=media&token="))
    }
  }
}
