import Foundation

/// An object's name as a bucket holds it: its UTF-8 bytes, compared, hashed and sorted as bytes.
///
/// A bucket's names are bytes, and two names are one object only when their bytes are the same.
/// Swift's `String` compares and hashes by canonical equivalence: NFC "café" (63 61 66 c3 a9) and
/// NFD "café" (63 61 66 65 cc 81) are `==` and hash alike, so a dictionary or set keyed by
/// `String` takes two objects for one, and `<` sorts them apart from the bucket's order. Anything
/// keyed by a name that stands for an object, a folder or a prefix is keyed by this instead.
package struct ObjectName: Hashable, Comparable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
  package let string: String

  package init(_ string: String) { self.string = string }

  package init(stringLiteral value: String) { string = value }

  package static func == (a: ObjectName, b: ObjectName) -> Bool { sameBytes(a.string, b.string) }

  package func hash(into hasher: inout Hasher) {
    // A native string's bytes in place (as fast as `String`'s own hash); a bridged one copied.
    if string.utf8.withContiguousStorageIfAvailable({ hasher.combine(bytes: UnsafeRawBufferPointer($0)) }) == nil {
      var s = string
      s.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }
  }

  /// Byte order: the order in which GCS lists names.
  package static func < (a: ObjectName, b: ObjectName) -> Bool { a.string.utf8.lexicographicallyPrecedes(b.string.utf8) }

  package var description: String { string }

  /// True when `a` and `b` are the same bytes (`==` on strings is canonical equivalence).
  package static func sameBytes(_ a: String, _ b: String) -> Bool {
    let n = a.utf8.count
    guard n == b.utf8.count else { return false }
    let inPlace = a.utf8.withContiguousStorageIfAvailable { x in
      b.utf8.withContiguousStorageIfAvailable { y in n == 0 || memcmp(x.baseAddress!, y.baseAddress!, n) == 0 }
    }
    // Both native (contiguous) almost always; `memcmp` there, as `String ==` is fast for ASCII.
    if let inPlace, let same = inPlace { return same }
    return a.utf8.elementsEqual(b.utf8)
  }
}

extension Sequence<String> {
  /// The names in byte order (the bucket's), not `String`'s canonical order.
  package func sortedAsBytes() -> [String] { sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) } }
}

extension String {
  /// Whether these bytes begin with `prefix`'s (`hasPrefix` compares canonically: NFD
  /// "cafe\u{301}/x" has the prefix NFC "café").
  package func hasBytePrefix(_ prefix: String) -> Bool { utf8.starts(with: prefix.utf8) }

  /// What follows the first `count` bytes (a cut after a prefix of whole characters).
  package func droppingBytes(_ count: Int) -> String { String(decoding: utf8.dropFirst(count), as: UTF8.self) }

  /// Whether the string's UTF-8 bytes end with `suffix`'s.
  package func hasByteSuffix(_ suffix: String) -> Bool { utf8.count >= suffix.utf8.count && utf8.suffix(suffix.utf8.count).elementsEqual(suffix.utf8) }

  /// What follows `prefix`'s bytes, or nil when these bytes do not begin with them.
  /// (`dropFirst(prefix.count)` counts `Character`s: "g/" + U+0301 is two of them, not three.)
  package func afterBytePrefix(_ prefix: String) -> String? { hasBytePrefix(prefix) ? droppingBytes(prefix.utf8.count) : nil }

  /// These bytes without the last `count` (a cut before a suffix of whole characters).
  package func droppingLastBytes(_ count: Int) -> String { String(decoding: utf8.dropLast(count), as: UTF8.self) }

  /// Whether the last byte is "/" (`hasSuffix("/")` is false for "g" U+0600 "/": a prepended
  /// concatenation mark and the slash after it are one `Character`).
  package var endsWithSlash: Bool { utf8.last == UInt8(ascii: "/") }

  /// Without its last byte when that is "/" (a folder's placeholder name to the folder's).
  package var withoutTrailingSlash: String { endsWithSlash ? droppingLastBytes(1) : self }

  /// The parts between "/" bytes. `split(separator: "/")` cuts at `Character`s, and a "/"
  /// followed by a combining mark (U+0301, ZWJ, a variation selector) is one, not a "/".
  package func slashSegments(omittingEmpty: Bool = false) -> [String] {
    utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: omittingEmpty).map { String(decoding: $0, as: UTF8.self) }
  }

  /// What follows the last "/" byte (all of it when there is none).
  package var lastSlashSegment: String {
    guard let slash = utf8.lastIndex(of: UInt8(ascii: "/")) else { return self }
    return String(decoding: utf8[utf8.index(after: slash)...], as: UTF8.self)
  }
}

