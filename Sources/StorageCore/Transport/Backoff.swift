import Foundation

/// Exponential backoff with jitter inside a time budget, as the Android SDK does it
/// (1, 2, 4, … s capped at 32 s, plus up to 250 ms of jitter), with the first wait configurable.
package struct Backoff: Sendable {
  package var initialDelay: TimeInterval
  package var maxDelay: TimeInterval = 32
  package var jitter: TimeInterval = 0.25
  package private(set) var attempt = 0

  package init(initialDelay: TimeInterval) {
    self.initialDelay = initialDelay
  }

  /// The wait before the next attempt; `retryAfter` (from a 429/503) wins when it is longer.
  package mutating func nextDelay(retryAfter: TimeInterval? = nil, random: Double = Double.random(in: 0..<1))
    -> TimeInterval
  {
    let base = min(maxDelay, initialDelay * pow(2, Double(attempt)))
    attempt += 1
    let delay = base + random * min(jitter, initialDelay)
    return max(delay, retryAfter ?? 0)
  }

  /// HTTP statuses that a retry may cure: 408, 429, 500, 502, 503 and 504, as Google's retry
  /// guidance for Cloud Storage and the JS SDK have them (the iOS SDK's fetcher leaves out 500,
  /// but GCS answers transient backend failures with it). 429 is retried after its Retry-After
  /// when the server gives one.
  package static func isRetryable(status: Int) -> Bool {
    status == 408 || status == 429 || status == 500 || status == 502 || status == 503 || status == 504
  }

  /// A broken connection, a stall (no byte for the stall timeout) or a host that cannot be
  /// reached may be cured by a new connection: the SDK retries network failures and timeouts
  /// within the retry time. (An unreachable host only within `Storage.unreachableRetryTime`.)
  package static func isRetryable(_ error: TransportError) -> Bool {
    error.kind == .connectionLost || error.kind == .timedOut || error.kind == .unreachable
  }

  /// `Retry-After` in seconds (the HTTP-date form is rare from storage servers and ignored).
  package static func retryAfter(_ head: HTTPResponseHead) -> TimeInterval? {
    // A server's number, kept to what a wait can be (NaN, infinities and 1e300 would trap later).
    head["retry-after"].flatMap { TimeInterval($0.trimmingCharacters(in: .whitespaces)) }.flatMap { $0.isFinite ? min(max($0, 0), 3600) : nil }
  }
}
