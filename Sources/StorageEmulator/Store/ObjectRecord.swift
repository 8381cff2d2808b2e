import Foundation

/// One stored object's metadata, as kept in its JSON side file.
struct ObjectRecord: Codable {
  var name: String
  var bucket: String
  var generation: Int64
  var metageneration: Int64
  var size: Int64
  var contentType: String
  /// Empty for a composite object: GCS keeps no MD5 of one.
  var md5Hash: String
  var crc32c: String
  /// How many uploaded objects a composed one was made of (nil for an uploaded object).
  var componentCount: Int? = nil
  /// Milliseconds since the epoch.
  var timeCreated: Int64
  var updated: Int64
  var cacheControl: String?
  var contentDisposition: String?
  var contentEncoding: String?
  var contentLanguage: String?
  var metadata: [String: String]
  var downloadTokens: [String]
  /// File name of the bytes inside the bucket folder.
  var dataFile: String

  var etag: String { md5Hash.isEmpty ? "\"\(crc32c)-\(generation)\"" : "\"\(md5Hash)\"" }

  /// RFC 3339 with exactly three fractional digits, from whole milliseconds. By hand: a list page
  /// formats three per item, and String(format:) was a fifth of the page's cost.
  static func formatTime(_ ms: Int64) -> String {
    var seconds = time_t(ms.dividedRoundingDown(by: 1000))
    var parts = tm()
    gmtime_r(&seconds, &parts)
    var out = [UInt8]()
    out.reserveCapacity(24)
    /// `value` in at least `count` digits, zeros in front.
    func digits(_ value: Int, _ count: Int) {
      let text = Array(String(value).utf8)
      if text.count < count { out += [UInt8](repeating: UInt8(ascii: "0"), count: count - text.count) }
      out += text
    }
    digits(Int(parts.tm_year) + 1900, 4)
    out.append(UInt8(ascii: "-"))
    digits(Int(parts.tm_mon) + 1, 2)
    out.append(UInt8(ascii: "-"))
    digits(Int(parts.tm_mday), 2)
    out.append(UInt8(ascii: "T"))
    digits(Int(parts.tm_hour), 2)
    out.append(UInt8(ascii: ":"))
    digits(Int(parts.tm_min), 2)
    out.append(UInt8(ascii: ":"))
    digits(Int(parts.tm_sec), 2)
    out.append(UInt8(ascii: "."))
    digits(Int(ms - ms.dividedRoundingDown(by: 1000) * 1000), 3)
    out.append(UInt8(ascii: "Z"))
    return String(decoding: out, as: UTF8.self)
  }

  /// The CRC32C as the official emulator writes it in v0 metadata: the uint32 in decimal
  /// (firebase-tools `src/emulator/storage/metadata.ts`, `toFirebaseJson`); GCS writes base64.
  static func decimalCRC(_ base64: String) -> String {
    guard let bytes = Data(base64Encoded: base64), bytes.count == 4 else { return base64 }
    return String(bytes.reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
  }

  /// The Firebase v0 metadata resource.
  func firebaseResource() -> [String: Any] {
    var d: [String: Any] = [
      "name": name, "bucket": bucket, "generation": String(generation),
      "metageneration": String(metageneration), "contentType": contentType,
      "timeCreated": Self.formatTime(timeCreated), "updated": Self.formatTime(updated),
      "storageClass": "STANDARD", "size": String(size), "crc32c": Self.decimalCRC(crc32c),
      "etag": etag, "downloadTokens": downloadTokens.joined(separator: ","),
      "contentEncoding": contentEncoding ?? "identity",
    ]
    if !md5Hash.isEmpty { d["md5Hash"] = md5Hash }
    if let cacheControl { d["cacheControl"] = cacheControl }
    if let contentDisposition { d["contentDisposition"] = contentDisposition }
    if let contentLanguage { d["contentLanguage"] = contentLanguage }
    if !metadata.isEmpty { d["metadata"] = metadata }
    return d
  }

  /// The GCS JSON object resource; links point at `base` (the emulator itself).
  func gcsResource(base: String) -> [String: Any] {
    let encodedName = FirebaseRoutes.encode(name)
    let encodedBucket = FirebaseRoutes.encode(bucket)
    var d: [String: Any] = [
      "kind": "storage#object", "id": "\(bucket)/\(name)/\(generation)",
      "selfLink": "\(base)/storage/v1/b/\(encodedBucket)/o/\(encodedName)",
      "mediaLink": "\(base)/download/storage/v1/b/\(encodedBucket)/o/\(encodedName)?generation=\(generation)&alt=media",
      "name": name, "bucket": bucket, "generation": String(generation), "metageneration": String(metageneration),
      "contentType": contentType, "timeCreated": Self.formatTime(timeCreated), "updated": Self.formatTime(updated),
      "timeStorageClassUpdated": Self.formatTime(timeCreated), "storageClass": "STANDARD", "size": String(size),
      "crc32c": crc32c, "etag": etag,
    ]
    if !md5Hash.isEmpty { d["md5Hash"] = md5Hash }
    if let componentCount { d["componentCount"] = componentCount }
    if let cacheControl { d["cacheControl"] = cacheControl }
    if let contentDisposition { d["contentDisposition"] = contentDisposition }
    if let contentEncoding { d["contentEncoding"] = contentEncoding }
    if let contentLanguage { d["contentLanguage"] = contentLanguage }
    var custom = metadata
    if !downloadTokens.isEmpty { custom["firebaseStorageDownloadTokens"] = downloadTokens.joined(separator: ",") }
    if !custom.isEmpty { d["metadata"] = custom }
    return d
  }

  /// What an update (PUT) starts from: the writable fields as an upload without them leaves them.
  mutating func clearWritableFields() {
    cacheControl = nil
    contentDisposition = nil
    contentEncoding = nil
    contentLanguage = nil
    contentType = "application/octet-stream"
    metadata = [:]
  }

  /// Applies the writable fields of an upload or PATCH body (`null` clears a field).
  mutating func apply(_ json: [String: Any]) {
    func field(_ key: String, _ target: inout String?) {
      guard json.keys.contains(key) else { return }
      target = json[key] as? String
    }
    field("cacheControl", &cacheControl)
    field("contentDisposition", &contentDisposition)
    field("contentEncoding", &contentEncoding)
    field("contentLanguage", &contentLanguage)
    if json.keys.contains("contentType") {
      contentType = json["contentType"] as? String ?? "application/octet-stream"
    }
    if json.keys.contains("metadata") {
      if let custom = json["metadata"] as? [String: Any] {
        for (k, v) in custom {
          if v is NSNull {
            metadata.removeValue(forKey: k)
          } else if let s = v as? String {
            metadata[k] = s
          } else if let n = v as? NSNumber {
            metadata[k] = n.stringValue
          }
        }
      } else {
        metadata = [:]
      }
    }
  }
}

extension Int64 {
  /// The quotient rounded toward minus infinity (a time before 1970 still has 0…999 ms).
  func dividedRoundingDown(by d: Int64) -> Int64 {
    let q = self / d
    return (self % d != 0 && (self < 0) != (d < 0)) ? q - 1 : q
  }
}
