import Foundation

/// Sends one logical request with retries of retryable failures inside a time budget.
struct RequestRunner: Sendable {
  let storage: Storage
  let budget: TimeInterval
  let object: String

  /// Sends `request` until it succeeds (2xx), fails for good, or the budget runs out.
  func run(_ request: HTTPRequest, maxBody: Int = 64 << 20, accepting: Range<Int> = 200..<300) async throws(StorageError)
    -> HTTPResponse
  {
    let timeouts = storage.settings.withLock { $0.timeouts }
    var retries = RetryBudget(storage, seconds: budget)
    while true {
      var retryAfter: TimeInterval? = nil
      let failure: StorageError
      let (signed, token) = try await storage.authorize(request)
      switch await attempt(signed, timeouts: timeouts, maxBody: maxBody) {
      case .success(let response):
        if accepting.contains(response.status) { return response }
        // An expired or revoked token: fresh credentials, and one more try.
        if retries.refreshCredentials(after: response.status, token: token) { continue }
        let error = StorageError.from(status: response.status, object: object, body: response.body)
        guard Backoff.isRetryable(status: response.status) else { throw error }
        retryAfter = Backoff.retryAfter(response.head)
        failure = error
      case .failure(let error):
        guard Backoff.isRetryable(error) else { throw StorageError.from(transport: error, object: object) }
        failure = StorageError.from(transport: error, object: object)
      }
      try await retries.wait(after: failure, retryAfter: retryAfter)
      if Task.isCancelled {
        throw StorageError(code: .cancelled, object: object, detail: "cancelled")
      }
    }
  }

  private func attempt(_ request: HTTPRequest, timeouts: TransportTimeouts, maxBody: Int) async
    -> Result<HTTPResponse, TransportError>
  {
    do {
      return .success(try await storage.client.send(request, timeouts: timeouts, maxBody: maxBody))
    } catch {
      return .failure(error)
    }
  }
}
