import BucketFS
import Testing

/// Names printed by the commands (`ls -r`, `status`) are escaped so that no two names print
/// alike: a tab and a backslash followed by `t` printed the same `x\ty`.
@Suite struct TerminalTextTests {
  @Test func noTwoNamesPrintAlike() {
    let names = ["x\ty", "x\\ty", "x\\\\ty", "x\ny", "x\\ny", "plain", "a\u{1b}[31m", "a\\x1b[31m", "\\"]
    let printed = names.map(TerminalText.visible)
    #expect(Set(printed).count == names.count, "\(printed)")
    #expect(printed.allSatisfy { !$0.unicodeScalars.contains { $0.value < 0x20 } })
    #expect(TerminalText.visible("plain") == "plain")
    #expect(TerminalText.visible("x\\ty") == "x\\\\ty")
  }

  /// In a column (`bucketfs status`), a name with a space or a quote is quoted, as `ls` does:
  /// `a`, `a `, ` a` and `'a'` are four objects, and runs of spaces are not columns.
  @Test func namesWithSpacesAreQuotedInAColumn() {
    let names = ["a", "a ", " a", "a  ", "a b", " ", "'a'", "'a ", "a\\'", "d  kept   9"]
    let printed = names.map(TerminalText.name)
    #expect(Set(printed).count == names.count, "\(printed)")
    #expect(TerminalText.name("a") == "a")
    #expect(TerminalText.name("a ") == "'a '")
    #expect(TerminalText.name("d  kept   9") == "'d  kept   9'")
    // As `ls` quotes them (adversary: `'z/quo\'te'` is no shell's quoting, and `dq"x` was
    // left bare).
    #expect(TerminalText.name("it's") == "\"it's\"")
    #expect(TerminalText.name("dq\"x") == "'dq\"x'")
    #expect(TerminalText.name("it's \"q\"") == "'it'\\''s \"q\"'")
    #expect(TerminalText.name("a\\b's") == "'a\\\\b'\\''s'")
    #expect(TerminalText.name("a\tb c") == "'a\\tb c'")
  }

  /// A log line never holds a raw control character (a pin named with ESC or a tab reached the
  /// mount's log raw); its backslashes stay as they are.
  /// A column pads a name to its width and never cuts it, whatever its characters are made of
  /// (issue 55 adversary: NFD "café", the widest name, printed as "cafe").
  @Test func aPaddedNameIsWhole() {
    for name in ["cafe\u{301}", "Zu\u{308}rich-e\u{301}e\u{301}", String(repeating: "\u{1F600}", count: 12), "plain"] {
      let padded = TerminalText.padded(name, to: name.count + 2)
      #expect(padded.unicodeScalars.starts(with: name.unicodeScalars) && padded.count == name.count + 2, "\(name.debugDescription)")
      #expect(Array(TerminalText.padded(name, to: name.count).utf8) == Array(name.utf8))
    }
  }

  @Test func aLogLineHoldsNoControlCharacter() {
    let line = TerminalText.oneLine("pin: a\u{1b}[31m\tb\nc\u{85} \"x\\ty\"")
    #expect(line == "pin: a\\x1b[31m\\tb\\nc\\u{85} \"x\\ty\"", "\(line)")
    #expect(!line.unicodeScalars.contains { TerminalText.isControl($0) })
  }
}
