import Foundation

/// A JSON document read in one pass over its bytes. A list page of 1,000 objects is ~650 KB;
/// Foundation's readers took ~20 ms a page for it (two of them: one to see which API answered,
/// one to read it), a third of what `ls -l` of a large folder cost beyond the server's own time.
/// Objects keep their members in order as pairs: an object resource has ~15, and a look along
/// them is cheaper than hashing each key into a dictionary.
package enum JSONValue: Sendable {
  case object([(String, JSONValue)])
  case array([JSONValue])
  case string(String)
  /// The number as written (object sizes and generations arrive as strings or as numbers).
  case number(String)
  case bool(Bool)
  case null

  package subscript(_ key: String) -> JSONValue? {
    guard case .object(let members) = self else { return nil }
    for (k, v) in members where k == key { return v }
    return nil
  }

  package var string: String? {
    if case .string(let s) = self { return s }
    return nil
  }

  /// A string or a number, as text (custom metadata values may be either).
  package var text: String? {
    switch self {
    case .string(let s), .number(let s): return s
    case .bool(let b): return b ? "true" : "false"
    default: return nil
    }
  }

  package var array: [JSONValue]? {
    if case .array(let a) = self { return a }
    return nil
  }

  package var members: [(String, JSONValue)]? {
    if case .object(let m) = self { return m }
    return nil
  }

  /// The document in `data`, or nil when it is not JSON (or nests deeper than 64 levels).
  package static func read(_ data: Data) -> JSONValue? {
    data.withUnsafeBytes { raw -> JSONValue? in
      var reader = JSONReader(bytes: raw.bindMemory(to: UInt8.self))
      guard let value = reader.value(depth: 0) else { return nil }
      reader.skipSpace()
      return reader.at == reader.bytes.count ? value : nil
    }
  }
}

struct JSONReader {
  let bytes: UnsafeBufferPointer<UInt8>
  var at = 0

  init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

  mutating func skipSpace() {
    while at < bytes.count, bytes[at] == 0x20 || bytes[at] == 0x0A || bytes[at] == 0x0D || bytes[at] == 0x09 { at += 1 }
  }

  mutating func value(depth: Int) -> JSONValue? {
    guard depth < 64 else { return nil }
    skipSpace()
    guard at < bytes.count else { return nil }
    switch bytes[at] {
    case UInt8(ascii: "{"): return object(depth: depth)
    case UInt8(ascii: "["): return array(depth: depth)
    case UInt8(ascii: "\""): return string().map(JSONValue.string)
    case UInt8(ascii: "t"): return literal("true", .bool(true))
    case UInt8(ascii: "f"): return literal("false", .bool(false))
    case UInt8(ascii: "n"): return literal("null", .null)
    default: return number()
    }
  }

  mutating func object(depth: Int) -> JSONValue? {
    var members: [(String, JSONValue)] = []
    let read = self.members(depth: depth) { key, r in
      guard let v = r.value(depth: depth + 1) else { return false }
      members.append((String(decoding: key, as: UTF8.self), v))
      return true
    }
    return read ? .object(members) : nil
  }

  mutating func array(depth: Int) -> JSONValue? {
    var elements: [JSONValue] = []
    let read = self.elements { r in
      guard let v = r.value(depth: depth + 1) else { return false }
      elements.append(v)
      return true
    }
    return read ? .array(elements) : nil
  }

  mutating func literal(_ word: StaticString, _ v: JSONValue) -> JSONValue? {
    let n = word.utf8CodeUnitCount
    guard at + n <= bytes.count else { return nil }
    for i in 0..<n where bytes[at + i] != word.utf8Start[i] { return nil }
    at += n
    return v
  }

  mutating func number() -> JSONValue? {
    let start = at
    while at < bytes.count {
      switch bytes[at] {
      case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "+"), UInt8(ascii: "."), UInt8(ascii: "e"),
        UInt8(ascii: "E"):
        at += 1
      default:
        guard at > start else { return nil }
        return .number(String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<at]), as: UTF8.self))
      }
    }
    guard at > start else { return nil }
    return .number(String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<at]), as: UTF8.self))
  }

  /// A string at `at` (its opening quote); nil when unterminated, with a control character, or
  /// with an escape JSON does not have.
  mutating func string() -> String? {
    at += 1
    let start = at
    // Most strings have no escape: decoded straight from the buffer.
    while at < bytes.count {
      let b = bytes[at]
      if b == UInt8(ascii: "\"") {
        defer { at += 1 }
        return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<at]), as: UTF8.self)
      }
      if b == UInt8(ascii: "\\") { break }
      if b < 0x20 { return nil }
      at += 1
    }
    var out = Array(bytes[start..<min(at, bytes.count)])
    while at < bytes.count {
      let b = bytes[at]
      if b == UInt8(ascii: "\"") {
        at += 1
        return String(decoding: out, as: UTF8.self)
      }
      if b < 0x20 { return nil }
      guard b == UInt8(ascii: "\\") else {
        out.append(b)
        at += 1
        continue
      }
      guard at + 1 < bytes.count else { return nil }
      let e = bytes[at + 1]
      at += 2
      switch e {
      case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(e)
      case UInt8(ascii: "b"): out.append(0x08)
      case UInt8(ascii: "f"): out.append(0x0C)
      case UInt8(ascii: "n"): out.append(0x0A)
      case UInt8(ascii: "r"): out.append(0x0D)
      case UInt8(ascii: "t"): out.append(0x09)
      case UInt8(ascii: "u"):
        guard var scalar = hex4() else { return nil }
        // A surrogate pair spells one scalar beyond the basic plane; a lone half is U+FFFD.
        if (0xD800..<0xDC00).contains(scalar), at + 1 < bytes.count, bytes[at] == UInt8(ascii: "\\"),
          bytes[at + 1] == UInt8(ascii: "u")
        {
          let mark = at
          at += 2
          if let low = hex4(), (0xDC00..<0xE000).contains(low) {
            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
          } else {
            at = mark
          }
        }
        out.append(contentsOf: Array(String(Unicode.Scalar(scalar).map(Character.init) ?? "\u{FFFD}").utf8))
      default: return nil
      }
    }
    return nil
  }

  mutating func hex4() -> UInt32? {
    guard at + 4 <= bytes.count else { return nil }
    var v: UInt32 = 0
    for i in 0..<4 {
      let c = bytes[at + i]
      let d: UInt32
      switch c {
      case UInt8(ascii: "0")...UInt8(ascii: "9"): d = UInt32(c - UInt8(ascii: "0"))
      case UInt8(ascii: "a")...UInt8(ascii: "f"): d = UInt32(c - UInt8(ascii: "a") + 10)
      case UInt8(ascii: "A")...UInt8(ascii: "F"): d = UInt32(c - UInt8(ascii: "A") + 10)
      default: return nil
      }
      v = v << 4 | d
    }
    at += 4
    return v
  }
}

