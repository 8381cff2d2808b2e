// A file's time as bucketfs keeps it in custom metadata (`mtime`, as rclone writes it): RFC 3339
// with nanoseconds, read back with any number of fractional digits (rclone and gcsfuse write
// nanoseconds too).
import Foundation

enum KeptTime {
  /// RFC 3339 with nine fractional digits, in UTC.
  static func format(_ seconds: Double) -> String {
    // RFC 3339 has four-digit years; a time set past them (touch -d @9223372036854775807) is
    // kept as the nearest one it can write, never a crash on the conversion.
    let seconds = seconds.isFinite ? min(max(seconds, -62_135_596_800), 253_402_300_799) : 0
    let whole = Int(seconds.rounded(.down))
    // Never rounded into the next second (ten digits, or another whole second).
    let nanos = min(Int(((seconds - Double(whole)) * 1e9).rounded()), 999_999_999)
    var t = time_t(whole)
    var parts = tm()
    gmtime_r(&t, &parts)
    return String(
      format: "%04d-%02d-%02dT%02d:%02d:%02d.%09dZ", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday, parts.tm_hour,
      parts.tm_min, parts.tm_sec, nanos)
  }

  /// The time a writer kept in custom metadata: ours and rclone's `mtime`, gcsfuse's
  /// `gcsfuse_mtime` (Google's tools' whole seconds are `PosixAttributes.mtime`).
  static func kept(in custom: [String: String]?) -> Double? {
    guard let custom else { return nil }
    return (custom["mtime"] ?? custom["gcsfuse_mtime"]).flatMap(parse)
  }

  /// RFC 3339 with any number of fractional digits (rclone and gcsfuse write nanoseconds, which
  /// ISO8601DateFormatter cannot read): the whole seconds by the formatter, the fraction added.
  static func parse(_ text: String) -> Double? {
    if let fast = parseUTC(text) { return fast }
    let f = ISO8601DateFormatter()
    f.formatOptions = [.withInternetDateTime]
    guard let dot = text.firstIndex(of: ".") else { return f.date(from: text)?.timeIntervalSince1970 }
    guard let zone = text[dot...].firstIndex(where: { $0 == "Z" || $0 == "+" || $0 == "-" }),
      let whole = f.date(from: String(text[..<dot]) + String(text[zone...])), let fraction = Double("0" + text[dot..<zone])
    else { return nil }
    return whole.timeIntervalSince1970 + fraction
  }

  /// `YYYY-MM-DDTHH:MM:SS[.digits]Z`, what bucketfs, rclone and gcsfuse write, by hand: every
  /// attribute of a file with a kept time reads it, and the formatter dominated that cost.
  private static func parseUTC(_ text: String) -> Double? {
    let b = Array(text.utf8)
    guard b.count >= 20, b.last == UInt8(ascii: "Z"), b[4] == 45, b[7] == 45, b[10] == 84, b[13] == 58, b[16] == 58 else { return nil }
    func number(_ from: Int, _ count: Int) -> Int? {
      var n = 0
      for i in from..<(from + count) {
        let d = Int(b[i]) - 48
        guard d >= 0 && d <= 9 else { return nil }
        n = n * 10 + d
      }
      return n
    }
    guard let year = number(0, 4), let month = number(5, 2), let day = number(8, 2), let hour = number(11, 2),
      let minute = number(14, 2), let second = number(17, 2), (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60,
      second < 61
    else { return nil }
    var fraction = 0.0
    if b.count > 20 {
      guard b[19] == 46, b.count > 21, let digits = number(20, min(b.count - 21, 9)) else { return nil }
      // Past nine digits nothing is kept (a nanosecond is the finest a file's time holds).
      for i in 20..<(b.count - 1) where !(48...57).contains(b[i]) { return nil }
      fraction = Double(digits) / pow(10, Double(min(b.count - 21, 9)))
    } else if b.count != 20 {
      return nil
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = month <= 2 ? year - 1 : year
    let era = (y >= 0 ? y : y - 399) / 400
    let yoe = y - era * 400
    let doy = (153 * ((month + 9) % 12) + 2) / 5 + day - 1
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468
    return Double(days * 86_400 + hour * 3_600 + minute * 60 + second) + fraction
  }
}
