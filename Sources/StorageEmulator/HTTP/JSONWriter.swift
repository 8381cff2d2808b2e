import Foundation

/// Writes JSON for the server's answers. Listing pages carry up to a thousand full object
/// resources, and Foundation's serializer was most of the cost of serving them.
enum JSONWriter {
  static func data(_ value: Any) -> Data {
    var out = [UInt8]()
    out.reserveCapacity(1024)
    write(value, into: &out)
    return Data(out)
  }

  private static func write(_ value: Any, into out: inout [UInt8]) {
    switch value {
    case let s as String:
      writeString(s, into: &out)
    case let d as [String: Any]:
      out.append(UInt8(ascii: "{"))
      var first = true
      for key in d.keys.sorted() {
        if !first { out.append(UInt8(ascii: ",")) }
        first = false
        writeString(key, into: &out)
        out.append(UInt8(ascii: ":"))
        write(d[key]!, into: &out)
      }
      out.append(UInt8(ascii: "}"))
    case let d as [String: String]:
      write(d as [String: Any], into: &out)
    case let a as [Any]:
      out.append(UInt8(ascii: "["))
      for (i, element) in a.enumerated() {
        if i > 0 { out.append(UInt8(ascii: ",")) }
        write(element, into: &out)
      }
      out.append(UInt8(ascii: "]"))
    case let b as Bool:
      out.append(contentsOf: Array((b ? "true" : "false").utf8))
    case let i as Int:
      out.append(contentsOf: Array(String(i).utf8))
    case let i as Int64:
      out.append(contentsOf: Array(String(i).utf8))
    case let n as NSNumber:
      out.append(contentsOf: Array(n.stringValue.utf8))
    default:
      out.append(contentsOf: Array("null".utf8))
    }
  }

  private static func writeString(_ s: String, into out: inout [UInt8]) {
    out.append(UInt8(ascii: "\""))
    for byte in s.utf8 {
      switch byte {
      case UInt8(ascii: "\""): out.append(contentsOf: [92, 34])
      case UInt8(ascii: "\\"): out.append(contentsOf: [92, 92])
      case 0x0A: out.append(contentsOf: [92, UInt8(ascii: "n")])
      case 0x0D: out.append(contentsOf: [92, UInt8(ascii: "r")])
      case 0x09: out.append(contentsOf: [92, UInt8(ascii: "t")])
      case 0..<0x20:
        out.append(contentsOf: Array(String(format: "\\u%04x", byte).utf8))
      default:
        out.append(byte)
      }
    }
    out.append(UInt8(ascii: "\""))
  }
}
