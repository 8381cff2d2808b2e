// A value installed after its owner is made (a callback, most often), read from any thread.
//
// Why not a `Mutex<(closure)?>`: a closure passed to `Mutex.withLock` in a context where the
// value's type is a function type is reabstracted (Swift 6.3): the function stored is converted
// to the concrete representation for the closure's `inout` and converted back on the way out,
// so every `withLock { $0 }` wrapped it in two more thunks. After n reads, a call of it went
// through 2n thunks and every read allocated two more: an offline walk of 10,000 pinned folders
// slowed down request by request until it hung (issue 55). Here the lock is taken in a generic
// context, where the value keeps the one representation it was stored in, and a read converts
// a copy (one thunk, dropped after the call) and stores nothing back.
import Synchronization

package final class Hook<Value: Sendable>: Sendable {
  private let stored = Mutex<Value?>(nil)

  package init() {}

  /// Installs `value` in place of what was there.
  package func set(_ value: Value) { stored.withLock { $0 = value } }

  /// What was installed last (nil: nothing yet).
  package var value: Value? { stored.withLock { $0 } }
}
