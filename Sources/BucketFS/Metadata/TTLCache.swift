import Foundation
import Synchronization

/// A map whose entries expire after a time to live, bounded in entries (the oldest insertions go
/// first when full). Time is passed in so that tests control it. A cache of anything named by an
/// object name is keyed by `ObjectName` (its bytes): keyed by `String`, NFC and NFD "café" took
/// one slot, and the second spelling put in pushed the first out.
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

  package init(ttl: Double, capacity: Int, clock: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 }) {
    self.ttl = ttl
    self.capacity = capacity
    self.clock = clock
  }

  package func get(_ key: Key) -> Value? {
    let now = clock()
    return state.withLock { s in
      guard let e = s.entries[key], e.expires >= now else { return nil }
      return e.value
    }
  }

  /// The value however long ago it was set, while the capacity keeps it: what the mount last
  /// knew, for when the server does not answer. (Expired entries stay until pushed out.)
  package func lastKnown(_ key: Key) -> Value? {
    state.withLock { $0.entries[key]?.value }
  }

  package func set(_ key: Key, _ value: Value) {
    let expires = clock() + ttl
    state.withLock { s in
      s.order += 1
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
      s.entries.removeValue(forKey: key)
    }
  }

  /// Removes the entries whose key `matches`; returns their keys.
  @discardableResult
  package func removeAll(where matches: (Key) -> Bool) -> [Key] {
    state.withLock { s in
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
