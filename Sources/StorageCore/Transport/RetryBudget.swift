import Foundation
import Synchronization

/// Process-wide transfer counters, for the mount's metrics.
package enum TransferCounters {
  /// Attempts made again after a failure.
  package static let retries = Atomic<Int>(0)
}

/// The retry state of one logical operation: backoff with jitter until a deadline. Every retry
/// loop asks it to wait, and it gives up with `retryLimitExceeded` (keeping the last cause) once
/// the next wait would pass the deadline. It also allows the one retry with fresh credentials
/// after a 401.
struct RetryBudget: Sendable {
  private var backoff: Backoff
  /// Whose credentials a 401 refreshes (nil: none to refresh).
  private let storage: Storage?
  private var refreshedCredentials = false
  private let deadline: Date
  /// When an unreachable host stops being retried.
  private let unreachableDeadline: Date
  private var attempts = 0
  /// The last attempt moved bytes: retry at once.
  private var madeProgress = false

  init(seconds: TimeInterval, initialDelay: TimeInterval, unreachableSeconds: TimeInterval? = nil, storage: Storage? = nil) {
    backoff = Backoff(initialDelay: initialDelay)
    self.storage = storage
    let now = Date()
    deadline = now.addingTimeInterval(seconds)
    unreachableDeadline = now.addingTimeInterval(min(seconds, unreachableSeconds ?? seconds))
  }

  /// The budget `storage` gives an operation of `seconds`.
  init(_ storage: Storage, seconds: TimeInterval) {
    let (initialDelay, unreachable) = storage.settings.withLock { ($0.retryInitialDelay, $0.unreachableRetryTime) }
    self.init(seconds: seconds, initialDelay: initialDelay, unreachableSeconds: unreachable, storage: storage)
  }

  /// The server answered `status` to a request that carried `token`: true, once per operation,
  /// when it was a 401 and fresh credentials are worth one more try at once (the token is
  /// dropped, so the next request fetches another).
  mutating func refreshCredentials(after status: Int, token: AccessToken?) -> Bool {
    // A 403 too when the token is at or near its end: Firebase rules denials answer 403 where
    // an expired ID token would get 401 elsewhere (the official emulator does so).
    let expiring = token?.expiry.map { $0.timeIntervalSinceNow < 60 } ?? false
    guard status == 401 || (status == 403 && expiring), !refreshedCredentials, let storage,
      storage.refreshAfterUnauthenticated(token)
    else { return false }
    refreshedCredentials = true
    return true
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
    if failure.code == .serverUnreachable && (Date() >= unreachableDeadline || Date().addingTimeInterval(delay) >= deadline) {
      // Nothing listens there: say so as it is, not as "retry limit exceeded".
      throw attempts > 1 ? failure.replacing(code: .serverUnreachable, detail: "\(failure.detail), \(attempts) attempts") : failure
    }
    if Date().addingTimeInterval(delay) >= deadline {
      throw failure.replacing(code: .retryLimitExceeded, detail: "gave up after \(attempts) attempts: \(failure.detail)")
    }
    TransferCounters.retries.add(1, ordering: .relaxed)
    try? await Task.sleep(for: .milliseconds(Int(delay * 1000)))
  }
}
