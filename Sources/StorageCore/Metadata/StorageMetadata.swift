import Foundation

/// An object's metadata: every field of the v0 metadata resource. A value type (the SDK's is a
/// class) so that it crosses threads freely under strict concurrency.
public struct StorageMetadata: Sendable, Equatable {
  public var bucket: String = ""
  /// The full object name.
  public var path: String? = nil
  public var size: Int64 = 0
  public var generation: Int64 = 0
  public var metageneration: Int64 = 0
  public var timeCreated: Date? = nil
  public var updated: Date? = nil
  public var md5Hash: String? = nil
  public var crc32c: String? = nil
  public var etag: String? = nil
  public var storageClass: String? = nil
  public var contentType: String? = nil
  public var cacheControl: String? = nil
  public var contentDisposition: String? = nil
  public var contentEncoding: String? = nil
  public var contentLanguage: String? = nil
  public var customMetadata: [String: String]? = nil
  /// Comma-separated download tokens, as the server sends them.
  public var downloadTokens: String? = nil

  public init() {}

  /// The last component of `path`.
  public var name: String? { path.map { String($0.split(separator: "/").last ?? "") } }

  /// Decodes the metadata resource; numbers may arrive as strings (v0) or numbers.
  public init(dictionary: [String: Any]) {
    func string(_ key: String) -> String? { dictionary[key] as? String }
    func int(_ key: String) -> Int64 {
      if let s = dictionary[key] as? String { return Int64(s) ?? 0 }
      if let n = dictionary[key] as? NSNumber { return n.int64Value }
      return 0
    }
    bucket = string("bucket") ?? ""
    path = string("name")
    size = int("size")
    generation = int("generation")
    metageneration = int("metageneration")
    timeCreated = string("timeCreated").flatMap(StorageMetadata.parseDate)
    updated = string("updated").flatMap(StorageMetadata.parseDate)
    md5Hash = string("md5Hash")
    crc32c = string("crc32c")
    etag = string("etag")
    storageClass = string("storageClass")
    contentType = string("contentType")
    cacheControl = string("cacheControl")
    contentDisposition = string("contentDisposition")
    contentEncoding = string("contentEncoding")
    contentLanguage = string("contentLanguage")
    if let custom = dictionary["metadata"] as? [String: Any] {
      var map: [String: String] = [:]
      for (k, v) in custom {
        if let s = v as? String { map[k] = s } else if let n = v as? NSNumber { map[k] = n.stringValue }
      }
      // GCS keeps the Firebase download tokens as a custom metadata entry.
      if let tokens = map.removeValue(forKey: "firebaseStorageDownloadTokens"), downloadTokens == nil {
        downloadTokens = tokens
      }
      customMetadata = map
    }
    if let tokens = string("downloadTokens") { downloadTokens = tokens }
  }

  public init(data: Data) throws(StorageError) {
    guard let json = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
      throw StorageError(code: .unknown, object: "", detail: "the server sent metadata that is not a JSON object")
    }
    self.init(dictionary: json)
  }

  /// The resource with the protocol's field names (what `bucketfs stat --json` prints).
  public func dictionaryRepresentation() -> [String: Any] {
    var d: [String: Any] = ["bucket": bucket]
    if let path { d["name"] = path }
    d["size"] = String(size)
    d["generation"] = String(generation)
    d["metageneration"] = String(metageneration)
    if let timeCreated { d["timeCreated"] = StorageMetadata.formatDate(timeCreated) }
    if let updated { d["updated"] = StorageMetadata.formatDate(updated) }
    let optional: [(String, String?)] = [
      ("md5Hash", md5Hash), ("crc32c", crc32c), ("etag", etag), ("storageClass", storageClass),
      ("contentType", contentType), ("cacheControl", cacheControl),
      ("contentDisposition", contentDisposition), ("contentEncoding", contentEncoding),
      ("contentLanguage", contentLanguage), ("downloadTokens", downloadTokens),
    ]
    for (k, v) in optional { if let v { d[k] = v } }
    if let customMetadata { d["metadata"] = customMetadata }
    return d
  }

  /// The writable fields, as an upload or PATCH body carries them.
  func writableJSON(name: String?) -> Data {
    var d: [String: Any] = [:]
    if let name { d["name"] = name }
    let fields: [(String, String?)] = [
      ("contentType", contentType), ("cacheControl", cacheControl),
      ("contentDisposition", contentDisposition), ("contentEncoding", contentEncoding),
      ("contentLanguage", contentLanguage), ("md5Hash", md5Hash),
    ]
    for (k, v) in fields { if let v { d[k] = v } }
    if let customMetadata { d["metadata"] = customMetadata }
    return (try? JSONSerialization.data(withJSONObject: d, options: [.sortedKeys])) ?? Data("{}".utf8)
  }

  static func parseDate(_ text: String) -> Date? {
    if let fast = parseRFC3339UTC(text) { return fast }
    let withFraction = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
    if let d = try? withFraction.parse(text) { return d }
    return try? Date.ISO8601FormatStyle().parse(text)
  }

  /// `YYYY-MM-DDTHH:MM:SS[.fff…]Z`, the shape every server here writes, parsed by hand: a GCS
  /// listing page carries two timestamps per object, and Foundation's parser dominated its cost.
  static func parseRFC3339UTC(_ text: String) -> Date? {
    let b = Array(text.utf8)
    guard b.count >= 20, b.last == UInt8(ascii: "Z"), b[4] == 45, b[7] == 45, b[10] == 84, b[13] == 58, b[16] == 58 else {
      return nil
    }
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
      let minute = number(14, 2), let second = number(17, 2), (1...12).contains(month), (1...31).contains(day)
    else { return nil }
    var fraction = 0.0
    if b.count > 20 {
      guard b[19] == 46 else { return nil }
      var scale = 0.1
      for i in 20..<(b.count - 1) {
        let d = Int(b[i]) - 48
        guard d >= 0 && d <= 9 else { return nil }
        fraction += Double(d) * scale
        scale /= 10
      }
    } else if b.count != 20 {
      return nil
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = month <= 2 ? year - 1 : year
    let era = (y >= 0 ? y : y - 399) / 400
    let yoe = y - era * 400
    let mp = (month + 9) % 12
    let doy = (153 * mp + 2) / 5 + day - 1
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
    let days = era * 146_097 + doe - 719_468
    let seconds = Double(days * 86_400 + hour * 3_600 + minute * 60 + second) + fraction
    return Date(timeIntervalSince1970: seconds)
  }

  /// RFC 3339 UTC with exactly three fractional digits, as the server writes it.
  public static func formatDate(_ date: Date) -> String {
    // Formatted by hand from whole milliseconds: Date's binary fraction would print .673 as .672.
    let ms = Int64((date.timeIntervalSince1970 * 1000).rounded())
    var seconds = time_t(ms >= 0 ? ms / 1000 : (ms - 999) / 1000)
    var parts = tm()
    gmtime_r(&seconds, &parts)
    return String(
      format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
      parts.tm_hour, parts.tm_min, parts.tm_sec, Int32(((ms % 1000) + 1000) % 1000))
  }
}
