import Synchronization

/// A folder's listing while its pages arrive: readers (`readdir` of an open folder) take the
/// entries that are there and wait for more, so the first entries reach the kernel while the
/// server still sends the rest.
package final class ListingStream: Sendable {
  package enum Phase: Sendable {
    /// More pages are coming.
    case arriving
    case complete
    /// The server failed after this many entries were given (nothing more will come).
    case failed(BucketError)
  }

  private struct State {
    var entries: [DirectoryEntry] = []
    var phase = Phase.arriving
    /// Whether a page went through the builder (the first page was read).
    var started = false
    var waiters: [CheckedContinuation<Void, Never>] = []

    mutating func takeWaiters() -> [CheckedContinuation<Void, Never>] {
      defer { waiters = [] }
      return waiters
    }
  }

  private let state = Mutex(State())

  package init() {}

  /// The entries so far (all of them once complete) and whether more may come.
  package func snapshot() -> (entries: [DirectoryEntry], phase: Phase) {
    state.withLock { ($0.entries, $0.phase) }
  }

  /// Entries whose names are final, from one page.
  func append(_ more: [DirectoryEntry]) {
    let waiters = state.withLock { s -> [CheckedContinuation<Void, Never>] in
      s.entries.append(contentsOf: more)
      s.started = true
      return s.takeWaiters()
    }
    for w in waiters { w.resume() }
  }

  /// The last entries: the listing is whole. Returns every entry (for the folder's cache).
  func finish(_ last: [DirectoryEntry]) -> [DirectoryEntry] {
    let (entries, waiters) = state.withLock { s in
      s.entries.append(contentsOf: last)
      s.phase = .complete
      s.started = true
      return (s.entries, s.takeWaiters())
    }
    for w in waiters { w.resume() }
    return entries
  }

  func fail(_ error: BucketError) {
    let waiters = state.withLock { s in
      s.phase = .failed(error)
      return s.takeWaiters()
    }
    for w in waiters { w.resume() }
  }

  /// Returns once the first page was read, or the listing ended; throws what ended it when that
  /// was a failure before any page (the caller answers as for a listing that failed whole).
  func firstPage() async throws(BucketError) {
    while true {
      let (started, phase) = state.withLock { ($0.started, $0.phase) }
      if case .failed(let error) = phase, !started { throw error }
      if started { return }
      if case .failed = phase { return }
      if case .complete = phase { return }
      await changed(since: nil)
    }
  }

  /// Returns once there are more than `count` entries or the listing ended.
  package func more(than count: Int) async {
    while true {
      let waiting = state.withLock { s -> Bool in
        if case .arriving = s.phase { return s.entries.count <= count }
        return false
      }
      if !waiting { return }
      await changed(since: count)
    }
  }

  /// Waits for the next append, finish or failure (at once when it came meanwhile).
  private func changed(since count: Int?) async {
    await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
      let now = state.withLock { s -> Bool in
        guard case .arriving = s.phase else { return true }
        if let count, s.entries.count > count { return true }
        if count == nil && s.started { return true }
        s.waiters.append(c)
        return false
      }
      if now { c.resume() }
    }
  }
}
