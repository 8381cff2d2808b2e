@testable import BucketFS
import Foundation
import StorageCore
import Testing

/// Queue file names and kept times are written without `String(format:)`: the same text as
/// printf's `%0*d` for every sign, width and size.
@Suite struct ZeroPaddedTests {
  @Test func matchesPrintf() {
    for n in [-12345, -1, 0, 1, 7, 42, 999, 1000, 123_456_789, Int(Int32.max), Int(Int32.min)] {
      for width in [0, 1, 2, 3, 4, 9, 12] {
        #expect(n.zeroPadded(width) == String(format: "%0\(width)d", n), "\(n) in \(width)")
      }
    }
    #expect(UInt64(42).zeroPadded(12) == String(format: "%012llu", UInt64(42)))
    #expect(UInt64.max.zeroPadded(12) == String(format: "%012llu", UInt64.max))
  }

  @Test func keptTimesAndQueueNamesAreAsBefore() {
    #expect(KeptTime.format(Timestamp(seconds: 1_700_000_000, nanoseconds: 5)) == "2023-11-14T22:13:20.000000005Z")
    #expect(KeptTime.format(Timestamp(seconds: 0)) == "1970-01-01T00:00:00.000000000Z")
    #expect(StorageMetadata.formatDate(Date(timeIntervalSince1970: 1_700_000_000.673)) == "2023-11-14T22:13:20.673Z")
  }
}
