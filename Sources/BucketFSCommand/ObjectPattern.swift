/// A wildcard in an object name, matched as gsutil and `gcloud storage` match them: `*` any run
/// of characters but `/`, `**` any run including `/`, `?` one character but `/`, `[abc]`,
/// `[a-z]` and `[!a]` (or `[^a]`) one character of (or not of) a set.
struct ObjectPattern: Sendable {
  private enum Piece: Sendable, Equatable {
    case literal(Character)
    case anyInSegment
    case anyAcrossSegments
    case one
    case set([ClosedRange<Character>], negated: Bool)
  }

  private let pieces: [Piece]
  /// The characters before the first wildcard: every match starts with them, so a listing
  /// under this prefix holds every match.
  let literalPrefix: String

  /// Nil when `text` has no wildcard (it then names one object or prefix).
  init?(_ text: String) {
    guard text.contains(where: { $0 == "*" || $0 == "?" || $0 == "[" }) else { return nil }
    var pieces: [Piece] = []
    let chars = Array(text)
    var i = 0
    while i < chars.count {
      let c = chars[i]
      switch c {
      case "*":
        if i + 1 < chars.count && chars[i + 1] == "*" {
          pieces.append(.anyAcrossSegments)
          i += 2
          while i < chars.count && chars[i] == "*" { i += 1 }
          continue
        }
        pieces.append(.anyInSegment)
      case "?":
        pieces.append(.one)
      case "[":
        // A set runs to the next `]` (a `]` right after `[` or `[!` belongs to the set); an
        // unclosed `[` is itself.
        var j = i + 1
        var negated = false
        if j < chars.count && (chars[j] == "!" || chars[j] == "^") {
          negated = true
          j += 1
        }
        let start = j
        if j < chars.count && chars[j] == "]" { j += 1 }
        while j < chars.count && chars[j] != "]" { j += 1 }
        guard j < chars.count else {
          pieces.append(.literal("["))
          break
        }
        var ranges: [ClosedRange<Character>] = []
        var k = start
        while k < j {
          if k + 2 < j && chars[k + 1] == "-" && chars[k] <= chars[k + 2] {
            ranges.append(chars[k]...chars[k + 2])
            k += 3
          } else {
            ranges.append(chars[k]...chars[k])
            k += 1
          }
        }
        pieces.append(.set(ranges, negated: negated))
        i = j
      default:
        pieces.append(.literal(c))
      }
      i += 1
    }
    self.pieces = pieces
    literalPrefix = String(pieces.prefix { if case .literal = $0 { return true } else { return false } }.map {
      if case .literal(let c) = $0 { return c } else { return " " }
    })
  }

  func matches(_ name: String) -> Bool {
    Self.match(pieces[...], Array(name)[...])
  }

  private static func match(_ pattern: ArraySlice<Piece>, _ name: ArraySlice<Character>) -> Bool {
    guard let first = pattern.first else { return name.isEmpty }
    let rest = pattern.dropFirst()
    switch first {
    case .literal(let c):
      return name.first == c && match(rest, name.dropFirst())
    case .one:
      guard let c = name.first, c != "/" else { return false }
      return match(rest, name.dropFirst())
    case .set(let ranges, let negated):
      guard let c = name.first, c != "/", ranges.contains(where: { $0.contains(c) }) != negated else { return false }
      return match(rest, name.dropFirst())
    case .anyInSegment, .anyAcrossSegments:
      // Try every length the wildcard could take, shortest first.
      var tail = name
      while true {
        if match(rest, tail) { return true }
        guard let c = tail.first else { return false }
        if c == "/" && first == .anyInSegment { return false }
        tail = tail.dropFirst()
      }
    }
  }
}
