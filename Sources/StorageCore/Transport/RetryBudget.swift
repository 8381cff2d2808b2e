import Foundation

/// The retry state of one logical operation: backoff with jitter until a deadline. Every retry
/// loop asks it to wait, and it gives up with `retryLimitExceeded` (keeping the last cause) once
/// the next wait would pass the deadline.
struct RetryBudget: Sendable {
  private var backoff: Backoff
  private let deadline: Date
  private var attempts = 0
  /// The last attempt moved bytes: retry at once.
  private var madeProgress = false

  init(seconds: TimeInterval, initialDelay: TimeInterval) {
    backoff = Backoff(initialDelay: initialDelay)
    deadline = Date().addingTimeInterval(seconds)
  }

  /// An attempt moved bytes before it failed: the next attempt starts at once and the backoff
  /// starts over, so a connection that breaks every few hundred kilobytes still gets the bytes
  /// through. The deadline does not move.
  mutating func progressed() {
    backoff = Backoff(initialDelay: backoff.initialDelay)
    madeProgress = true
  }

  /// Sleeps before the next attempt, or throws when the budget cannot cover the wait.
  mutating func wait(after failure: StorageError, retryAfter: TimeInterval? = nil) async throws(StorageError) {
    attempts += 1
    let delay = madeProgress ? max(0.01, retryAfter ?? 0) : backoff.nextDelay(retryAfter: retryAfter)
    madeProgress = false
    if Date().addingTimeInterval(delay) >= deadline {
      var exhausted = failure
      exhausted.code = .retryLimitExceeded
      exhausted.detail = "gave up after \(attempts) attempts: \(failure.detail)"
      throw exhausted
    }
    try? await Task.sleep(for: .milliseconds(Int(delay * 1000)))
  }
}
