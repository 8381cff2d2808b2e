import Foundation
import StorageCore
import Testing

@testable import BucketFS

/// The CRC32C a close queues without reading the file back: known only while the writes made
/// the whole file in order, and then the same as reading it back.
@Suite struct WrittenChecksumTests {
  private func crc(_ data: Data) -> UInt32 {
    var c = CRC32C()
    data.withUnsafeBytes { c.update($0) }
    return c.value
  }

  private func write(_ sum: inout WrittenChecksum, _ data: Data, at offset: Int64, sizeAfter: Int64) {
    data.withUnsafeBytes { sum.wrote($0, at: offset, sizeAfter: { sizeAfter }) }
  }

  @Test func writesInOrderGiveTheWholeFilesCRC() {
    let data = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
    var sum = WrittenChecksum.unknown
    var at: Int64 = 0
    for piece in stride(from: 0, to: data.count, by: 65_536) {
      let part = data[piece..<min(data.count, piece + 65_536)]
      write(&sum, Data(part), at: at, sizeAfter: at + Int64(part.count))
      at += Int64(part.count)
    }
    #expect(sum.value(forSize: Int64(data.count)) == crc(data))
    // Another size than the writes made: not known.
    #expect(sum.value(forSize: Int64(data.count) + 1) == nil)
  }

  @Test func anyOtherWriteLeavesItUnknown() {
    var sum = WrittenChecksum.unknown
    write(&sum, Data("hello".utf8), at: 0, sizeAfter: 5)
    write(&sum, Data("J".utf8), at: 0, sizeAfter: 5)  // over the start
    #expect(sum.value(forSize: 5) == nil)

    var past = WrittenChecksum.unknown
    write(&past, Data("ab".utf8), at: 0, sizeAfter: 2)
    write(&past, Data("cd".utf8), at: 10, sizeAfter: 12)  // a hole
    #expect(past.value(forSize: 12) == nil)

    // A file that had more bytes than the first write: the rest is not known.
    var longer = WrittenChecksum.unknown
    write(&longer, Data("ab".utf8), at: 0, sizeAfter: 100)
    #expect(longer.value(forSize: 100) == nil)
  }

  @Test func aTruncationToNothingStartsAgain() {
    var sum = WrittenChecksum.unknown
    write(&sum, Data("x".utf8), at: 7, sizeAfter: 8)
    sum.truncated(to: 0)
    write(&sum, Data("new".utf8), at: 0, sizeAfter: 3)
    #expect(sum.value(forSize: 3) == crc(Data("new".utf8)))
    sum.truncated(to: 2)
    #expect(sum.value(forSize: 2) == nil)
    // Overwriting a whole file with as many bytes: they are all of it.
    write(&sum, Data("zz".utf8), at: 0, sizeAfter: 2)
    #expect(sum.value(forSize: 2) == crc(Data("zz".utf8)))
  }
}
