import Foundation
import TestSupport
@testable import StorageCore
import StorageEmulator
import Testing

/// The protocol as Google's own code speaks it, each rule stated as the request a real SDK sends
/// and the answer Google's code gives (the file it comes from is named at each test), run
/// against our emulator and by our client. Rules tested elsewhere: a finished resumable session
/// (`ProtocolAlignmentTests.aLostAnswerToTheLastChunkStillSucceeds`, `aCommandOnAFinishedSessionIs400`),
/// chunk granularity, 500 retried, 403 near expiry and IPv6 hosts (`ProtocolAlignmentTests`);
/// the answer forms a raw client sees (`StorageEmulatorTests.ContractFormTests`).
@Suite struct ContractTests {
  func exchange(_ fx: EmulatorFixture, _ target: String, _ headers: [(String, String)] = []) async throws -> HTTPResponse {
    try await HTTPClient.shared.send(HTTPRequest(method: "GET", url: "http://127.0.0.1:\(fx.emulator.port)\(target)", headers: headers))
  }

  /// An object stored with `Content-Encoding: gzip` (`gsutil cp -z`). Without
  /// `Accept-Encoding: gzip` Google serves it decompressed: no Content-Length, the Range ignored,
  /// `x-goog-hash` still of the stored bytes (firebase-tools `src/emulator/storage/apis/shared.ts`,
  /// `sendFileBytes`; cloud.google.com/storage/docs/transcoding). With it, the stored bytes, and
  /// ranges work.
  @Test(arguments: ["/v0/b/test-bucket/o/web%2Fapp.js?alt=media", "/download/storage/v1/b/test-bucket/o/web%2Fapp.js?alt=media"])
  func aGzipObjectIsTranscodedUnlessGzipIsAccepted(target: String) async throws {
    try await EmulatorFixture.scope { fx in
      let plain = Data(String(repeating: "function hello() { return 42 }\n", count: 400).utf8)
      let stored = try gzip(plain)
      let metadata = StorageMetadata()
      metadata.contentEncoding = "gzip"
      metadata.contentType = "text/javascript"
      let put = try await fx.storage.reference(withPath: "web/app.js").putDataAsync(stored, metadata: metadata)
      #expect(put.contentEncoding == "gzip" && put.size == Int64(stored.count))

      var storedCRC = CRC32C()
      stored.withUnsafeBytes { storedCRC.update($0) }
      let transcoded = try await exchange(fx, target, [("Range", "bytes=0-9")])
      #expect(transcoded.status == 200, "the Range is ignored")
      #expect(transcoded.body == plain)
      #expect(transcoded.head["content-length"] == nil && transcoded.head["content-encoding"] == nil)
      let hash = try #require(transcoded.head["x-goog-hash"])
      #expect(hash.contains("crc32c=\(storedCRC.base64)"), "x-goog-hash is of the stored bytes: \(hash)")

      let asStored = try await exchange(fx, target, [("Accept-Encoding", "gzip")])
      #expect(asStored.status == 200 && asStored.body == stored && asStored.head["content-encoding"] == "gzip")
      let ranged = try await exchange(fx, target, [("Accept-Encoding", "gzip"), ("Range", "bytes=0-9")])
      #expect(ranged.status == 206 && ranged.body == stored.prefix(10))
    }
  }

  /// Per surface: the Swift API returns what the iOS SDK returns (NSURLSession hands the app the
  /// decoded body), and verifies the stored bytes first; `write(toFile:storedBytes:)` (`bucketfs
  /// cp`) and ranged reads (the mount) keep the stored bytes, so sizes, ranges and hashes agree
  /// with the bucket, as gcsfuse and rclone do.
  @Test(arguments: [StorageAPI.firebase, .gcs]) func eachSurfaceGetsTheBytesItPromises(api: StorageAPI) async throws {
    try await EmulatorFixture.scope { fx in
      fx.storage.api = api
      let plain = randomData(300_000, seed: 91).base64EncodedData()
      let stored = try gzip(plain)
      let metadata = StorageMetadata()
      metadata.contentEncoding = "gzip"
      let ref = fx.storage.reference(withPath: "logs/day.log")
      _ = try await ref.putDataAsync(stored, metadata: metadata)

      #expect(try await ref.data(maxSize: 10 << 20) == plain)
      let decoded = fx.scratch("decoded.log")
      try await ref.write(toFile: decoded).result()
      #expect(try Data(contentsOf: decoded) == plain)
      let kept = fx.scratch("kept.log.gz")
      try await ref.write(toFile: kept, storedBytes: true).result()
      #expect(try Data(contentsOf: kept) == stored)
      #expect(try await ref.data(range: 100..<200) == stored[100..<200])
      #expect(try await ref.getMetadata().size == Int64(stored.count))
    }
  }

