import StorageCore

/// Which folder prefixes ("a/", "a/b/") have names with changes still queued under them, of any
/// kind (a chmod too, and a refused change): kept per name as the queue changes, so that a
/// folder rename asks in O(1) whether anything of the mount waits under a name, where a walk of
/// the queue cost its size for every rename.
struct QueuedPrefixes {
  /// Prefix → how many queued names start with it (a placeholder "a/" counts under "a/").
  private var counts: [ObjectName: Int] = [:]
  /// The names counted, by their bytes.
  private var counted = Set<[UInt8]>()

  /// `name` has queued changes (`queued`), or no longer has.
  mutating func set(_ name: String, queued: Bool) {
    let key = Array(name.utf8)
    guard counted.contains(key) != queued else { return }
    if queued { counted.insert(key) } else { counted.remove(key) }
    for (i, byte) in key.enumerated() where byte == UInt8(ascii: "/") {
      let prefix = ObjectName(String(decoding: key[...i], as: UTF8.self))
      let n = (counts[prefix] ?? 0) + (queued ? 1 : -1)
      if n > 0 { counts[prefix] = n } else { counts.removeValue(forKey: prefix) }
    }
  }

  /// Whether a queued name starts with `prefix` (which ends in "/").
  func any(under prefix: String) -> Bool { (counts[ObjectName(prefix)] ?? 0) > 0 }
}
