import Foundation

/// A file time exactly as the kernel gives it: whole seconds since 1970 and nanoseconds. A
/// `Double` of seconds cannot hold it (about a quarter of a microsecond apart near now), so
/// times within that of each other, or of the next second, would come back changed and tools
/// that compare them (rsync -a, make) would see a change that was not made.
package struct Timestamp: Hashable, Comparable, Sendable, CustomStringConvertible {
  package let seconds: Int64
  /// 0..<1_000_000_000.
  package let nanoseconds: Int32

  package init(seconds: Int64, nanoseconds: Int64 = 0) {
    // Normalized: a negative or overlong fraction moves whole seconds.
    let carry = nanoseconds >= 0 ? nanoseconds / 1_000_000_000 : (nanoseconds - 999_999_999) / 1_000_000_000
    self.seconds = seconds &+ carry
    self.nanoseconds = Int32(nanoseconds - carry * 1_000_000_000)
  }

  /// A time known only as seconds (an object's `updated`, a clock): to the nanosecond nearest,
  /// never rounded into the next second; 0 for one that is no time.
  package init(_ interval: Double) {
    guard interval.isFinite, abs(interval) < 1e15 else {
      self.init(seconds: 0)
      return
    }
    let whole = interval.rounded(.down)
    self.init(seconds: Int64(whole), nanoseconds: min(Int64(((interval - whole) * 1e9).rounded()), 999_999_999))
  }

  package init(_ date: Date) { self.init(date.timeIntervalSince1970) }

  package init(_ ts: timespec) { self.init(seconds: Int64(ts.tv_sec), nanoseconds: Int64(ts.tv_nsec)) }

  package static func now() -> Timestamp {
    var ts = Glibc.timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return Timestamp(ts)
  }

  package var timespec: timespec { Glibc.timespec(tv_sec: Int(seconds), tv_nsec: Int(nanoseconds)) }

  /// Seconds as a `Double`, for what needs no more (ages, ordering by the second).
  package var interval: Double { Double(seconds) + Double(nanoseconds) / 1e9 }

  package static func < (a: Timestamp, b: Timestamp) -> Bool { (a.seconds, a.nanoseconds) < (b.seconds, b.nanoseconds) }

  package var description: String { "\(seconds).\(nanoseconds.zeroPadded(9))" }
}

/// Whole seconds and seconds as literals (`mtime: 1`, `1_612_325_106.5`), as the kernel's
/// `touch -d @N` writes them.
extension Timestamp: ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral {
  package init(integerLiteral value: Int64) { self.init(seconds: value) }
  package init(floatLiteral value: Double) { self.init(value) }
}
