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
    return try await RetryBudget.run(storage, seconds: budget, object: object) { () async throws(StorageError) -> Attempt<HTTPResponse> in
      let (signed, token) = try await storage.authorize(request)
      switch await attempt(signed, timeouts: timeouts, maxBody: maxBody) {
      case .success(let response) where accepting.contains(response.status): return .done(response)
      case .success(let response): return .answered(response.head, body: response.body, token: token)
      case .failure(let error): return .broken(error)
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
