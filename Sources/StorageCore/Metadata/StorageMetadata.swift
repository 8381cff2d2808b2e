import Foundation
import Synchronization

/// An object's metadata, as the SDK's `StorageMetadata`: a class, so `let metadata =
/// StorageMetadata(); metadata.contentType = "image/jpeg"` works as on iOS. Every field sits
/// behind a lock, so one instance may be read and written from several threads (Swift 6 checks
/// it as `Sendable`). An upload copies the caller's instance, so changing it later changes
/// nothing in flight. Fields that the SDK makes read-only (size, generation, hashes, dates) are
/// settable here too, for code that builds metadata by hand.
public final class StorageMetadata: @unchecked Sendable, Equatable, CustomStringConvertible {
  /// Every field of the v0 metadata resource.
  struct Fields: Equatable {
    var bucket: String = ""
    var path: String? = nil
    var size: Int64 = 0
    var generation: Int64 = 0
    var metageneration: Int64 = 0
    var timeCreated: Date? = nil
    var updated: Date? = nil
    var md5Hash: String? = nil
    var crc32c: String? = nil
    var etag: String? = nil
    var storageClass: String? = nil
    var contentType: String? = nil
    var cacheControl: String? = nil
    var contentDisposition: String? = nil
    var contentEncoding: String? = nil
    var contentLanguage: String? = nil
    var customMetadata: [String: String]? = nil
    var downloadTokens: String? = nil
  }

  private let fields: Mutex<Fields>
  /// The fields as the server last sent them: `updateMetadata` sends what changed since, and
  /// `null` for what was removed.
  private let initial: Fields

  init(fields: Fields, initial: Fields) {
    self.fields = Mutex(fields)
    self.initial = initial
  }

  public convenience init() { self.init(fields: Fields(), initial: Fields()) }

  /// Metadata as the server sent it, from its fields (for code that keeps them in a compact form
  /// of its own and makes the object again when asked).
  package convenience init(
    bucket: String, path: String?, size: Int64, generation: Int64, metageneration: Int64, timeCreated: Date?, updated: Date?,
    md5Hash: String?, crc32c: String?, etag: String?, storageClass: String?, contentType: String?, cacheControl: String?,
    contentDisposition: String?, contentEncoding: String?, contentLanguage: String?, customMetadata: [String: String]?,
    downloadTokens: String?
  ) {
    let f = Fields(
      bucket: bucket, path: path, size: size, generation: generation, metageneration: metageneration, timeCreated: timeCreated,
      updated: updated, md5Hash: md5Hash, crc32c: crc32c, etag: etag, storageClass: storageClass, contentType: contentType,
      cacheControl: cacheControl, contentDisposition: contentDisposition, contentEncoding: contentEncoding,
      contentLanguage: contentLanguage, customMetadata: customMetadata, downloadTokens: downloadTokens)
    self.init(fields: f, initial: f)
  }

  private func get<T: Sendable>(_ key: KeyPath<Fields, T> & Sendable) -> T { fields.withLock { $0[keyPath: key] } }
  private func set<T: Sendable>(_ key: WritableKeyPath<Fields, T> & Sendable, _ value: T) {
    fields.withLock { $0[keyPath: key] = value }
  }

  public var bucket: String { get { get(\.bucket) } set { set(\.bucket, newValue) } }
  /// The full object name.
  public var path: String? { get { get(\.path) } set { set(\.path, newValue) } }
  public var size: Int64 { get { get(\.size) } set { set(\.size, newValue) } }
  public var generation: Int64 { get { get(\.generation) } set { set(\.generation, newValue) } }
  public var metageneration: Int64 { get { get(\.metageneration) } set { set(\.metageneration, newValue) } }
  public var timeCreated: Date? { get { get(\.timeCreated) } set { set(\.timeCreated, newValue) } }
  public var updated: Date? { get { get(\.updated) } set { set(\.updated, newValue) } }
  public var md5Hash: String? { get { get(\.md5Hash) } set { set(\.md5Hash, newValue) } }
  public var crc32c: String? { get { get(\.crc32c) } set { set(\.crc32c, newValue) } }
  public var etag: String? { get { get(\.etag) } set { set(\.etag, newValue) } }
  public var storageClass: String? { get { get(\.storageClass) } set { set(\.storageClass, newValue) } }
  public var contentType: String? { get { get(\.contentType) } set { set(\.contentType, newValue) } }
  public var cacheControl: String? { get { get(\.cacheControl) } set { set(\.cacheControl, newValue) } }
  public var contentDisposition: String? { get { get(\.contentDisposition) } set { set(\.contentDisposition, newValue) } }
  public var contentEncoding: String? { get { get(\.contentEncoding) } set { set(\.contentEncoding, newValue) } }
  public var contentLanguage: String? { get { get(\.contentLanguage) } set { set(\.contentLanguage, newValue) } }
  public var customMetadata: [String: String]? { get { get(\.customMetadata) } set { set(\.customMetadata, newValue) } }
  /// Comma-separated download tokens, as the server sends them.
  public var downloadTokens: String? { get { get(\.downloadTokens) } set { set(\.downloadTokens, newValue) } }

