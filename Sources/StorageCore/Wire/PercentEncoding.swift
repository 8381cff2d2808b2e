import Foundation

enum PercentEncoding {
  /// What JavaScript's `encodeURIComponent` leaves alone; everything else (including `/`) is escaped.
  static let component: CharacterSet = {
    var set = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
    set.insert(charactersIn: "-_.!~*'()")
    return set
  }()

  static func encode(_ text: String) -> String {
    text.addingPercentEncoding(withAllowedCharacters: component) ?? text
  }

  static func query(_ items: [(String, String)]) -> String {
    items.map { "\(encode($0.0))=\(encode($0.1))" }.joined(separator: "&")
  }
}
