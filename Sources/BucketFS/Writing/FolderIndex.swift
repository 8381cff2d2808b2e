import StorageCore

/// Which folders hold names with queued changes, and which hold names the queue is putting a
/// version under: kept per name as the queue changes, so that `names(in:)` and
/// `hasUploads(under:)` cost the depth of a name, not the size of the queue.
struct FolderIndex {
  /// Folder ("" or ending in "/") → what it shows of the queued names under it (a name directly
  /// in it, or "sub/" for one deeper) → how many queued names make it show.
  private var children: [ObjectName: [ObjectName: Int]] = [:]
  /// Folder ("a/", ending in "/") → how many names under it (or its placeholder) the queue is
  /// putting a version under.
  private var uploads: [ObjectName: Int] = [:]
  /// The names indexed (by their bytes: two spellings `String` takes for one are two names),
  /// and whether each is uploading.
  private var indexed: [[UInt8]: Bool] = [:]

  /// `name` has queued changes (`shown`), the last of which puts a version (`uploading`).
  mutating func set(_ name: String, shown: Bool, uploading: Bool) {
    let key = Array(name.utf8)
    let was = indexed[key]
    if was == (shown ? uploading : nil) { return }
    if let was {
      for (dir, child) in Self.steps(of: name) { Self.add(-1, dir, child, to: &children) }
      if was { for prefix in Self.prefixes(of: name) { Self.add(-1, prefix, to: &uploads) } }
    }
    if shown {
      for (dir, child) in Self.steps(of: name) { Self.add(1, dir, child, to: &children) }
      if uploading { for prefix in Self.prefixes(of: name) { Self.add(1, prefix, to: &uploads) } }
      indexed[key] = uploading
    } else {
      indexed.removeValue(forKey: key)
    }
  }

  func names(in dir: String) -> Set<ObjectName> { Set(children[ObjectName(dir)]?.keys ?? [:].keys) }

  func hasUploads(under prefix: String) -> Bool { (uploads[ObjectName(prefix)] ?? 0) > 0 }

  /// Each folder `name` is in, with what it shows there: "a/b/c" is "a/" in "", "b/" in "a/" and
  /// "c" in "a/b/"; a placeholder "a/" is "a/" in "".
  private static func steps(of name: String) -> [(dir: String, child: String)] {
    // By bytes: a slash followed by a combining mark is one `Character`, and still a slash.
    let bytes = Array(name.utf8)
    func text(_ r: Range<Int>) -> String { String(decoding: bytes[r], as: UTF8.self) }
    var out: [(String, String)] = []
    var start = 0
    while let slash = bytes[start...].firstIndex(of: UInt8(ascii: "/")) {
      if slash > start { out.append((text(0..<start), text(start..<(slash + 1)))) }
      start = slash + 1
    }
    if start < bytes.count { out.append((text(0..<start), text(start..<bytes.count))) }
    return out
  }

  /// Every folder prefix of `name` ("a/", "a/b/", and "a/" itself for the placeholder "a/").
  private static func prefixes(of name: String) -> [String] {
    let bytes = Array(name.utf8)
    return bytes.indices.filter { bytes[$0] == UInt8(ascii: "/") }.map { String(decoding: bytes[...$0], as: UTF8.self) }
  }

  private static func add(_ delta: Int, _ dir: String, _ child: String, to map: inout [ObjectName: [ObjectName: Int]]) {
    let (dir, child) = (ObjectName(dir), ObjectName(child))
    let n = (map[dir]?[child] ?? 0) + delta
    if n > 0 {
      map[dir, default: [:]][child] = n
    } else {
      map[dir]?.removeValue(forKey: child)
      if map[dir]?.isEmpty == true { map.removeValue(forKey: dir) }
    }
  }

  private static func add(_ delta: Int, _ prefix: String, to map: inout [ObjectName: Int]) {
    let prefix = ObjectName(prefix)
    let n = (map[prefix] ?? 0) + delta
    if n > 0 { map[prefix] = n } else { map.removeValue(forKey: prefix) }
  }
}
