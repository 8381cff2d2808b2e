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

    var isArriving: Bool {
      if case .arriving = phase { return true }
      return false
    }

    mutating func takeWaiters() -> [CheckedContinuation<Void, Never>] {
      defer { waiters = [] }
      return waiters
    }
  }

  private let state = Mutex(State())

  package init() {}

  /// Up to `limit` entries from `offset` on (copied out: a reader that held the whole array
  /// would make the next page's append copy all of it), how many there are so far, and whether
  /// more may come.
  package func entries(from offset: Int, limit: Int) -> (entries: [DirectoryEntry], count: Int, phase: Phase) {
    state.withLock { s in
      let end = min(s.entries.count, offset + limit)
      return (offset < end ? Array(s.entries[offset..<end]) : [], s.entries.count, s.phase)
    }
  }

  /// Entries whose names are final, from one page.
  func append(_ more: [DirectoryEntry]) {
    update { s in
      s.entries.append(contentsOf: more)
      s.started = true
    }
  }

  /// The last entries: the listing is whole (`complete` tells the readers). Returns every entry
  /// (for the folder's cache).
  func finish(_ last: [DirectoryEntry]) -> [DirectoryEntry] {
    update { s in
      let total = s.entries.count + last.count
      let stride = MemoryLayout<DirectoryEntry>.stride
      if total * stride < 4 << 20 && (s.entries.capacity < total || (s.entries.capacity - total) * stride > 16 << 10) {
        // Kept as long as the listing is: a folder of 1,000 kept in room for 2,000 (an array
        // grown by doubling for the last few entries) would hold half again as much. Arrays
        // past the daemon's mmap threshold (4 MiB) hold no memory in the room they do not use.
        var exact: [DirectoryEntry] = []
        exact.reserveCapacity(total)
        exact.append(contentsOf: s.entries)
        s.entries = exact
      }
      s.entries.append(contentsOf: last)
      s.started = true
      return s.entries
    }
  }

  /// Nothing more will come: readers past the last entry are at the end. Said only once the
  /// listing is kept, so that a program that has read the folder to its end finds every name
  /// it did not see answered missing by the kept listing, with no request.
  func complete() {
    update { s in
      s.phase = .complete
      s.started = true
    }
  }

  func fail(_ error: BucketError) { update { $0.phase = .failed(error) } }

  /// Whether a page went through (readers may have been shown entries).
  var hasStarted: Bool { state.withLock { $0.started } }

  /// The server failed after some pages: the listing ends with `pending` (entries of those
  /// pages not given yet), then the entries of `last` (the folder's last listing) that sort
  /// after every name given, in the server's order (bytes, a folder's with its "/"). Readers
  /// see one listing, each name once, fresh up to where the pages reached.
  func endFromLast(_ pending: [DirectoryEntry], _ last: [DirectoryEntry]) {
    update { s in
      s.entries.append(contentsOf: pending)
      let given = Set(s.entries.map(Self.key))
      let reached = given.max { $0.lexicographicallyPrecedes($1) } ?? []
      s.entries.append(contentsOf: last.filter { let k = Self.key($0); return !given.contains(k) && reached.lexicographicallyPrecedes(k) })
      s.phase = .complete
      s.started = true
    }
  }

  private static func key(_ e: DirectoryEntry) -> [UInt8] { Array((e.isDirectory ? e.name + "/" : e.name).utf8) }

  /// Returns once the first page was read, or the listing ended; throws what ended it when that
  /// was a failure before any page (the caller answers as for a listing that failed whole).
  func firstPage() async throws(BucketError) {
    await wait { $0.started || !$0.isArriving }
    let (phase, started) = state.withLock { ($0.phase, $0.started) }
    if case .failed(let error) = phase, !started { throw error }
  }

  /// Returns once there are more than `count` entries or the listing ended.
  package func more(than count: Int) async {
    await wait { $0.entries.count > count || !$0.isArriving }
  }

  /// Changes the state and wakes every reader waiting on it.
  private func update<T>(_ change: (inout State) -> T) -> T {
    let (result, waiters) = state.withLock { s in (change(&s), s.takeWaiters()) }
    for w in waiters { w.resume() }
    return result
  }

  /// Returns once `ready` holds, checked now and at every change.
  private func wait(until ready: (State) -> Bool) async {
    while true {
      var isReady = false
      await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
        isReady = state.withLock { s in
          if ready(s) { return true }
          s.waiters.append(c)
          return false
        }
        if isReady { c.resume() }
      }
      if isReady { return }
    }
  }
}