  /// The last component of `path`.
  public var name: String? { path.map { $0.slashSegments(omittingEmpty: true).last ?? "" } }

  /// True for an object's metadata (the SDK's `isFile`); metadata made by hand is neither.
  public var isFile: Bool { path.map { !$0.endsWithSlash } ?? false }
  /// True for a folder placeholder (a name ending in `/`).
  public var isFolder: Bool { path?.endsWithSlash ?? false }

  /// The object this metadata describes, through `storage` (nil without a name or bucket).
  public func storageReference(in storage: Storage) -> StorageReference? {
    guard let path, !path.isEmpty, bucket.isEmpty || bucket == storage.bucket else { return nil }
    return storage.reference().object(named: path)
  }

  /// The reference the metadata was fetched or uploaded through, when known (as the SDK's
  /// `storageReference`).
  public var storageReference: StorageReference? { fetchedThrough.withLock { $0 } }
  let fetchedThrough = Mutex<StorageReference?>(nil)

  /// Records the reference this metadata came through; returns self.
  func through(_ reference: StorageReference) -> StorageMetadata {
    fetchedThrough.withLock { $0 = reference }
    return self
  }

  /// An independent copy (the same fields and the same server state).
  public func copy() -> StorageMetadata {
    let clone = StorageMetadata(fields: fields.withLock { $0 }, initial: initial)
    clone.fetchedThrough.withLock { $0 = storageReference }
    return clone
  }

  public static func == (a: StorageMetadata, b: StorageMetadata) -> Bool {
    a === b || a.fields.withLock { $0 } == b.fields.withLock { $0 }
  }

  public var description: String { "StorageMetadata \(dictionaryRepresentation())" }

  /// Decodes the metadata resource; numbers may arrive as strings (v0) or numbers.
  public convenience init(dictionary: [String: Any]) {
    var custom: [String: String]?
    if let given = dictionary["metadata"] as? [String: Any] {
      var map: [String: String] = [:]
      for (k, v) in given {
        if let s = v as? String { map[k] = s } else if let n = v as? NSNumber { map[k] = n.stringValue }
      }
      custom = map
    }
    self.init(
      fields: Self.fields(
        string: { dictionary[$0] as? String },
        number: { key in
          if let s = dictionary[key] as? String { return Int64(s) }
          if let n = dictionary[key] as? NSNumber { return n.int64Value }
          if let n = dictionary[key] as? Int { return Int64(n) }
          return dictionary[key] as? Int64
        }, custom: custom))
  }

  /// A resource read some other way (a list page's items, member by member): `string` and
  /// `number` give a member by its name, `custom` the custom metadata. One mapping of fields
  /// for every reader of the resource.
  package convenience init(string: (String) -> String?, number: (String) -> Int64?, custom: [String: String]?) {
    self.init(fields: Self.fields(string: string, number: number, custom: custom))
  }

  private convenience init(fields f: Fields) { self.init(fields: f, initial: f) }

  /// The fields of a resource, however it was read: `string` and `number` give a member by its
  /// name, `custom` the custom metadata.
  private static func fields(string: (String) -> String?, number: (String) -> Int64?, custom: [String: String]?) -> Fields {
    var f = Fields()
    f.bucket = string("bucket") ?? ""
    f.path = string("name")
    // A size no object can have is none (every consumer adds to it and divides it).
    f.size = min(max(0, number("size") ?? 0), Int64.max / 2)
    f.generation = number("generation") ?? 0
    f.metageneration = number("metageneration") ?? 0
    f.timeCreated = string("timeCreated").flatMap(StorageMetadata.parseDate)
    f.updated = string("updated").flatMap(StorageMetadata.parseDate)
    f.md5Hash = string("md5Hash")
    f.crc32c = string("crc32c")
    f.etag = string("etag")
    f.storageClass = string("storageClass")
    f.contentType = string("contentType")
    f.cacheControl = string("cacheControl")
    f.contentDisposition = string("contentDisposition")
    f.contentEncoding = string("contentEncoding")
    f.contentLanguage = string("contentLanguage")
    if var map = custom {
      // GCS keeps the Firebase download tokens as a custom metadata entry.
      if let tokens = map.removeValue(forKey: "firebaseStorageDownloadTokens") { f.downloadTokens = tokens }
      f.customMetadata = map
    }
    if let tokens = string("downloadTokens") { f.downloadTokens = tokens }
    return f
  }

