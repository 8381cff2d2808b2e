import Foundation
import TestSupport
import StorageCore
import Testing

@Suite struct ReferenceTests {
  let storage = Storage(bucket: "gs://my-bucket/")

  @Test func bucketNameIsCleaned() { #expect(storage.bucket == "my-bucket") }

  @Test(arguments: [
    ("a//b", "a/b"), ("/a/b/", "a/b"), ("", ""), ("////", ""), ("a/b/c.png", "a/b/c.png"),
  ])
  func childNormalises(input: String, expected: String) {
    #expect(storage.reference().child(input).fullPath == expected)
  }

  @Test func properties() {
    let ref = storage.reference(withPath: "a/b/c.png")
    #expect(ref.name == "c.png")
    #expect(ref.bucket == "my-bucket")
    #expect(ref.parent()?.fullPath == "a/b")
    #expect(ref.parent()?.parent()?.parent()?.fullPath == "")
    #expect(ref.root().parent() == nil)
    #expect(ref.root().fullPath == "")
    #expect(ref.description == "gs://my-bucket/a/b/c.png")
    #expect(storage.reference().description == "gs://my-bucket/")
    #expect(storage.reference().child("a").child("").fullPath == "a")
  }

  @Test(arguments: [
    ("gs://my-bucket", "my-bucket", ""),
    ("gs://my-bucket/", "my-bucket", ""),
    ("gs://my-bucket/a//b/", "my-bucket", "a/b"),
    ("gs://my-bucket/?/%/#", "my-bucket", "?/%/#"),
    ("https://firebasestorage.googleapis.com/v0/b/my-bucket/o/path%2Fto%2Fobj.png?alt=media&token=1", "my-bucket", "path/to/obj.png"),
    ("http://127.0.0.1:9199/v0/b/my-bucket/o/a%20b", "my-bucket", "a b"),
    ("https://firebasestorage.googleapis.com:443/v0/b/my-bucket/o/x%23y", "my-bucket", "x#y"),
    ("https://storage.googleapis.com/my-bucket/dir/file.txt", "my-bucket", "dir/file.txt"),
    ("https://storage.googleapis.com/storage/v1/b/my-bucket/o/a%2Fb", "my-bucket", "a/b"),
  ])
  func parsesURLs(url: String, bucket: String, object: String) throws {
    let path = try StoragePath.parse(url: url)
    #expect(path.bucket == bucket)
    #expect(path.object == object)
  }

  @Test(arguments: ["ftp://x/y", "gs://", "https://example.com/nothing", "https://h/v0/b/", "https://h/v0/b/x/o/%zz"])
  func rejectsBadURLs(url: String) {
    #expect(throws: StorageError.self) { try StoragePath.parse(url: url) }
  }

  @Test func bucketMismatchIsAnError() {
    let error = #expect(throws: StorageError.self) { try storage.reference(for: URL(string: "gs://other/x")!) }
    #expect(error?.code == .bucketMismatch)
    #expect(throws: Never.self) { try storage.reference(for: URL(string: "gs://my-bucket/x")!) }
    #expect(storage.reference(forURL: "gs://my-bucket/x").fullPath == "x")
  }

  @Test func storageURLMustNotNameAnObject() throws {
    #expect(throws: StorageError.self) { try Storage.storage(forURL: "gs://b/obj") }
    #expect(Storage.storage(url: "gs://b").bucket == "b")
    #expect(Storage.storage(url: "gs://b") === Storage.storage(url: "gs://b"))
  }
}

@Suite struct MetadataTests {
  @Test func decodesStringNumbersAndMilliseconds() throws {
    let json = """
      {"name":"a/b.txt","bucket":"bk","generation":"1700000000123456","metageneration":"3","size":"42",
       "timeCreated":"2016-03-01T20:16:01.673Z","updated":"2016-03-01T20:16:02.000Z","md5Hash":"abc==",
       "contentType":"text/plain","metadata":{"k":"v","n":5},"downloadTokens":"t1,t2","crc32c":"123"}
      """
    let m = try StorageMetadata(data: Data(json.utf8))
    #expect(m.path == "a/b.txt")
    #expect(m.name == "b.txt")
    #expect(m.generation == 1_700_000_000_123_456)
    #expect(m.metageneration == 3)
    #expect(m.size == 42)
    #expect(m.customMetadata == ["k": "v", "n": "5"])
    #expect(m.downloadTokens == "t1,t2")
    #expect(StorageMetadata.formatDate(m.timeCreated!) == "2016-03-01T20:16:01.673Z")
    let numeric = StorageMetadata(dictionary: ["size": NSNumber(value: 7), "generation": NSNumber(value: 9)])
    #expect(numeric.size == 7 && numeric.generation == 9)
    let back = m.dictionaryRepresentation()
    #expect(back["size"] as? String == "42")
    #expect(back["generation"] as? String == "1700000000123456")
  }

