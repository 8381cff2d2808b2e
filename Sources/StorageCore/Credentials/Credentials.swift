// The one place that answers "which token now?" for every request. It refreshes ahead of expiry
// — five minutes before it, or halfway through the life of a token that lives less than ten
// minutes — with at most one refresh in flight however many requests wait, and it drops a
// token the server refused (401) so the next request gets a fresh one.
import Foundation
import Synchronization

package final class Credentials: Sendable {
  package let source: any CredentialSource

  struct State {
    var token: AccessToken?
    var fetchedAt: Date?
    var fetched = false
    var refresh: Task<Result<AccessToken?, StorageError>, Never>?
  }

  private let state = Mutex(State())
  private let clock: @Sendable () -> Date
  /// Tokens fetched from the source so far.
  package var refreshes: Int { refreshCount.load(ordering: .relaxed) }
  private let refreshCount = Atomic<Int>(0)

  package init(source: any CredentialSource, clock: @escaping @Sendable () -> Date = { Date() }) {
    self.source = source
    self.clock = clock
  }

  /// When `token`, fetched at `fetchedAt`, should be replaced.
  static func refreshTime(_ token: AccessToken, fetchedAt: Date) -> Date? {
    guard let expiry = token.expiry else { return nil }
    let lifetime = expiry.timeIntervalSince(fetchedAt)
    if lifetime < 600 { return fetchedAt.addingTimeInterval(max(0, lifetime) / 2) }
    return expiry.addingTimeInterval(-300)
  }

  /// The token for the next request (nil: send it without one).
  package func token() async throws(StorageError) -> AccessToken? {
    enum Next {
      /// The token in hand is still good (nil: anonymous).
      case current(AccessToken?)
      case refresh(Task<Result<AccessToken?, StorageError>, Never>)
    }
    let now = clock()
    let next: Next = state.withLock { s in
      if let refresh = s.refresh { return .refresh(refresh) }
      if s.fetched, !source.isVolatile {
        guard let token = s.token, let fetchedAt = s.fetchedAt else { return .current(nil) }
        let due = Self.refreshTime(token, fetchedAt: fetchedAt)
        if due == nil || now < due! { return .current(token) }
      }
      let source = self.source
      let task = Task { () -> Result<AccessToken?, StorageError> in
        do throws(StorageError) {
          return .success(try await source.fetchToken())
        } catch {
          return .failure(error)
        }
      }
      s.refresh = task
      return .refresh(task)
    }
    // Most requests find a token in hand: no task, no wait.
    let pending: Task<Result<AccessToken?, StorageError>, Never>
    switch next {
    case .current(let token): return token
    case .refresh(let task): pending = task
    }
    let result = await pending.value
    state.withLock { s in
      guard let refresh = s.refresh, refresh == pending else { return }
      s.refresh = nil
      if case .success(let token) = result {
        if token?.value != s.token?.value || !s.fetched { refreshCount.add(1, ordering: .relaxed) }
        s.token = token
        s.fetchedAt = now
        s.fetched = true
      }
    }
    return try result.get()
  }

  /// The server refused `token`: the next request fetches a new one.
  package func rejected(_ token: AccessToken?) {
    state.withLock { s in
      guard s.refresh == nil, s.token?.value == token?.value else { return }
      s.fetched = false
      s.token = nil
    }
  }
}
