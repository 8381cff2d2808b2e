import Foundation

/// Misbehaviour on demand, for tests: latency, error statuses, resets and stalls.
public struct Faults: Sendable {
  /// Added before every answer.
  public var latency: Duration = .zero
  /// Status answered instead of the real response to a fraction of requests.
  public var errorStatus: Int = 503
  public var errorFraction: Double = 0
  /// Seconds sent in `Retry-After` with injected 429/503 answers.
  public var retryAfter: Int? = nil
  /// Reset the connection after this many body bytes (of a download, or of an upload's request).
  public var resetAfterBytes: Int64? = nil
  /// Stop sending after this many body bytes of a download and hold the connection open.
  public var stallAfterBytes: Int64? = nil
  /// How many faults to inject before behaving again (nil = no limit).
  public var limit: Int? = nil
  /// Only requests whose target (path and query) contains this text are affected (nil = all).
  public var pathFilter: String? = nil
  /// A request whose target (path and query) contains this text is carried out, and then its
  /// connection is reset instead of answered: the client never learns that it succeeded
  /// (counts against `limit`).
  public var loseAnswerTo: String? = nil
  /// Requests (those `pathFilter` lets through) are held unanswered until the faults are set
  /// again or the server stops: a server that accepts connections and says nothing, for as long
  /// as a test needs, without guessing how long that is.
  public var hold = false
  /// Requests are served as if they had no `Range` header, as behind a proxy that drops it: a
  /// ranged or resumed download gets the whole object, 200. Every request, whatever `limit` and
  /// `pathFilter` say, so that it holds for the attempt after a counted fault.
  public var ignoreRange = false

  public init() {}

  public var isEmpty: Bool {
    latency == .zero && errorFraction == 0 && resetAfterBytes == nil && stallAfterBytes == nil && loseAnswerTo == nil && !hold && !ignoreRange
  }
}