  /// A download of `ref` into `destination`, paused before any answer came (the server is slow
  /// for a moment), whose partial file then holds `bytes`: resumed, it asks from their end.
  func pausedDownload(_ fx: EmulatorFixture, _ ref: StorageReference, into destination: URL, holding bytes: Data) throws
    -> StorageDownloadTask
  {
    var slow = Faults()
    slow.latency = .milliseconds(400)
    fx.emulator.setFaults(slow)
    let task = ref.write(toFile: destination)
    task.pause()
    fx.emulator.setFaults(Faults())
    try bytes.write(to: URL(fileURLWithPath: task.partialFilePath))
    return task
  }

  /// A download paused after its last byte and resumed asks for `Range: bytes=SIZE-`. GCS
  /// answers 416 (`Content-Range: bytes */SIZE`); the official emulator the whole object with
  /// 200 (firebase-tools `apis/shared.ts`: Express's `req.range` finds the range unsatisfiable and
  /// the body goes out whole). Neither may fail the download, and a 416 must not fetch it again.
  @Test(arguments: [StorageAPI.firebase, .gcs]) func aResumeAtTheEndCompletes(api: StorageAPI) async throws {
    try await EmulatorFixture.scope { fx in
      fx.storage.api = api
      let data = randomData(700_000, seed: 92)
      let ref = fx.storage.reference(withPath: "end/whole.bin")
      _ = try await ref.putDataAsync(data)
      let destination = fx.scratch("whole.bin")
      // Every byte is on disk when the task resumes.
      let task = try pausedDownload(fx, ref, into: destination, holding: data)
      let sentBefore = fx.emulator.bodyBytesSent
      task.resume()
      try await task.result()
      #expect(try Data(contentsOf: destination) == data)
      let sent = fx.emulator.bodyBytesSent - sentBefore
      if api == .gcs {
        #expect(sent < data.count, "416 at the end: the object was fetched again (\(sent) bytes)")
      } else {
        #expect(sent >= data.count, "the official emulator's 200 sends the whole object")
      }
    }
  }

  /// A resume at the end whose bytes are not the object's (changed on the server meanwhile)
  /// is not accepted on the strength of the 416: the metadata's hash decides.
  @Test func aResumeAtTheEndChecksTheBytes() async throws {
    try await EmulatorFixture.scope { fx in
      fx.storage.api = .gcs
      let data = randomData(300_000, seed: 93)
      let ref = fx.storage.reference(withPath: "end/checked.bin")
      _ = try await ref.putDataAsync(data)
      let destination = fx.scratch("checked.bin")
      var wrong = data
      wrong[1000] ^= 0xff
      let task = try pausedDownload(fx, ref, into: destination, holding: wrong)
      task.resume()
      await #expect(throws: StorageError.self) { try await task.result() }
      #expect(!FileManager.default.fileExists(atPath: destination.path))
    }
  }

