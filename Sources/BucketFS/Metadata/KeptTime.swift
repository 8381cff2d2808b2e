// A file's time as bucketfs keeps it in custom metadata (`mtime`, as rclone writes it): RFC 3339
// with nanoseconds, read back with any number of fractional digits (rclone and gcsfuse write
// nanoseconds too).
import Foundation
import StorageCore

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
    // `YYYY-MM-DDTHH:MM:SS[.digits]Z`, what bucketfs, rclone and gcsfuse write, by hand: every
    // attribute of a file with a kept time reads it, and a formatter per call dominated that.
    if let fast = StorageMetadata.parseRFC3339UTC(text) { return fast.timeIntervalSince1970 }
    let f = ISO8601DateFormatter()
    f.formatOptions = [.withInternetDateTime]
    guard let dot = text.firstIndex(of: ".") else { return f.date(from: text)?.timeIntervalSince1970 }
    guard let zone = text[dot...].firstIndex(where: { $0 == "Z" || $0 == "+" || $0 == "-" }),
      let whole = f.date(from: String(text[..<dot]) + String(text[zone...])), let fraction = Double("0" + text[dot..<zone])
    else { return nil }
    return whole.timeIntervalSince1970 + fraction
  }
}
