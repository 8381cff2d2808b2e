// The `matchGlob` parameter of an object list (https://cloud.google.com/storage/docs/json_api/v1/objects/list#list-object-glob):
// `*` any run but `/`, `**` any run, `?` one character but `/`, `[abc]`, `[!abc]`, `{a,b}`.
// Translated to a regular expression, matched against the whole name.
import Foundation

struct MatchGlob {
  private let expression: NSRegularExpression

  /// Nil for a glob the service would refuse (an unclosed set or group).
  init?(_ glob: String) {
    var pattern = "^"
    var chars = Substring(glob)
    var groups = 0
    while let c = chars.popFirst() {
      switch c {
      case "*":
        if chars.first == "*" {
          chars.removeFirst()
          pattern += ".*"
        } else {
          pattern += "[^/]*"
        }
      case "?": pattern += "[^/]"
      case "[":
        guard let close = chars.dropFirst().firstIndex(of: "]") else { return nil }
        var set = chars[..<close]
        chars = chars[chars.index(after: close)...]
        var negated = false
        if set.first == "!" || set.first == "^" {
          negated = true
          set = set.dropFirst()
        }
        pattern += "[" + (negated ? "^" : "") + set.map { $0 == "\\" || $0 == "[" || $0 == "^" ? "\\\($0)" : String($0) }.joined() + "]"
      case "{":
        groups += 1
        pattern += "(?:"
      case "," where groups > 0: pattern += "|"
      case "}" where groups > 0:
        groups -= 1
        pattern += ")"
      case "\\":
        if let next = chars.popFirst() { pattern += NSRegularExpression.escapedPattern(for: String(next)) }
      default:
        pattern += NSRegularExpression.escapedPattern(for: String(c))
      }
    }
    guard groups == 0, let expression = try? NSRegularExpression(pattern: pattern + "$", options: [.dotMatchesLineSeparators]) else {
      return nil
    }
    self.expression = expression
  }

  func matches(_ name: String) -> Bool {
    expression.firstMatch(in: name, range: NSRange(name.startIndex..., in: name)) != nil
  }
}
