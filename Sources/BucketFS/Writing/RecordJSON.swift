// A queue record's JSON, written by hand: every close of a file writes one or two records, and
// Foundation's JSONEncoder (a tree of boxed values, then a pass to text) was a seventh of the
// daemon's time in an untar. The text is what `PendingChange.encode(to:)` gives, key for key, so
// that any mount, of this version or an earlier one, reads it with JSONDecoder (the round trip
// is tested for odd names, every life and every base). The rare parts with nesting of their own
// (a rename's source, an overlay's ranges) still go through JSONEncoder.
import Foundation

extension PendingChange {
  /// This change's record, as `JSONEncoder().encode(self)` would write it.
  func record() throws -> Data {
    var json = RecordJSON()
    json.field("sequence") { $0.number(sequence) }
    json.field("kind") { $0.string(kind.rawValue) }
    json.field("name") { $0.string(name) }
    json.field("base") { j in
      // The shape Swift's synthesized Codable gives an enum with payloads.
      switch base {
      case .generation(let g): j.raw("{\"generation\":{\"_0\":\(g)}}")
      case .any: j.raw("{\"any\":{}}")
      case .previous: j.raw("{\"previous\":{}}")
      }
    }
    if let contentType { json.field("contentType") { $0.string(contentType) } }
    if let mtime { json.field("mtime") { $0.raw("[\(mtime.seconds),\(mtime.nanoseconds)]") } }
    if let custom {
      json.field("custom") { j in
        j.raw("{")
        for (i, (key, value)) in custom.sorted(by: { $0.key < $1.key }).enumerated() {
          if i > 0 { j.raw(",") }
          j.string(key)
          j.raw(":")
          j.string(value)
        }
        j.raw("}")
      }
    }
    if let sessionURL { json.field("sessionURL") { $0.string(sessionURL) } }
    if let source { try json.field("source", encoded: source) }
    if let dataSize { json.field("dataSize") { $0.number(dataSize) } }
    if let dataCRC32C { json.field("dataCRC32C") { $0.number(dataCRC32C) } }
    if let overlay { try json.field("overlay", encoded: overlay) }
    switch life {
    // As `encode(to:)`: a replaced change's record is removed, never rewritten.
    case .pending, .replaced: json.field("state") { $0.string("pending") }
    case .started: json.field("state") { $0.string("started") }
    case .done(let effect):
      json.field("state") { $0.string("done") }
      switch effect {
      case .generation(let g): json.field("produced") { $0.number(g) }
      case .unknown: break
      case .conflict(let name, let generation):
        json.field("conflictName") { $0.string(name) }
        if let generation { json.field("produced") { $0.number(generation) } }
      }
    case .failed(let why):
      json.field("state") { $0.string("failed") }
      json.field("error") { $0.string(why) }
    }
    return json.finish()
  }
}

/// An object's text, field by field.
struct RecordJSON {
  private var bytes: [UInt8] = [UInt8(ascii: "{")]

  init() { bytes.reserveCapacity(256) }

  mutating func field(_ key: String, _ value: (inout RecordJSON) -> Void) {
    if bytes.count > 1 { bytes.append(UInt8(ascii: ",")) }
    string(key)
    bytes.append(UInt8(ascii: ":"))
    value(&self)
  }

  mutating func field<T: Encodable>(_ key: String, encoded value: T) throws {
    let text = try JSONEncoder().encode(value)
    field(key) { $0.bytes.append(contentsOf: text) }
  }

  mutating func raw(_ text: String) { bytes.append(contentsOf: text.utf8) }

  mutating func number<N: BinaryInteger>(_ n: N) { raw(String(n)) }

  /// A JSON string: quotes, backslashes and control characters escaped, the rest as its UTF-8.
  mutating func string(_ s: String) {
    bytes.append(UInt8(ascii: "\""))
    for b in s.utf8 {
      switch b {
      case UInt8(ascii: "\""): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
      case UInt8(ascii: "\\"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
      case 0x0A: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
      case 0x0D: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
      case 0x09: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
      case 0..<0x20:
        let hex = Array("0123456789abcdef".utf8)
        bytes.append(contentsOf: Array("\\u00".utf8) + [hex[Int(b >> 4)], hex[Int(b & 0xF)]])
      default: bytes.append(b)
      }
    }
    bytes.append(UInt8(ascii: "\""))
  }

  mutating func finish() -> Data {
    bytes.append(UInt8(ascii: "}"))
    return Data(bytes)
  }
}