  public convenience init(data: Data) throws(StorageError) {
    guard let json = try? ExactText.jsonObject(with: data) as? [String: Any] else {
      throw StorageError(code: .unknown, object: "", detail: "the server sent metadata that is not a JSON object")
    }
    self.init(dictionary: json)
  }

  /// The resource with the protocol's field names (what `bucketfs stat --json` prints).
  public func dictionaryRepresentation() -> [String: Any] {
    let f = fields.withLock { $0 }
    var d: [String: Any] = ["bucket": f.bucket]
    if let path = f.path { d["name"] = path }
    d["size"] = String(f.size)
    d["generation"] = String(f.generation)
    d["metageneration"] = String(f.metageneration)
    if let timeCreated = f.timeCreated { d["timeCreated"] = StorageMetadata.formatDate(timeCreated) }
    if let updated = f.updated { d["updated"] = StorageMetadata.formatDate(updated) }
    let optional: [(String, String?)] = [
      ("md5Hash", f.md5Hash), ("crc32c", f.crc32c), ("etag", f.etag), ("storageClass", f.storageClass),
      ("contentType", f.contentType), ("cacheControl", f.cacheControl),
      ("contentDisposition", f.contentDisposition), ("contentEncoding", f.contentEncoding),
      ("contentLanguage", f.contentLanguage), ("downloadTokens", f.downloadTokens),
    ]
    for (k, v) in optional { if let v { d[k] = v } }
    if let customMetadata = f.customMetadata { d["metadata"] = customMetadata }
    return d
  }

  private static func writable(_ f: Fields) -> [(String, String?)] {
    [
      ("contentType", f.contentType), ("cacheControl", f.cacheControl),
      ("contentDisposition", f.contentDisposition), ("contentEncoding", f.contentEncoding),
      ("contentLanguage", f.contentLanguage),
    ]
  }

  /// The writable fields, as an upload body carries them.
  /// Written by hand (`JSONWriter`): every upload sends one.
  func writableJSON(name: String?) -> Data {
    let f = fields.withLock { $0 }
    var json = JSONWriter()
    if let name { json.field("name") { $0.string(name) } }
    for (key, value) in Self.writable(f) { if let value { json.field(key) { $0.string(value) } } }
    if let md5 = f.md5Hash { json.field("md5Hash") { $0.string(md5) } }
    if let custom = f.customMetadata { json.field("metadata") { $0.strings(custom) } }
    return json.finish()
  }

  /// A PATCH body: what changed since the server's state, with `null` for each field and custom
  /// key the caller removed, so that removing works as in the SDK.
  func updateJSON() -> Data {
    let f = fields.withLock { $0 }
    var d: [String: Any] = [:]
    for ((key, now), (_, before)) in zip(Self.writable(f), Self.writable(initial)) {
      if let now {
        if now != before { d[key] = now }
      } else if before != nil {
        d[key] = NSNull()
      }
    }
    var custom: [String: Any] = [:]
    let nowCustom = f.customMetadata ?? [:]
    for (k, v) in nowCustom where initial.customMetadata?[k] != v { custom[k] = v }
    for k in (initial.customMetadata ?? [:]).keys where nowCustom[k] == nil { custom[k] = NSNull() }
    if !custom.isEmpty { d["metadata"] = custom }
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
  package static func parseRFC3339UTC(_ text: String) -> Date? {
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
    // By hand, not `String(format:)` (see `zeroPadded`).
    return (parts.tm_year + 1900).zeroPadded(4) + "-" + (parts.tm_mon + 1).zeroPadded(2) + "-" + parts.tm_mday.zeroPadded(2) + "T"
      + parts.tm_hour.zeroPadded(2) + ":" + parts.tm_min.zeroPadded(2) + ":" + parts.tm_sec.zeroPadded(2) + "."
      + (((ms % 1000) + 1000) % 1000).zeroPadded(3) + "Z"
  }
}
