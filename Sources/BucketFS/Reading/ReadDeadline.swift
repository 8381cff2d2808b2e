// A reader gets bytes or an error within `read_timeout`, whatever the fetches behind the read are
// doing (waiting on a prefetch that stalled, retrying, backing off). A read only ever waits at
// one kind of place — a `Waiter` for a fetch it did not start itself — so the deadline lives
// there: the waiter is resumed by its fetch or by the deadline, whichever comes first, and the
// fetch goes on in the background and fills the cache if it succeeds. No task of its own
// stands between the reader and the bytes.
import Foundation
import StorageCore
import Synchronization

package struct ReadDeadline: Sendable {
  /// Deadline timers run on a queue of their own, not as tasks: they fire on time when every
  /// task thread is busy.
  private static let timers = DispatchQueue(label: "bucketfs.read.deadlines")

  let seconds: Double
  let object: String
  private let instant: DispatchTime

  package init(seconds: Double, object: String) {
    self.seconds = seconds
    self.object = object
    instant = .now() + seconds
  }

  var error: BucketError {
    BucketError(code: .timedOut, object: object, detail: "no answer within read_timeout (\(seconds) s)")
  }

  var hasPassed: Bool { DispatchTime.now() >= instant }

  /// Resumes `waiter` with the timeout unless something else has by the deadline.
  fileprivate func arm<T>(_ waiter: Waiter<T>) {
    let error = self.error
    Self.timers.asyncAfter(deadline: instant) { waiter.resume(.failure(error)) }
  }
}

/// One task waiting for what another thread delivers: resumed once, by the first of the
/// delivery and the deadline; a later resume is ignored.
final class Waiter<T: Sendable>: Sendable {
  typealias Outcome = Result<T, BucketError>
  private let continuation: Mutex<CheckedContinuation<Outcome, Never>?>

  private init(_ continuation: CheckedContinuation<Outcome, Never>) {
    self.continuation = Mutex(continuation)
  }

  func resume(_ outcome: Outcome) {
    continuation.withLock { c in
      defer { c = nil }
      return c
    }?.resume(returning: outcome)
  }

  /// Waits for an outcome. `register` returns it when it is there already, or keeps the waiter
  /// to resume later (and returns nil); `deadline`, when given, ends the wait with its timeout.
  static func wait(by deadline: ReadDeadline?, _ register: (Waiter<T>) -> Outcome?) async -> Outcome {
    if let deadline, deadline.hasPassed { return .failure(deadline.error) }
    return await withCheckedContinuation { cont in
      let waiter = Waiter(cont)
      if let ready = register(waiter) { return waiter.resume(ready) }
      deadline?.arm(waiter)
    }
  }
}
