import Foundation
import Synchronization

/// A map whose entries expire after a time to live, bounded in entries (the oldest insertions go
/// first when full). Time is passed in so that tests control it. `sameKey` is how a key found is
/// told from one equal to it as a dictionary key: two object names that Swift's `String` takes for
/// one (canonically equal, other bytes) are two objects, and one must not answer for the other.
package final class TTLCache<Key: Hashable & Sendable, Value: Sendable>: Sendable {
  private struct Entry {
    var key: Key
    var value: Value
    var expires: Double
    var order: UInt64
  }

  private struct State {
    var entries: [Key: Entry] = [:]
    var order: UInt64 = 0
  }

  private let state = Mutex(State())
  package let ttl: Double
  package let capacity: Int
  private let clock: @Sendable () -> Double
  private let sameKey: @Sendable (Key, Key) -> Bool

  package init(
    ttl: Double, capacity: Int, sameKey: @escaping @Sendable (Key, Key) -> Bool = { $0 == $1 },
    clock: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 }
  ) {
    self.ttl = ttl
    self.capacity = capacity
    self.sameKey = sameKey
    self.clock = clock
  }

  package func get(_ key: Key) -> Value? {
    let now = clock()
    return state.withLock { s in
      guard let e = s.entries[key], sameKey(e.key, key) else { return nil }
      if e.expires < now {
        s.entries.removeValue(forKey: key)
        return nil
      }
      return e.value
    }
  }

  /// The key held that the map takes for `key` (the same, or one `sameKey` tells from it).
  package func heldKey(_ key: Key) -> Key? {
    state.withLock { $0.entries[key]?.key }
  }

  package func set(_ key: Key, _ value: Value) {
    let expires = clock() + ttl
    state.withLock { s in
      s.order += 1
      // A key of other bytes equal to a held one takes its slot: the entry says which it is.
      s.entries[key] = Entry(key: key, value: value, expires: expires, order: s.order)
      if s.entries.count > capacity {
        // Drop the oldest tenth at once so that a full cache does not sort on every insert.
        let victims = s.entries.sorted { $0.value.order < $1.value.order }.prefix(max(1, capacity / 10))
        for (k, _) in victims { s.entries.removeValue(forKey: k) }
      }
    }
  }

  package func remove(_ key: Key) {
    state.withLock { s in
      if let e = s.entries[key], sameKey(e.key, key) { s.entries.removeValue(forKey: key) }
    }
  }

  /// Removes the entries whose key `matches`; returns their keys.
  @discardableResult
  package func removeAll(where matches: (Key) -> Bool) -> [Key] {
    state.withLock { s in
      // The entry's own key: the map's may be another spelling that held the slot before.
      let keys = s.entries.values.map(\.key).filter(matches)
      for k in keys { s.entries.removeValue(forKey: k) }
      return keys
    }
  }

  package func removeAll() {
    state.withLock { $0.entries.removeAll() }
  }

  package var count: Int { state.withLock { $0.entries.count } }
}
