@testable import BucketFS
import Foundation
import StorageCore
import Synchronization
import Testing

/// Numbers and flags from outside, staged copies damaged while they fill, and staged data whose
/// index was lost.
@Suite struct HardeningTests {
  /// A time no RFC 3339 text can hold (touch -d @9223372036854775807, or not a number) is written
  /// as the nearest one it can, not a crash converting it.
  @Test func timesPastFourDigitYearsAreClamped() {
    #expect(KeptTime.format(Timestamp(seconds: .max)) == "9999-12-31T23:59:59.999999999Z")
    #expect(KeptTime.format(Timestamp(seconds: -.max)) == "0001-01-01T00:00:00.000000000Z")
    #expect(KeptTime.format(Timestamp(.nan)) == "1970-01-01T00:00:00.000000000Z")
    #expect(KeptTime.format(1.5) == "1970-01-01T00:00:01.500000000Z")
  }

  /// Kept times read back exactly, to the nanosecond, by the fast path (UTC, any number of
  /// digits) and by the formatter (an offset), and what is not a time is not read as one.
  @Test func keptTimesReadBackExactly() {
    let times = [
      Timestamp(seconds: 0), Timestamp(seconds: 1, nanoseconds: 500_000_000), Timestamp(seconds: 1_612_325_106, nanoseconds: 999_999_999),
      Timestamp(seconds: 1_612_325_106, nanoseconds: 999_999_900), Timestamp(seconds: 1_700_000_000, nanoseconds: 123_456_789),
      Timestamp(seconds: 1_700_000_000, nanoseconds: 123_456_790), Timestamp(seconds: -86_401, nanoseconds: 750_000_000),
    ]
    for t in times {
      #expect(KeptTime.parse(KeptTime.format(t)) == t, "\(t): \(KeptTime.format(t))")
    }
    #expect(KeptTime.parse("2021-02-03T04:05:06Z") == Timestamp(seconds: 1_612_325_106))
    #expect(KeptTime.parse("2021-02-03T04:05:06.5Z") == Timestamp(seconds: 1_612_325_106, nanoseconds: 500_000_000))
    #expect(KeptTime.parse("2021-02-03T05:05:06.5+01:00") == Timestamp(seconds: 1_612_325_106, nanoseconds: 500_000_000))
    // Digits past the nanosecond are below what a file time holds.
    #expect(KeptTime.parse("2021-02-03T04:05:06.1234567891Z") == Timestamp(seconds: 1_612_325_106, nanoseconds: 123_456_789))
    #expect(KeptTime.parse("2021-02-03T04:05:06.x5Z") == nil)
    #expect(KeptTime.parse("2021-13-03T04:05:06Z") == nil)
    #expect(KeptTime.parse("yesterday") == nil)
  }

  /// Two times 100 ns apart stay two times; a Double of seconds since 1970 merged them.
  @Test func timesCloseTogetherStayApart() {
    let a = Timestamp(seconds: 1_700_000_000, nanoseconds: 999_999_900)
    let b = Timestamp(seconds: 1_700_000_000, nanoseconds: 999_999_999)
    #expect(a != b && a < b)
    #expect(Timestamp(a.timespec) == a)
    #expect(Timestamp(seconds: 5, nanoseconds: -1) == Timestamp(seconds: 4, nanoseconds: 999_999_999))
  }

  /// Sizes a server may send that no object has: negative, or so large that adding a block overflows.
  @Test func sizesNoObjectHasAreNotTaken() {
    #expect(StorageMetadata(dictionary: ["size": "-5"]).size == 0)
    #expect(StorageMetadata(dictionary: ["size": "9223372036854775807"]).size == Int64.max / 2)
    #expect(StorageMetadata(dictionary: ["size": "12"]).size == 12)
  }

  func parse(_ list: String) -> Result<MountOptions, MountOptions.ParseError> {
    var options = MountOptions()
    do throws(MountOptions.ParseError) {
      try options.apply(list)
      return .success(options)
    } catch {
      return .failure(error)
    }
  }

