import Synchronization

/// Open handles (of files or of folders) by the number the kernel passes back.
final class HandleTable<Value: Sendable>: Sendable {
  private let state: Mutex<(next: UInt64, values: [UInt64: Value])>

  init() {
    state = Mutex((1, [:]))
  }

  func add(_ value: Value) -> UInt64 {
    state.withLock { s in
      let handle = s.next
      s.next += 1
      s.values[handle] = value
      return handle
    }
  }

  subscript(_ handle: UInt64) -> Value? { state.withLock { $0.values[handle] } }

  /// What an open handle holds from now on (nothing, when it was closed meanwhile).
  func replace(_ handle: UInt64, with value: Value) {
    state.withLock { s in
      if s.values[handle] != nil { s.values[handle] = value }
    }
  }

  @discardableResult
  func remove(_ handle: UInt64) -> Value? { state.withLock { $0.values.removeValue(forKey: handle) } }

  func contains(where predicate: (Value) -> Bool) -> Bool { state.withLock { $0.values.values.contains(where: predicate) } }

  func count(where predicate: (Value) -> Bool) -> Int { state.withLock { $0.values.values.count(where: predicate) } }
}