  @Test(arguments: ["2016-03-01T20:16:01.673Z", "1970-01-01T00:00:00.000Z", "2024-02-29T23:59:59.999Z", "2026-11-30T05:01:22Z"])
  func datesRoundTrip(text: String) throws {
    let date = try #require(StorageMetadata(dictionary: ["updated": text]).updated)
    let expected = text.count == 20 ? String(text.dropLast()) + ".000Z" : text
    #expect(StorageMetadata.formatDate(date) == expected)
    #expect(abs(date.timeIntervalSince1970 - (try Date.ISO8601FormatStyle(includingFractionalSeconds: text.count > 20).parse(text)).timeIntervalSince1970) < 0.0005)
  }

  @Test func notJSONIsAnError() {
    #expect(throws: StorageError.self) { try StorageMetadata(data: Data("nope".utf8)) }
  }

  @Test(arguments: [
    ("photo.JPG", "image/jpeg"), ("a/b/readme.txt", "text/plain"), ("x.tar.gz", "application/gzip"),
    ("noext", "application/octet-stream"), (".bashrc", "application/octet-stream"),
    ("data.json", "application/json"), ("v.unknownext", "application/octet-stream"), ("p.PNG", "image/png"),
  ])
  func contentTypes(name: String, type: String) {
    #expect(ContentType.infer(fromName: name) == type)
  }
}

@Suite struct ErrorTests {
  @Test(arguments: [
    (401, StorageErrorCode.unauthenticated), (402, .quotaExceeded), (403, .unauthorized),
    (404, .objectNotFound), (409, .nonMatchingChecksum), (412, .preconditionFailed), (400, .unknown),
    (500, .unknown),
  ])
  func statusMapping(status: Int, code: StorageErrorCode) {
    #expect(StorageError.code(forStatus: status) == code)
  }

  @Test func sdkNumericValues() {
    #expect(StorageErrorCode.objectNotFound.rawValue == -13010)
    #expect(StorageErrorCode.downloadSizeExceeded.rawValue == -13032)
    #expect(StorageErrorCode.cancelled.rawValue == -13040)
    #expect(StorageErrorCode.bucketMismatch.rawValue == -13051)
  }