  @Test func outOfRangeNumbersAreUsageErrors() {
    for bad in ["cache_size=100000000T", "stage_max_file=99999999999G", "staging_size=9223372036854775807K",
      "read_timeout=inf", "read_timeout=1e300", "read_timeout=nan", "metadata_ttl=-1", "read_timeout=0", "uid=99999999999"]
    {
      guard case .failure(let error) = parse(bad) else {
        Issue.record("\(bad) was accepted")
        continue
      }
      #expect(error.description.contains(bad.split(separator: "=")[0]), "\(bad): \(error)")
    }
    #expect((try? parse("cache_size=64M,read_timeout=2.5").get())?.cacheSize == 64 << 20)
  }

  @Test func booleanOptionsTakeWhatMountUsersWrite() throws {
    #expect(try parse("offline").get().offline)
    #expect(try parse("offline=yes").get().offline)
    #expect(try !parse("offline=no").get().offline)
    #expect(try !parse("offline=0").get().offline)
    #expect(try !parse("allow_other=0").get().allowOther)
    #expect(try !parse("allow_other=false").get().allowOther)
    #expect(try parse("allow_other=1").get().allowOther)
    guard case .failure(let error) = parse("offline=maybe") else {
      Issue.record("offline=maybe was accepted")
      return
    }
    #expect(error.description.contains("offline"))
  }

  /// A block of a copy that is still filling, changed on disk after it arrived, is not served:
  /// the copy is dropped and the read goes elsewhere.
  @Test func aPartialCopyDamagedWhileFillingIsNotServed() async throws {
    let client = MemoryObjectClient()
    let size = 3 * Int(PartialCopy.fetchSize)
    let data = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 11) })
    client.put("obj", data)
    let metadata = try await client.metadata(of: "obj")
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("damaged-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: folder) }
    let path = folder.appendingPathComponent("obj.part").path
    let made = PartialCopy(
      name: "obj", metadata: metadata, path: path, client: client, writer: StagingWriter(), log: { _ in }, onEnd: { _, _ in })
    let copy = try #require(made)
    let block = Int64(PartialCopy.blockSize)
    try await copy.wait(offset: 0, end: 4 * block)
    // Served while intact, and equal to the object.
    guard case .buffer(let intact)? = copy.verifiedReply(offset: 10, end: 3 * block) else {
      Issue.record("an intact block was not served")
      return
    }
    #expect(Data(intact.bytes) == data.subdata(in: 10..<Int(3 * block)))
    // A flipped byte in block 1.
    let fd = open(path, O_RDWR)
    var byte: UInt8 = 0
    _ = Foundation.pread(fd, &byte, 1, off_t(block + 100))
    byte ^= 0xFF
    _ = Foundation.pwrite(fd, &byte, 1, off_t(block + 100))
    close(fd)
    #expect(copy.verifiedReply(offset: block, end: 2 * block).map { _ in 1 } == nil)
    #expect(copy.isBroken)
  }

  @Test func stagedDataWithoutAnIndexIsRemoved() throws {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("orphans-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: folder) }
    let first = try StagingArea(folder: folder, bucket: "bk", sizeLimit: 1 << 30, maxFile: 1 << 30, log: { _ in })
    let orphan = first.folder.appendingPathComponent(String(repeating: "a", count: 40) + "-7.data")
    let leftover = first.folder.appendingPathComponent("x.json.tmp-123")
    try Data(count: 1 << 20).write(to: orphan)
    try Data("{".utf8).write(to: leftover)
    _ = try StagingArea(folder: folder, bucket: "bk", sizeLimit: 1 << 30, maxFile: 1 << 30, log: { _ in })
    #expect(!FileManager.default.fileExists(atPath: orphan.path))
    #expect(!FileManager.default.fileExists(atPath: leftover.path))
  }
}
