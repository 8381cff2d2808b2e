import Foundation
import StorageCore
import Synchronization

/// An object's metadata as a listing keeps it: numbers as integers, the MD5 as its 16 bytes,
/// the content type shared with every other object of that type, and the fields most objects
/// lack (custom metadata, download tokens, cache control, disposition, language) in a box only
/// objects that have them carry. A `StorageMetadata` is a locked class of ~18 fields kept twice
/// (as sent and as changed): ~800 bytes an object with its strings, where this is ~150, and
/// nothing on the heap for a plain object of a short name. The etag is not kept: nothing in the
/// mount reads it, and each object's is its own string.
package struct ObjectSummary: Sendable {
  /// The object's name in the bucket.
  package var path: String?
  package var size: Int64
  package var generation: Int64
  package var metageneration: Int64
  /// Seconds since 1970 as `Date` keeps them; NaN for none.
  private var created: Double
  private var changed: Double
  private var md5: MD5?
  private var crc: UInt32
  private var hasCRC: Bool
  /// Indexes into the table of shared strings; 0 for none.
  private var bucketIndex: UInt16
  private var contentTypeIndex: UInt16
  private var storageClassIndex: UInt16
  private var contentEncodingIndex: UInt16
  private var rare: Rare?

  private struct MD5: Sendable {
    var high: UInt64
    var low: UInt64
  }

  /// What few objects have; one shared box, so a copy of a summary copies a reference.
  private final class Rare: Sendable {
    let md5Text: String?
    let crcText: String?
    let cacheControl: String?
    let contentDisposition: String?
    let contentLanguage: String?
    let customMetadata: [String: String]?
    let downloadTokens: String?
    /// Strings the shared table had no room for.
    let bucket: String?
    let contentType: String?
    let storageClass: String?
    let contentEncoding: String?

    init(
      md5Text: String?, crcText: String?, cacheControl: String?, contentDisposition: String?, contentLanguage: String?,
      customMetadata: [String: String]?, downloadTokens: String?, bucket: String?, contentType: String?, storageClass: String?,
      contentEncoding: String?
    ) {
      self.md5Text = md5Text
      self.crcText = crcText
      self.cacheControl = cacheControl
      self.contentDisposition = contentDisposition
      self.contentLanguage = contentLanguage
      self.customMetadata = customMetadata
      self.downloadTokens = downloadTokens
      self.bucket = bucket
      self.contentType = contentType
      self.storageClass = storageClass
      self.contentEncoding = contentEncoding
    }
  }

  /// `m`'s fields; `path`, when given, is a string equal to the object's name to share.
  package init(_ m: StorageMetadata, path shared: String? = nil) {
    let path = m.path
    self.path = shared.flatMap { s in path.map { Namespace.sameBytes($0, s) } == true ? s : nil } ?? path
    size = m.size
    generation = m.generation
    metageneration = m.metageneration
    created = m.timeCreated?.timeIntervalSinceReferenceDate ?? .nan
    changed = m.updated?.timeIntervalSinceReferenceDate ?? .nan
    var overflow: (bucket: String?, type: String?, storageClass: String?, encoding: String?) = (nil, nil, nil, nil)
    bucketIndex = Self.index(of: m.bucket, overflow: &overflow.bucket)
    contentTypeIndex = m.contentType.map { Self.index(of: $0, overflow: &overflow.type) } ?? 0
    storageClassIndex = m.storageClass.map { Self.index(of: $0, overflow: &overflow.storageClass) } ?? 0
    contentEncodingIndex = m.contentEncoding.map { Self.index(of: $0, overflow: &overflow.encoding) } ?? 0
    var md5Text: String?
    if let text = m.md5Hash {
      if let bytes = Data(base64Encoded: text), bytes.count == 16, bytes.base64EncodedString() == text {
        md5 = MD5(
          high: bytes.prefix(8).reduce(0) { $0 << 8 | UInt64($1) }, low: bytes.suffix(8).reduce(0) { $0 << 8 | UInt64($1) })
      } else {
        md5Text = text
      }
    }
    var crcText: String?
    crc = 0
    hasCRC = false
    if let text = m.crc32c {
      if let bytes = Data(base64Encoded: text), bytes.count == 4, bytes.base64EncodedString() == text {
        crc = bytes.reduce(0) { $0 << 8 | UInt32($1) }
        hasCRC = true
      } else {
        crcText = text
      }
    }
    let custom = m.customMetadata
    let (cacheControl, disposition, language, tokens) = (m.cacheControl, m.contentDisposition, m.contentLanguage, m.downloadTokens)
    if md5Text != nil || crcText != nil || cacheControl != nil || disposition != nil || language != nil || custom != nil
      || tokens != nil || overflow.bucket != nil || overflow.type != nil || overflow.storageClass != nil || overflow.encoding != nil
    {
      rare = Rare(
        md5Text: md5Text, crcText: crcText, cacheControl: cacheControl, contentDisposition: disposition, contentLanguage: language,
        customMetadata: custom, downloadTokens: tokens, bucket: overflow.bucket, contentType: overflow.type,
        storageClass: overflow.storageClass, contentEncoding: overflow.encoding)
    }
  }

  package var timeCreated: Date? { created.isNaN ? nil : Date(timeIntervalSinceReferenceDate: created) }
  package var updated: Date? { changed.isNaN ? nil : Date(timeIntervalSinceReferenceDate: changed) }
  package var bucket: String { Self.string(at: bucketIndex) ?? rare?.bucket ?? "" }
  package var contentType: String? { Self.string(at: contentTypeIndex) ?? rare?.contentType }
  package var storageClass: String? { Self.string(at: storageClassIndex) ?? rare?.storageClass }
  package var contentEncoding: String? { Self.string(at: contentEncodingIndex) ?? rare?.contentEncoding }

  package var crc32c: String? {
    guard hasCRC else { return rare?.crcText }
    return Data([UInt8(crc >> 24), UInt8(crc >> 16 & 0xFF), UInt8(crc >> 8 & 0xFF), UInt8(crc & 0xFF)]).base64EncodedString()
  }

  /// The metadata again, as a `StorageMetadata` (a new instance each time).
  package var metadata: StorageMetadata {
    StorageMetadata(
      bucket: bucket, path: path, size: size, generation: generation, metageneration: metageneration, timeCreated: timeCreated,
      updated: updated, md5Hash: md5Hash, crc32c: crc32c, etag: nil, storageClass: storageClass, contentType: contentType,
      cacheControl: rare?.cacheControl, contentDisposition: rare?.contentDisposition, contentEncoding: contentEncoding,
      contentLanguage: rare?.contentLanguage, customMetadata: rare?.customMetadata, downloadTokens: rare?.downloadTokens)
  }

  package var md5Hash: String? {
    guard let md5 else { return rare?.md5Text }
    var bytes = [UInt8](repeating: 0, count: 16)
    for i in 0..<8 {
      bytes[i] = UInt8(truncatingIfNeeded: md5.high >> (56 - 8 * UInt64(i)))
      bytes[8 + i] = UInt8(truncatingIfNeeded: md5.low >> (56 - 8 * UInt64(i)))
    }
    return Data(bytes).base64EncodedString()
  }

  package var customMetadata: [String: String]? { rare?.customMetadata }

  /// Roughly what one summary holds on the heap beyond its own size (a name over 15 bytes of
  /// UTF-8 is an allocation of its own; the shared strings are not counted).
  package var heapBytes: Int {
    var n = 0
    if let path, path.utf8.count > 15 { n += 32 + path.utf8.count }
    if let rare {
      n += 96
      for (k, v) in rare.customMetadata ?? [:] { n += 48 + k.utf8.count + v.utf8.count }
      n += rare.downloadTokens?.utf8.count ?? 0
    }
    return n
  }

  /// Strings many objects share (buckets, content types, storage classes, encodings), each
  /// kept once and named by a number. Bounded: past 65,535 distinct strings, new ones go in the
  /// object's own box.
  private struct Table {
    var strings: [String] = [""]
    var numbers: [String: UInt16] = [:]
  }

  private static let table = Mutex(Table())

  private static func index(of s: String, overflow: inout String?) -> UInt16 {
    table.withLock { t in
      if let n = t.numbers[s], Namespace.sameBytes(t.strings[Int(n)], s) { return n }
      guard t.numbers[s] == nil, t.strings.count <= Int(UInt16.max) else {
        overflow = s
        return 0
      }
      let n = UInt16(t.strings.count)
      t.strings.append(s)
      t.numbers[s] = n
      return n
    }
  }

  private static func string(at n: UInt16) -> String? {
    n == 0 ? nil : table.withLock { $0.strings[Int(n)] }
  }
}
