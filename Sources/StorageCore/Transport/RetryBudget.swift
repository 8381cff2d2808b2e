import Foundation

/// The retry state of one logical operation: backoff with jitter until a deadline. Every retry
/// loop asks it to wait, and it gives up with `retryLimitExceeded` (keeping the last cause) once
/// the next wait would pass the deadline.
struct RetryBudget: Sendable {
  private var backoff: Backoff
  private let deadline: Date

  init(seconds: TimeInterval, initialDelay: TimeInterval) {
    backoff = Backoff(initialDelay: initialDelay)
    deadline = Date().addingTimeInterval(seconds)
  }

  /// Sleeps before the next attempt, or throws when the budget cannot cover the wait.
  mutating func wait(after failure: StorageError, retryAfter: TimeInterval? = nil) async throws(StorageError) {
    let delay = backoff.nextDelay(retryAfter: retryAfter)
    if Date().addingTimeInterval(delay) >= deadline {
      var exhausted = failure
      exhausted.code = .retryLimitExceeded
      exhausted.detail = "gave up after \(backoff.attempt) attempts: \(failure.detail)"
      throw exhausted
    }
    try? await Task.sleep(for: .milliseconds(Int(delay * 1000)))
  }
}
