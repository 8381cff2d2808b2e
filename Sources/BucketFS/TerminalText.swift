import Foundation

/// Text from outside (object names, servers' messages) made safe to print.
package enum TerminalText {
  /// `text` with its control characters written as escapes (`\n`, `\t`, `\r`, `\x1b`, `\u{9b}`):
  /// an object name is anyone's choice, and written raw it could move the cursor, recolour or
  /// rewrite what the terminal shows, or end a line where none ends. A backslash is written
  /// `\\`, so that a name with a tab and one with a backslash and a `t` never print alike.
  package static func visible(_ text: String) -> String { escaped(text, backslashes: true) }

  /// A log line's `message` with its control characters escaped as `visible` writes them, and
  /// its backslashes left as they are (the names in it are mostly quoted Swift-style already):
  /// a name in a message never ends the line or reaches the terminal as a control sequence.
  package static func oneLine(_ message: String) -> String { escaped(message, backslashes: false) }

  private static func escaped(_ text: String, backslashes: Bool) -> String {
    guard text.unicodeScalars.contains(where: { isControl($0) || (backslashes && $0 == "\\") }) else { return text }
    var out = ""
    for scalar in text.unicodeScalars {
      switch scalar {
      case "\\" where backslashes: out += "\\\\"
      case "\n": out += "\\n"
      case "\t": out += "\\t"
      case "\r": out += "\\r"
      case _ where scalar.value < 0x80 && isControl(scalar): out += "\\x" + String(format: "%02x", scalar.value)
      case _ where isControl(scalar): out += "\\u{" + String(scalar.value, radix: 16) + "}"
      default: out.unicodeScalars.append(scalar)
      }
    }
    return out
  }

  /// `name` for a column of names (`bucketfs status`): as `visible` writes it, quoted when it
  /// holds a space or a quote, as `ls` quotes such names: in double quotes when its only quote
  /// is `'`, else in single quotes with each `'` written `'\''`. Else `a` and `a ` (two
  /// objects) printed alike, and `d  kept   9` looked like a name and two more columns.
  package static func name(_ name: String) -> String {
    let shown = visible(name)
    guard shown.contains(where: { $0 == " " || $0 == "'" || $0 == "\"" }) else { return shown }
    if shown.contains("'") && !shown.contains(where: { "\"$`\\".contains($0) }) { return "\"" + shown + "\"" }
    return "'" + shown.replacingOccurrences(of: "'", with: "'\\''") + "'"
  }

  /// `text` followed by spaces up to `width` characters, whole whatever it holds. (Foundation's
  /// `padding(toLength:)` counts UTF-16 units, and cut the widest name of `bucketfs status`:
  /// NFD "café" printed as "cafe", another object's name.)
  package static func padded(_ text: String, to width: Int) -> String {
    text + String(repeating: " ", count: max(0, width - text.count))
  }

  package static func isControl(_ scalar: Unicode.Scalar) -> Bool {
    scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || scalar.value == 0x2028 || scalar.value == 0x2029
  }
}
