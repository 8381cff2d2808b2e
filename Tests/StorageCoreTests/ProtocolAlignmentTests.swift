import Foundation
import TestSupport
@testable import StorageCore
import StorageEmulator
import Testing

/// Where the protocol as Google's own code speaks it differs from what our two halves agreed on.
@Suite struct ProtocolAlignmentTests {
  /// The answer to a resumable upload's last chunk is lost: the object is stored, the client
  /// queries the session, sees `final`, and reports the stored object (it once sent another
  /// finalize, which the official emulator answers with 400).
  @Test(arguments: [StorageAPI.firebase, .gcs]) func aLostAnswerToTheLastChunkStillSucceeds(api: StorageAPI) async throws {
    try await EmulatorFixture.scope { fx in
      fx.storage.api = api
      let data = randomData(600_000, seed: 77)
      let source = fx.scratch("upload.bin")
      try data.write(to: source)
      var faults = Faults()
      faults.loseAnswerTo = "upload_id="
      faults.limit = 1
      fx.emulator.setFaults(faults)
      let ref = fx.storage.reference(withPath: "lost/answer.bin")
      let metadata = try await ref.putFileAsync(from: source)
      #expect(metadata.size == Int64(data.count))
      #expect(metadata.path == "lost/answer.bin")
      #expect(try await ref.data(maxSize: 1 << 20) == data)
    }
  }

