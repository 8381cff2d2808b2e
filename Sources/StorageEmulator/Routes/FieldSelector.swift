// The `fields` parameter every JSON API method takes: a partial response holding only the named
// fields, as `items/name`, `items(name,size)`, `a,b/c` and `*` write them
// (https://cloud.google.com/storage/docs/json_api#partial-response).
import Foundation

struct FieldSelector: Equatable {
  /// Each selected field with what is selected inside it; an empty selector keeps it whole.
  private var children: [String: FieldSelector] = [:]
  private var everything = false

  /// Nil for text that is not a field selector.
  init?(_ text: String) {
    var rest = Substring(text)
    guard let parsed = Self.parseList(&rest), rest.isEmpty else { return nil }
    self = parsed
  }

  private init() {}

  private static func parseList(_ text: inout Substring) -> FieldSelector? {
    var selector = FieldSelector()
    while true {
      guard let path = parsePath(&text) else { return nil }
      selector.merge(path)
      guard text.first == "," else { return selector }
      text.removeFirst()
    }
  }

  /// `name`, `name/path`, `name(list)` or `*`.
  private static func parsePath(_ text: inout Substring) -> FieldSelector? {
    let name = text.prefix { $0 != "," && $0 != "/" && $0 != "(" && $0 != ")" }.trimmingCharacters(in: .whitespaces)
    text.removeFirst(text.prefix { $0 != "," && $0 != "/" && $0 != "(" && $0 != ")" }.count)
    guard !name.isEmpty else { return nil }
    var selector = FieldSelector()
    if name == "*" {
      selector.everything = true
      return selector
    }
    var inner = FieldSelector()
    if text.first == "/" {
      text.removeFirst()
      guard let sub = parsePath(&text) else { return nil }
      inner = sub
    } else if text.first == "(" {
      text.removeFirst()
      guard let sub = parseList(&text), text.first == ")" else { return nil }
      text.removeFirst()
      inner = sub
    }
    selector.children[name] = inner
    return selector
  }

  private mutating func merge(_ other: FieldSelector) {
    everything = everything || other.everything
    for (name, sub) in other.children {
      if let mine = children[name] {
        // `items,items/name` keeps items whole.
        if mine.isWhole || sub.isWhole { children[name] = FieldSelector() } else {
          var merged = mine
          merged.merge(sub)
          children[name] = merged
        }
      } else {
        children[name] = sub
      }
    }
  }

  private var isWhole: Bool { children.isEmpty || everything }

  /// The part of a decoded JSON value this selects (arrays select inside each element).
  func apply(_ value: Any) -> Any {
    if isWhole { return value }
    if let array = value as? [Any] { return array.map(apply) }
    guard let object = value as? [String: Any] else { return value }
    var kept: [String: Any] = [:]
    for (name, sub) in children {
      if let field = object[name] { kept[name] = sub.apply(field) }
    }
    return kept
  }
}
