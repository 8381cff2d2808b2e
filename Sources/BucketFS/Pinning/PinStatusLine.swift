// The lines the mount answers about its pins (`user.bucketfs.pins`, `user.bucketfs.pin.add`):
// tab-separated fields, a line a pin or a failure. A field is a name anyone chose (a folder
// with a tab or a newline in its name) or a server's message, so its backslashes, tabs,
// newlines and other control characters are written as escapes, and read back exactly: a
// folder whose name held a tab was pinned, but its line had a field too many, and `bucketfs
// pin` said the mount gave no answer while `bucketfs status` said nothing was pinned.
import Foundation

package enum PinStatusLine {
  /// `fields` as one line, each escaped, ending in a newline.
  package static func line(_ fields: [String]) -> String { fields.map(escape).joined(separator: "\t") + "\n" }

  /// The fields of `line` (without its newline), as they were before `line` escaped them.
  package static func fields(_ line: Substring) -> [String] {
    line.split(separator: "\t", omittingEmptySubsequences: false).map(unescape)
  }

  /// The lines of an answer, split where a line ends (never inside a field).
  package static func lines(_ text: String) -> [[String]] {
    text.split(separator: "\n").map(fields)
  }

  package static func escape(_ field: String) -> String {
    guard field.unicodeScalars.contains(where: { $0 == "\\" || $0.value < 0x20 || $0.value == 0x7F }) else { return field }
    var out = ""
    for scalar in field.unicodeScalars {
      switch scalar {
      case "\\": out += "\\\\"
      case "\t": out += "\\t"
      case "\n": out += "\\n"
      case "\r": out += "\\r"
      case _ where scalar.value < 0x20 || scalar.value == 0x7F: out += "\\x" + String(format: "%02x", scalar.value)
      default: out.unicodeScalars.append(scalar)
      }
    }
    return out
  }

  package static func unescape(_ field: Substring) -> String {
    guard field.contains("\\") else { return String(field) }
    var out = String.UnicodeScalarView()
    var scalars = field.unicodeScalars.makeIterator()
    while let scalar = scalars.next() {
      guard scalar == "\\", let code = scalars.next() else {
        out.append(scalar)
        continue
      }
      switch code {
      case "t": out.append("\t")
      case "n": out.append("\n")
      case "r": out.append("\r")
      case "x":
        let hex = String(String.UnicodeScalarView([scalars.next(), scalars.next()].compactMap { $0 }))
        if let value = UInt8(hex, radix: 16) { out.append(Unicode.Scalar(value)) } else { out.append(contentsOf: "\\x\(hex)".unicodeScalars) }
      default: out.append(code)
      }
    }
    return String(out)
  }
}