  /// Our emulator answers a command on a finished session as the official one does: 400.
  @Test func aCommandOnAFinishedSessionIs400() async throws {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("final-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: root) }
    var config = StorageEmulator.Configuration(root: root)
    config.port = 0
    let emulator = try StorageEmulator(config)
    defer { emulator.stop() }
    func exchange(_ method: String, _ target: String, _ headers: [(String, String)], _ body: String) async throws -> (Int, [String: String]) {
      let request = HTTPRequest(
        method: method, url: "http://127.0.0.1:\(emulator.port)\(target)", headers: headers, body: .data(Data(body.utf8)))
      let response = try await HTTPClient.shared.send(request)
      return (response.status, response.head.headers)
    }
    let (startStatus, startHeaders) = try await exchange(
      "POST", "/v0/b/bk/o?name=f.txt", [("X-Goog-Upload-Protocol", "resumable"), ("X-Goog-Upload-Command", "start"), ("Content-Type", "application/json")], "{}")
    #expect(startStatus == 200)
    let url = try #require(startHeaders["x-goog-upload-url"])
    let target = String(url.dropFirst("http://127.0.0.1:\(emulator.port)".count))
    let (done, _) = try await exchange("POST", target, [("X-Goog-Upload-Command", "upload, finalize"), ("X-Goog-Upload-Offset", "0")], "hello")
    #expect(done == 200)
    let (again, _) = try await exchange("POST", target, [("X-Goog-Upload-Command", "upload, finalize"), ("X-Goog-Upload-Offset", "5")], "")
    #expect(again == 400)
    let (query, headers) = try await exchange("POST", target, [("X-Goog-Upload-Command", "query")], "")
    #expect(query == 200)
    #expect(headers["x-goog-upload-status"] == "final")
  }

  /// Chunks are multiples of 256 KiB (the protocol's granularity): a chunk size between is
  /// rounded down, and an upload with it goes through.
  @Test func chunkSizesAreMultiplesOfTheGranularity() async throws {
    try await EmulatorFixture.scope { fx in
      fx.storage.uploadChunkSizeBytes = 300_000
      #expect(fx.storage.uploadChunkSizeBytes == 256 * 1024)
      fx.storage.uploadChunkSizeBytes = 3 << 20 + 5
      #expect(fx.storage.uploadChunkSizeBytes == 3 << 20)
      fx.storage.uploadChunkSizeBytes = 1
      #expect(fx.storage.uploadChunkSizeBytes == 256 * 1024)
      let data = randomData(700_000, seed: 78)
      let source = fx.scratch("chunks.bin")
      try data.write(to: source)
      let ref = fx.storage.reference(withPath: "chunks/c.bin")
      _ = try await ref.putFileAsync(from: source)
      #expect(try await ref.data(maxSize: 1 << 20) == data)
    }
  }

  /// An upload whose file is not in the page cache: the transfer thread does not read it (the
  /// upload pauses while its queue reads it in) and the upload completes, byte for byte.
  @Test func anUploadOfAFileNotInThePageCacheCompletes() async throws {
    try await EmulatorFixture.scope { fx in
      fx.storage.uploadChunkSizeBytes = 4 << 20
      let data = randomData(24 << 20, seed: 79)
      let source = fx.scratch("cold.bin")
      try data.write(to: source)
      let fd = open(source.path, O_RDONLY)
      #expect(fsync(fd) == 0)
      // Out of the page cache, so that reads without waiting find nothing.
      #expect(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0)
      close(fd)
      let ref = fx.storage.reference(withPath: "cold/c.bin")
      let metadata = try await ref.putFileAsync(from: source)
      #expect(metadata.size == Int64(data.count))
      #expect(try await ref.data(maxSize: 32 << 20) == data)
    }
  }

  /// Google's retry guidance and the JS SDK retry 500 (a transient backend failure).
  @Test func a500IsRetried() async throws {
    var faults = Faults()
    faults.errorStatus = 500
    faults.errorFraction = 1
    faults.limit = 2
    try await EmulatorFixture.scope(faults: faults) { fx in
      fx.emulator.setFaults(Faults())
      let ref = fx.storage.reference(withPath: "r/five-hundred.txt")
      _ = try await ref.putDataAsync(Data("x".utf8))
      fx.emulator.setFaults(faults)
      #expect(try await ref.getMetadata().size == 1)
      #expect(try await ref.data(maxSize: 100) == Data("x".utf8))
    }
  }

  /// `FIREBASE_STORAGE_EMULATOR_HOST=[::1]:9199` keeps its brackets in the URLs built from it.
  @Test func anIPv6EmulatorAddressWorks() async throws {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("v6-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: root) }
    var config = StorageEmulator.Configuration(root: root)
    config.host = "::1"
    config.port = 0
    let emulator = try StorageEmulator(config)
    defer { emulator.stop() }
    let (host, port) = try #require(Storage.hostAndPort("[::1]:\(emulator.port)"))
    let storage = Storage(bucket: "v6")
    storage.useEmulator(withHost: host, port: port)
    let ref = storage.reference(withPath: "over/v6.txt")
    _ = try await ref.putDataAsync(Data("six".utf8))
    #expect(try await ref.data(maxSize: 100) == Data("six".utf8))
    #expect(try await ref.downloadURL().absoluteString.hasPrefix("http://[::1]:\(emulator.port)/v0/b/v6/o/"))
  }

  /// A 403 with a token at its end gets one retry with a fresh token (rules denials answer 403
  /// where an expired token elsewhere gets 401); a 403 with a fresh token does not.
  @Test func a403RefreshesOnlyATokenNearItsEnd() throws {
    let storage = Storage(bucket: "b")
    storage.credentials = Credentials(source: ScriptedSource(["t1", "t2"]))
    var budget = RetryBudget(storage, seconds: 10)
    let fresh = AccessToken(value: "t", expiry: Date().addingTimeInterval(3000))
    let deniedFresh = budget.refreshCredentials(after: 403, token: fresh)
    #expect(!deniedFresh)
    let ending = AccessToken(value: "t", expiry: Date().addingTimeInterval(20))
    let deniedEnding = budget.refreshCredentials(after: 403, token: ending)
    #expect(deniedEnding)
    // Once per operation.
    let again = budget.refreshCredentials(after: 401, token: ending)
    #expect(!again)
    var other = RetryBudget(storage, seconds: 10)
    let unauthenticated = other.refreshCredentials(after: 401, token: fresh)
    #expect(unauthenticated)
  }
}

