import Foundation
import StorageCore

/// Names the server answered "not found" for, by path relative to the mount prefix, for
/// `negative_ttl`: a lookup of one of them answers ENOENT without asking again. Keyed by the
/// name's bytes: NFC "café" missing says nothing of NFD "café", and noting one never drops the
/// other (keyed by `String`, the second spelling put in took the first's slot).
final class MissingNames: Sendable {
  private let names: TTLCache<ObjectName, Bool>

  init(ttl: Double, capacity: Int) { names = TTLCache(ttl: ttl, capacity: capacity) }

  func contains(_ path: String) -> Bool { names.get(ObjectName(path)) != nil }

  func add(_ path: String) { names.set(ObjectName(path), true) }

  func remove(_ path: String) { names.remove(ObjectName(path)) }

  func removeAll(where matches: (String) -> Bool) { names.removeAll { matches($0.string) } }

  var count: Int { names.count }
}
