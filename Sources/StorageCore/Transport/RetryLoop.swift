import Foundation

/// How one attempt of a retried operation ended, for `RetryBudget.run`.
enum Attempt<T> {
  case done(T)
  /// The server answered a status that is not a success (`body`: the start of its answer), to
  /// a request that carried `token`.
  case answered(HTTPResponseHead, body: Data, token: AccessToken?, progressed: Bool = false)
  /// The connection failed.
  case broken(TransportError, progressed: Bool = false)
  /// A failure that is worth another attempt whatever it is (a body cut short).
  case retry(StorageError, progressed: Bool = false)
}

extension RetryBudget {
  /// The one retry rule of every request loop: runs `attempt` until it is done, fails for good
  /// or the budget is spent. A 401 (a 403 near the token's end) gets fresh credentials and one
  /// more attempt at once; a retryable status (408, 429, 5xx but 501) or a broken, stalled or
  /// refused connection waits its backoff (`Retry-After` when the server sent one; none after
  /// an attempt that moved bytes); anything else is thrown as the server's or the transport's
  /// word. A cancelled task stops with `cancelled`. Each attempt handles what is special to
  /// its request (a 416 at the end, a generation that moved) before it answers.
  static func run<T>(
    _ storage: Storage, seconds: TimeInterval, object: String,
    _ attempt: () async throws(StorageError) -> Attempt<T>
  ) async throws(StorageError) -> T {
    var retries = RetryBudget(storage, seconds: seconds)
    while true {
      let failure: StorageError
      var retryAfter: TimeInterval? = nil
      let outcome = try await attempt()
      switch outcome {
      case .done(let value):
        return value
      case .answered(let head, let body, let token, _):
        if retries.refreshCredentials(after: head.status, token: token) { continue }
        failure = StorageError.from(status: head.status, object: object, body: body)
        guard Backoff.isRetryable(status: head.status) else { throw failure }
        retryAfter = Backoff.retryAfter(head)
      case .broken(let error, _):
        if error.kind == .cancelled || Task.isCancelled { throw StorageError(code: .cancelled, object: object, detail: "cancelled") }
        failure = StorageError.from(transport: error, object: object)
        guard Backoff.isRetryable(error) else { throw failure }
      case .retry(let error, _):
        failure = error
      }
      if outcome.progressed { retries.progressed() }
      try await retries.wait(after: failure, retryAfter: retryAfter)
      if Task.isCancelled { throw StorageError(code: .cancelled, object: object, detail: "cancelled") }
    }
  }
}

extension Attempt {
  /// Whether the attempt moved bytes: its retry then comes at once.
  var progressed: Bool {
    switch self {
    case .done: false
    case .answered(_, _, _, let moved), .broken(_, let moved), .retry(_, let moved): moved
    }
  }

  /// The same ending, marked as having moved bytes when `moved`.
  func markingProgress(_ moved: Bool) -> Attempt {
    guard moved else { return self }
    switch self {
    case .done: return self
    case .answered(let head, let body, let token, _): return .answered(head, body: body, token: token, progressed: true)
    case .broken(let error, _): return .broken(error, progressed: true)
    case .retry(let error, _): return .retry(error, progressed: true)
    }
  }
}
