// JSON text written by hand, field by field: an upload's metadata and the mount's queue records
// are written for every file, and Foundation's writers (a tree of boxed values, then a pass to
// text) cost more than the rest of the request.
import Foundation

/// An object's text, field by field, in the order they are given.
package struct JSONWriter {
  private var bytes: [UInt8] = [UInt8(ascii: "{")]

  package init() { bytes.reserveCapacity(256) }

  package mutating func field(_ key: String, _ value: (inout JSONWriter) -> Void) {
    if bytes.count > 1 { bytes.append(UInt8(ascii: ",")) }
    string(key)
    bytes.append(UInt8(ascii: ":"))
    value(&self)
  }

  package mutating func field<T: Encodable>(_ key: String, encoded value: T) throws {
    let text = try JSONEncoder().encode(value)
    field(key) { $0.bytes.append(contentsOf: text) }
  }

  package mutating func raw(_ text: String) { bytes.append(contentsOf: text.utf8) }

  /// An object of strings, by key in byte order (as JSONSerialization's `.sortedKeys`).
  package mutating func strings(_ entries: [String: String]) {
    raw("{")
    for (i, key) in entries.keys.sorted(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }).enumerated() {
      if i > 0 { raw(",") }
      string(key)
      raw(":")
      string(entries[key]!)
    }
    raw("}")
  }

  package mutating func number<N: BinaryInteger>(_ n: N) { raw(String(n)) }

  /// A JSON string: quotes, backslashes and control characters escaped, the rest as its UTF-8.
  package mutating func string(_ s: String) {
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

  package mutating func finish() -> Data {
    bytes.append(UInt8(ascii: "}"))
    return Data(bytes)
  }
}
