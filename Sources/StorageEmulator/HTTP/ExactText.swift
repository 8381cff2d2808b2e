import Foundation

// The same as StorageCore's `ExactText` (the emulator depends on no client module).

/// Text decoded byte for byte. Foundation's decoders drop a byte order mark (U+FEFF) that
/// begins a string: `removingPercentEncoding` of "%EF%BB%BFa" is "a", and `JSONSerialization`
/// drops one that begins a string value or key. A name that begins with U+FEFF is another
/// object than the name without it, so every name decoded from a URL or a JSON document goes
/// through here.
enum ExactText {
  /// `%XX` escapes decoded as bytes; nil on a bad escape or bytes that are not UTF-8 (as
  /// `removingPercentEncoding`, which keeps the rest as it is).
  static func percentDecoded(_ text: String) -> String? {
    guard text.utf8.contains(UInt8(ascii: "%")) else { return text }
    var out: [UInt8] = []
    out.reserveCapacity(text.utf8.count)
    var bytes = text.utf8.makeIterator()
    while let b = bytes.next() {
      guard b == UInt8(ascii: "%") else {
        out.append(b)
        continue
      }
      guard let high = bytes.next().flatMap(hexValue), let low = bytes.next().flatMap(hexValue) else { return nil }
      out.append(high << 4 | low)
    }
    return String(validating: out, as: UTF8.self)
  }

  private static func hexValue(_ b: UInt8) -> UInt8? {
    switch b {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): b - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): b - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): b - UInt8(ascii: "A") + 10
    default: nil
    }
  }

  /// `JSONSerialization.jsonObject(with:)`, keeping a U+FEFF that begins a string: each one
  /// after the document's first byte is sent as the escape `\ufeff`, which it keeps. (Outside
  /// a string the mark is not JSON, and the document is refused either way.)
  static func jsonObject(with data: Data) throws -> Any {
    try JSONSerialization.jsonObject(with: escapingMarks(data))
  }

  static func escapingMarks(_ data: Data) -> Data {
    let mark: [UInt8] = [0xEF, 0xBB, 0xBF]
    guard data.count > 3, let first = data.dropFirst().firstRange(of: mark) else { return data }
    var out = Data(data[..<first.lowerBound])
    var rest = data[first.lowerBound...]
    while let next = rest.firstRange(of: mark) {
      out.append(rest[..<next.lowerBound])
      out.append(contentsOf: Array("\\ufeff".utf8))
      rest = rest[next.upperBound...]
    }
    out.append(rest)
    return out
  }
}

extension String {
  /// `removingPercentEncoding`, byte for byte (it drops a leading U+FEFF).
  var exactPercentDecoded: String? { ExactText.percentDecoded(self) }
}
