import BucketFS

/// A small argument reader: flags and options are taken by name, what remains is positional.
public struct Arguments {
  private(set) var items: [String]

  /// Grouped single-letter flags (`-lr`) are split into `-l -r`.
  public init(_ items: [String]) {
    var expanded: [String] = []
    var passthrough = false
    for item in items {
      if item == "--" { passthrough = true }
      if !passthrough, item.count > 2, item.hasPrefix("-"), !item.hasPrefix("--"),
        item.dropFirst().allSatisfy({ $0.isLetter })
      {
        expanded += item.dropFirst().map { "-\($0)" }
      } else {
        expanded.append(item)
      }
    }
    self.items = expanded
  }

  /// True (and consumed) when any of `names` appears.
  mutating func flag(_ names: String...) -> Bool {
    let before = items.count
    var seenDoubleDash = false
    items = items.filter { item in
      if item == "--" { seenDoubleDash = true }
      return seenDoubleDash || !names.contains(item)
    }
    return items.count != before
  }

  /// The value of `--name VALUE` or `--name=VALUE` (the last, when given more than once).
  mutating func value(_ name: String) throws(CommandError) -> String? {
    try values(name).last
  }

  /// Every value of an option that may be given more than once (`-o a -o b`), in order.
  mutating func values(_ name: String) throws(CommandError) -> [String] {
    var result: [String] = []
    var rest: [String] = []
    var i = 0
    while i < items.count {
      let item = items[i]
      if item == "--" {
        rest += items[i...]
        break
      }
      if item == name {
        guard i + 1 < items.count else { throw .usage("\(name) needs a value") }
        result.append(items[i + 1])
        i += 2
        continue
      }
      if item.hasPrefix(name + "=") {
        result.append(String(item.dropFirst(name.count + 1)))
        i += 1
        continue
      }
      rest.append(item)
      i += 1
    }
    items = rest
    return result
  }

  mutating func int(_ name: String) throws(CommandError) -> Int? {
    try int(name, in: 0...Int(Int32.max))
  }

  /// A whole number within `range`: anything from outside is range-checked here, so that no
  /// later arithmetic on it can trap.
  mutating func int(_ name: String, in range: ClosedRange<Int>) throws(CommandError) -> Int? {
    guard let text = try value(name) else { return nil }
    guard let n = Int(text) else { throw .usage("\(name) takes a number, not \(text)") }
    guard range.contains(n) else { throw .usage("\(name) takes a number from \(range.lowerBound) to \(range.upperBound), not \(text)") }
    return n
  }

  /// Seconds (`30`, `0.5`, `3s`), by the mount options' rule.
  mutating func seconds(_ name: String) throws(CommandError) -> Double? {
    guard var text = try value(name) else { return nil }
    if text.hasSuffix("s") { text.removeLast() }
    do throws(MountOptions.ParseError) {
      return try MountOptions.seconds(text, name, allowZero: false)
    } catch {
      throw .usage(error.description)
    }
  }

  /// Positional arguments; anything still starting with `-` (except `-` itself) is an unknown option.
  mutating func positionals() throws(CommandError) -> [String] {
    var out: [String] = []
    var passthrough = false
    for item in items {
      if !passthrough && item == "--" {
        passthrough = true
        continue
      }
      if !passthrough && item.hasPrefix("-") && item != "-" { throw .usage("unknown option \(item)") }
      out.append(item)
    }
    items = []
    return out
  }

  mutating func finish() throws(CommandError) {
    let rest = try positionals()
    if let first = rest.first { throw .usage("unexpected argument \(first)") }
  }

  var isEmpty: Bool { items.isEmpty }
}