// Reading a document member by member, for a caller that knows its shape (a list page): keys
// are compared as bytes, and values nobody asked for are stepped over without being made.
extension JSONReader {
  /// Calls `member` with each key (as bytes) of the object at the reader; `member` must read or
  /// skip the value. False when the object is not well formed or `member` says so.
  mutating func members(depth: Int = 0, _ member: (UnsafeBufferPointer<UInt8>, inout JSONReader) -> Bool) -> Bool {
    skipSpace()
    guard depth < 64, at < bytes.count, bytes[at] == UInt8(ascii: "{") else { return false }
    at += 1
    skipSpace()
    if at < bytes.count, bytes[at] == UInt8(ascii: "}") {
      at += 1
      return true
    }
    while true {
      skipSpace()
      guard at < bytes.count, bytes[at] == UInt8(ascii: "\"") else { return false }
      let called: Bool
      if let key = plainKey() {
        guard colon() else { return false }
        called = member(key, &self)
      } else {
        // A key with escapes: its bytes once decoded.
        guard let decoded = string(), colon() else { return false }
        var copy = decoded
        called = copy.withUTF8 { member($0, &self) }
      }
      guard called else { return false }
      skipSpace()
      guard at < bytes.count else { return false }
      if bytes[at] == UInt8(ascii: ",") {
        at += 1
        continue
      }
      guard bytes[at] == UInt8(ascii: "}") else { return false }
      at += 1
      return true
    }
  }

  /// Calls `element` for each element of the array at the reader.
  mutating func elements(_ element: (inout JSONReader) -> Bool) -> Bool {
    skipSpace()
    guard at < bytes.count, bytes[at] == UInt8(ascii: "[") else { return false }
    at += 1
    skipSpace()
    if at < bytes.count, bytes[at] == UInt8(ascii: "]") {
      at += 1
      return true
    }
    while true {
      guard element(&self) else { return false }
      skipSpace()
      guard at < bytes.count else { return false }
      if bytes[at] == UInt8(ascii: ",") {
        at += 1
        continue
      }
      guard bytes[at] == UInt8(ascii: "]") else { return false }
      at += 1
      return true
    }
  }

  /// A key without escapes, as the bytes between its quotes, the reader after it; nil (the
  /// reader where it was) for a key with an escape.
  private mutating func plainKey() -> UnsafeBufferPointer<UInt8>? {
    let start = at + 1
    var i = start
    while i < bytes.count, bytes[i] != UInt8(ascii: "\""), bytes[i] != UInt8(ascii: "\\") {
      if bytes[i] < 0x20 { return nil }
      i += 1
    }
    guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { return nil }
    at = i + 1
    return UnsafeBufferPointer(rebasing: bytes[start..<i])
  }

  private mutating func colon() -> Bool {
    skipSpace()
    guard at < bytes.count, bytes[at] == UInt8(ascii: ":") else { return false }
    at += 1
    return true
  }

  /// The value at the reader as text: a string, or a number as written; nil (and the value
  /// stepped over) for anything else.
  mutating func text() -> String? {
    skipSpace()
    guard at < bytes.count else { return nil }
    switch value(depth: 0) {
    case .string(let s)?, .number(let s)?: return s
    default: return nil
    }
  }

  /// Steps over the value at the reader without making it; false when it is not well formed.
  mutating func skip(depth: Int = 0) -> Bool {
    skipSpace()
    guard depth < 64, at < bytes.count else { return false }
    switch bytes[at] {
    case UInt8(ascii: "{"): return members(depth: depth) { _, r in r.skip(depth: depth + 1) }
    case UInt8(ascii: "["): return elements { r in r.skip(depth: depth + 1) }
    case UInt8(ascii: "\""):
      at += 1
      while at < bytes.count {
        let b = bytes[at]
        if b == UInt8(ascii: "\"") {
          at += 1
          return true
        }
        if b < 0x20 { return false }
        at += b == UInt8(ascii: "\\") ? 2 : 1
      }
      return false
    default: return value(depth: depth) != nil
    }
  }

  var atEnd: Bool {
    mutating get {
      skipSpace()
      return at == bytes.count
    }
  }
}

extension UnsafeBufferPointer where Element == UInt8 {
  /// Whether these bytes spell `key` (ASCII).
  func spells(_ key: StaticString) -> Bool {
    count == key.utf8CodeUnitCount && elementsEqual(UnsafeBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount))
  }
}
