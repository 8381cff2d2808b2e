// A file's time as bucketfs keeps it in custom metadata (`mtime`, as rclone writes it): RFC 3339
// with nanoseconds, read back with any number of fractional digits (rclone and gcsfuse write
// nanoseconds too).
import Foundation
import StorageCore

enum KeptTime {
  /// RFC 3339 with nine fractional digits, in UTC: the time exactly.
  static func format(_ time: Timestamp) -> String {
    // RFC 3339 has four-digit years; a time set past them (touch -d @9223372036854775807) is
    // kept as the nearest one it can write, never a crash on the conversion.
    let lowest: Int64 = -62_135_596_800
    let highest: Int64 = 253_402_300_799
    let clamped = time.seconds < lowest ? Timestamp(seconds: lowest) : time.seconds > highest ? Timestamp(seconds: highest, nanoseconds: 999_999_999) : time
    var t = time_t(clamped.seconds)
    var parts = tm()
    gmtime_r(&t, &parts)
    return (parts.tm_year + 1900).zeroPadded(4) + "-" + (parts.tm_mon + 1).zeroPadded(2) + "-" + parts.tm_mday.zeroPadded(2) + "T"
      + parts.tm_hour.zeroPadded(2) + ":" + parts.tm_min.zeroPadded(2) + ":" + parts.tm_sec.zeroPadded(2) + "."
      + clamped.nanoseconds.zeroPadded(9) + "Z"
  }

  /// The time a writer kept in custom metadata: ours and rclone's `mtime`, gcsfuse's
  /// `gcsfuse_mtime` (Google's tools' whole seconds are `PosixAttributes.mtime`).
  static func kept(in custom: [String: String]?) -> Timestamp? {
    guard let custom else { return nil }
    return (custom["mtime"] ?? custom["gcsfuse_mtime"]).flatMap(parse)
  }

  /// RFC 3339 with any number of fractional digits (rclone and gcsfuse write nanoseconds, which
  /// ISO8601DateFormatter cannot read), to the nanosecond: the whole seconds by the parser, the
  /// fraction from its digits (never through a `Double`).
  static func parse(_ text: String) -> Timestamp? {
    let dot = text.firstIndex(of: ".")
    let zone = text[(dot ?? text.startIndex)...].lastIndex(where: { $0 == "Z" || $0 == "+" || $0 == "-" })
    var nanos: Int64 = 0
    var wholeText = text
    if let dot, let zone, zone > dot {
      let digits = text[text.index(after: dot)..<zone]
      guard !digits.isEmpty, digits.allSatisfy(\.isASCII), digits.allSatisfy(\.isNumber) else { return nil }
      // The first nine digits are nanoseconds; more are below what a file time holds.
      let nine = String(digits.prefix(9)).padding(toLength: 9, withPad: "0", startingAt: 0)
      guard let n = Int64(nine) else { return nil }
      nanos = n
      wholeText = String(text[..<dot]) + String(text[zone...])
    }
    // `YYYY-MM-DDTHH:MM:SSZ`, what bucketfs, rclone and gcsfuse write, by hand: every attribute
    // of a file with a kept time reads it, and a formatter per call dominated that.
    if let fast = StorageMetadata.parseRFC3339UTC(wholeText) {
      return Timestamp(seconds: Int64(fast.timeIntervalSince1970.rounded()), nanoseconds: nanos)
    }
    let f = ISO8601DateFormatter()
    f.formatOptions = [.withInternetDateTime]
    guard let whole = f.date(from: wholeText) else { return nil }
    return Timestamp(seconds: Int64(whole.timeIntervalSince1970.rounded()), nanoseconds: nanos)
  }
}