  /// Google's retry guidance and the JS SDK: 408, 429 (after Retry-After), 500, 502, 503, 504.
  @Test(arguments: [408, 429, 500, 502, 503, 504])
  func retryableStatuses(status: Int) { #expect(Backoff.isRetryable(status: status)) }

  @Test(arguments: [400, 401, 403, 404, 412, 416, 501])
  func finalStatuses(status: Int) { #expect(!Backoff.isRetryable(status: status)) }
}

@Suite struct BackoffTests {
  @Test func doublesWithJitterAndCap() {
    var b = Backoff(initialDelay: 1)
    let delays = (0..<8).map { _ in b.nextDelay(random: 0) }
    #expect(delays == [1, 2, 4, 8, 16, 32, 32, 32])
    var j = Backoff(initialDelay: 1)
    let jittered = j.nextDelay(random: 0.999)
    #expect(jittered > 1 && jittered < 1.25)
  }

  @Test func retryAfterWinsWhenLonger() {
    var b = Backoff(initialDelay: 0.1)
    #expect(b.nextDelay(retryAfter: 3, random: 0) == 3)
    #expect(b.nextDelay(retryAfter: 0.01, random: 0) == 0.2)
  }
}

@Suite struct ChecksumTests {
  @Test func crc32cKnownValue() {
    var crc = CRC32C()
    Data("123456789".utf8).withUnsafeBytes { crc.update($0) }
    #expect(crc.value == 0xE306_9283)
    #expect(crc.matches(String(0xE306_9283 as UInt32)))
    #expect(crc.matches(crc.base64))
  }

  /// Long runs are checksummed in interleaved lanes, short ones in one chain: the same bytes fed
  /// whole and in pieces of every size around the lanes' (3 KiB) give the same CRC, and one
  /// flipped byte anywhere in a lane changes it.
  @Test func crc32cOfLongRunsMatchesShortPieces() {
    let bytes = randomData(200_000, seed: 11)
    var whole = CRC32C()
    bytes.withUnsafeBytes { whole.update($0) }
    for piece in [1, 7, 8, 1023, 1024, 3071, 3072, 3073, 6144, 9000, 65_536] {
      var crc = CRC32C()
      var at = 0
      while at < bytes.count {
        let end = min(bytes.count, at + piece)
        bytes[at..<end].withUnsafeBytes { crc.update($0) }
        at = end
      }
      #expect(crc.value == whole.value, "pieces of \(piece)")
    }
    for flipped in [0, 1023, 1024, 2047, 2048, 3071, 150_000] {
      var damaged = bytes
      damaged[flipped] ^= 0x40
      var crc = CRC32C()
      damaged.withUnsafeBytes { crc.update($0) }
      #expect(crc.value != whole.value, "byte \(flipped)")
    }
  }

  @Test func md5KnownValue() {
    let d = Digest(.md5)
    d.update(Data("hello".utf8))
    #expect(d.finalize().base64EncodedString() == "XUFAKrxLKna5cZ2REBfFkg==")
  }

  /// Block CRCs taken as bytes arrive combine into the whole object's CRC: parts of any sizes,
  /// including empty ones and the staged copies' 64 KiB blocks with a short last one.
  @Test func crc32cOfPartsCombinesIntoTheWhole() {
    let bytes = randomData(1 << 20 + 333, seed: 77)
    var whole = CRC32C()
    bytes.withUnsafeBytes { whole.update($0) }
    var generator = SeededGenerator(seed: 5)
    for round in 0..<20 {
      var cuts = [0, bytes.count]
      let extra = round == 0 ? Array(stride(from: 65_536, to: bytes.count, by: 65_536)) : (0..<Int(generator.next() % 12)).map { _ in Int(generator.next() % UInt64(bytes.count)) }
      cuts += extra
      cuts.sort()
      let parts = zip(cuts, cuts.dropFirst()).map { from, to -> (crc: UInt32, length: Int) in
        var crc = CRC32C()
        bytes[from..<to].withUnsafeBytes { crc.update($0) }
        return (crc.value, to - from)
      }
      #expect(CRC32C.combining(parts).value == whole.value, "round \(round): cuts \(cuts)")
    }
    // A part with one flipped byte, or parts in the wrong order, give another CRC.
    func blocks(_ data: Data) -> [(crc: UInt32, length: Int)] {
      stride(from: 0, to: data.count, by: 65_536).map { from in
        var crc = CRC32C()
        data[from..<min(data.count, from + 65_536)].withUnsafeBytes { crc.update($0) }
        return (crc.value, min(data.count, from + 65_536) - from)
      }
    }
    var damaged = bytes
    damaged[500_000] ^= 1
    let good = blocks(bytes)
    #expect(CRC32C.combining(good).value == whole.value)
    #expect(CRC32C.combining(blocks(damaged)).value != whole.value)
    #expect(CRC32C.combining([good[1], good[0]] + good.dropFirst(2)).value != whole.value)
  }
}