  /// Preconditions over the Firebase API: the official emulator ignores `ifGenerationMatch` on
  /// v0 (firebase-tools `src/emulator/storage/apis/firebase.ts` reads none) and the JS SDK never
  /// sends one (`packages/storage/src/implementation/requests.ts`), so nothing promises them.
  /// Against a server that ignores them, our client still never overwrites a generation it was
  /// told not to: it checks just before the upload. The GCS API is enforced by the server.
  @Test(arguments: [StorageAPI.firebase, .gcs]) func aPreconditionHoldsEvenWhereTheServerIgnoresIt(api: StorageAPI) async throws {
    try await EmulatorFixture.scope(configure: { $0.ignoresFirebasePreconditions = true }) { fx in
      fx.storage.api = api
      let ref = fx.storage.reference(withPath: "pre/cond.txt")
      let first = try await ref.putDataAsync(Data("first".utf8))

      // The server's side: v0 ignores the precondition, GCS refuses.
      let raw = try await HTTPClient.shared.send(HTTPRequest(
        method: "POST",
        url: api == .firebase
          ? "http://127.0.0.1:\(fx.emulator.port)/v0/b/test-bucket/o?name=pre%2Fraw.txt&ifGenerationMatch=12345"
          : "http://127.0.0.1:\(fx.emulator.port)/upload/storage/v1/b/test-bucket/o?uploadType=media&name=pre%2Fraw.txt&ifGenerationMatch=12345",
        headers: [("Content-Type", "text/plain")], body: .data(Data("raw".utf8))))
      #expect(raw.status == (api == .firebase ? 200 : 412))

      // Our client's side: a wrong generation changes nothing on either API.
      await #expect(throws: StorageError.self) {
        _ = try await ref.putDataAsync(Data("second".utf8), preconditions: Preconditions(ifGenerationMatch: first.generation + 1))
      }
      await #expect(throws: StorageError.self) {
        _ = try await ref.putDataAsync(Data("third".utf8), preconditions: Preconditions(ifGenerationMatch: 0))
      }
      do throws(StorageError) {
        _ = try await ref.putDataAsync(Data("fourth".utf8), preconditions: Preconditions(ifGenerationMatch: first.generation + 1))
      } catch {
        #expect(error.code == .preconditionFailed)
      }
      #expect(try await ref.data(maxSize: 100) == Data("first".utf8))
      let second = try await ref.putDataAsync(Data("fifth".utf8), preconditions: Preconditions(ifGenerationMatch: first.generation))
      #expect(second.generation > first.generation)
      #expect(try await ref.data(maxSize: 100) == Data("fifth".utf8))
      let fresh = try await fx.storage.reference(withPath: "pre/new.txt").putDataAsync(Data("new".utf8), preconditions: Preconditions(ifGenerationMatch: 0))
      #expect(fresh.generation > 0)
    }
  }

  /// v0 list pages as the official emulator pages them (firebase-tools
  /// `src/emulator/storage/files.ts`, `listItems`): only items count toward `maxResults`, and every
  /// page repeats the prefixes. `listAll` names each prefix once and every item once.
  @Test func v0ListPagesRepeatPrefixesAndCountOnlyItems() async throws {
    try await EmulatorFixture.scope { fx in
      for name in ["d/a/1", "d/b/1", "d/c/1", "d/f1", "d/f2", "d/f3", "d/f4", "d/f5"] {
        _ = try await fx.storage.reference(withPath: name).putDataAsync(Data(name.utf8))
      }
      let folder = fx.storage.reference(withPath: "d")
      let page = try await folder.list(maxResults: 2)
      #expect(page.items.map(\.name) == ["f1", "f2"])
      #expect(page.prefixes.map(\.name) == ["a", "b", "c"])
      let second = try await folder.list(maxResults: 2, pageToken: try #require(page.pageToken))
      #expect(second.items.map(\.name) == ["f3", "f4"])
      #expect(second.prefixes.map(\.name) == ["a", "b", "c"])
      let all = try await folder.listAll()
      #expect(all.items.map(\.name) == ["f1", "f2", "f3", "f4", "f5"])
      #expect(all.prefixes.map(\.name) == ["a", "b", "c"])
    }
  }

  /// v0 metadata carries `crc32c` as the uint32 in decimal (firebase-tools
  /// `src/emulator/storage/metadata.ts`); GCS as base64. The client takes either.
  @Test func crc32cIsDecimalInV0AndBase64InGCS() async throws {
    try await EmulatorFixture.scope { fx in
      let data = Data("checksummed".utf8)
      var crc = CRC32C()
      data.withUnsafeBytes { crc.update($0) }
      let ref = fx.storage.reference(withPath: "crc/one.txt")
      let v0 = try await ref.putDataAsync(data)
      #expect(v0.crc32c == String(crc.value))
      fx.storage.api = .gcs
      #expect(try await ref.getMetadata().crc32c == crc.base64)
      fx.storage.api = .firebase
      let copy = fx.scratch("one.txt")
      try await ref.write(toFile: copy).result()
      #expect(try Data(contentsOf: copy) == data)
    }
  }
}
