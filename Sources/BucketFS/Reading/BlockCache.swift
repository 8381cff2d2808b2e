// Object bytes in memory, in fixed pages, with a hard byte budget and least-recently-used
// eviction, so the daemon's memory stays bounded whatever is read. Fetches are shared: a page
// that is already on its way is awaited, not fetched again.
import Foundation
import StorageCore
import Synchronization

package final class BlockCache: Sendable {
  /// The unit of caching and of alignment for random reads.
  package static let pageSize: Int64 = 128 * 1024

  package struct Key: Hashable, Sendable {
    package var name: String
    package var generation: Int64
    package var page: Int64
  }

  /// A ranged GET covering consecutive pages; readers of any of its pages wait for it.
  final class Run: Sendable {
    /// The run's pages in order, each its own buffer.
    typealias Outcome = Result<[Data], BucketError>
    let firstPage: Int64
    let state = Mutex<(result: Outcome?, waiters: [Waiter<[Data]>])>((nil, []))

    init(firstPage: Int64) { self.firstPage = firstPage }

    /// The run's outcome, or the deadline's timeout when it passes first.
    func wait(by deadline: ReadDeadline? = nil) async -> Outcome {
      await Waiter.wait(by: deadline) { waiter in
        state.withLock { s -> Outcome? in
          if let r = s.result { return r }
          s.waiters.append(waiter)
          return nil
        }
      }
    }

    func complete(_ result: Outcome) {
      let waiters = state.withLock { s -> [Waiter<[Data]>] in
        s.result = result
        let w = s.waiters
        s.waiters = []
        return w
      }
      for w in waiters { w.resume(result) }
    }
  }

  private struct State {
    var lru = LRUList<Key, Data>()
    var bytes = 0
    var inflight: [Key: Run] = [:]
    /// Bytes of runs on their way: they become cached pages, so prefetching counts them against
    /// the budget too.
    var inflightBytes = 0
    var evictions = 0
  }

  private let state = Mutex(State())
  package let budget: Int

  package init(budget: Int) {
    self.budget = max(budget, Int(Self.pageSize) * 8)
  }

  package var bytesCached: Int { state.withLock { $0.bytes } }
  package var evictions: Int { state.withLock { $0.evictions } }

  package func cached(_ key: Key) -> Data? {
    state.withLock { $0.lru.get(key) }
  }

  func insert(_ key: Key, _ data: Data) {
    state.withLock { s in
      if let old = s.lru.remove(key) { s.bytes -= old.count }
      s.lru.put(key, data)
      s.bytes += data.count
      // Runs on their way will be pages too: room is made for them now, so that cached and
      // arriving bytes together stay within the budget.
      while s.bytes + s.inflightBytes > budget, s.bytes > data.count, let (_, evicted) = s.lru.removeOldest() {
        s.bytes -= evicted.count
        s.evictions += 1
      }
    }
  }

  /// The run that will bring `key`, if one is in flight.
  func inflight(_ key: Key) -> Run? {
    state.withLock { $0.inflight[key] }
  }

  /// Registers a fetch of `pages` of an object unless each is cached or already in flight;
  /// returns the pages this call must fetch (a contiguous prefix of what was asked) and its run.
  /// A prefetch (`prefetch: true`) is refused while cached and in-flight bytes would pass the
  /// budget, so many readers at once cannot fill memory with read-ahead; the pages a read needs
  /// are always fetched.
  func claim(name: String, generation: Int64, pages: Range<Int64>, prefetch: Bool = false) -> (Range<Int64>, Run)? {
    state.withLock { s in
      guard let free = IndexRuns.first(in: Int(pages.lowerBound)..<Int(pages.upperBound), where: { page in
        let key = Key(name: name, generation: generation, page: Int64(page))
        return s.inflight[key] == nil && !s.lru.contains(key)
      }) else { return nil }
      let (first, end) = (Int64(free.lowerBound), Int64(free.upperBound))
      let bytes = Int(end - first) * Int(Self.pageSize)
      if prefetch && s.inflightBytes + bytes > budget / 2 { return nil }
      s.inflightBytes += bytes
      let run = Run(firstPage: first)
      for page in first..<end { s.inflight[Key(name: name, generation: generation, page: page)] = run }
      return (first..<end, run)
    }
  }

  /// Stores a finished run's pages and wakes its readers.
  func finish(_ run: Run, name: String, generation: Int64, pages: Range<Int64>, result: Run.Outcome) {
    // The run's bytes stop counting as arriving before they count as cached.
    state.withLock { $0.inflightBytes -= pages.count * Int(Self.pageSize) }
    if case .success(let data) = result {
      for (page, bytes) in zip(pages, data) { insert(Key(name: name, generation: generation, page: page), bytes) }
    }
    state.withLock { s in
      for page in pages { s.inflight.removeValue(forKey: Key(name: name, generation: generation, page: page)) }
    }
    run.complete(result)
  }

  // MARK: admission

  /// Bytes of GETs under way, and the GETs waiting to start: a GET holds its bytes in memory
  /// until its pages are cached, so at most a budget's worth are received at once, whoever
  /// asked (32 readers each asking for 1 MiB must not hold 32 MiB beside a 16 MiB cache).
  private let admission = Mutex<(admitted: Int, waiting: [(bytes: Int, cont: CheckedContinuation<Void, Never>)])>((0, []))

  /// Waits until `bytes` more may be received; one GET is always admitted when none runs.
  func admit(_ bytes: Int) async {
    await withCheckedContinuation { (cont: CheckedContinuation<Void, Never>) in
      let now = admission.withLock { a -> Bool in
        guard a.waiting.isEmpty, a.admitted == 0 || a.admitted + bytes <= budget else {
          a.waiting.append((bytes, cont))
          return false
        }
        a.admitted += bytes
        return true
      }
      if now { cont.resume() }
    }
  }

  /// Ends an admitted GET and starts those waiting that now fit, in order.
  func admitted(_ bytes: Int) {
    let ready = admission.withLock { a -> [CheckedContinuation<Void, Never>] in
      a.admitted -= bytes
      var ready: [CheckedContinuation<Void, Never>] = []
      while let next = a.waiting.first, a.admitted == 0 || a.admitted + next.bytes <= budget {
        a.waiting.removeFirst()
        a.admitted += next.bytes
        ready.append(next.cont)
      }
      return ready
    }
    ready.forEach { $0.resume() }
  }
}

/// A least-recently-used map: a dictionary into a doubly linked list kept in arrays.
struct LRUList<Key: Hashable, Value> {
  private var index: [Key: Int] = [:]
  private var keys: [Key?] = []
  private var values: [Value?] = []
  private var prev: [Int] = []
  private var next: [Int] = []
  private var free: [Int] = []
  private var head = -1  // most recent
  private var tail = -1  // least recent

  func contains(_ key: Key) -> Bool { index[key] != nil }

  mutating func get(_ key: Key) -> Value? {
    guard let i = index[key] else { return nil }
    unlink(i)
    pushFront(i)
    return values[i]
  }

  mutating func put(_ key: Key, _ value: Value) {
    if let i = index[key] {
      values[i] = value
      unlink(i)
      pushFront(i)
      return
    }
    let i: Int
    if let f = free.popLast() {
      i = f
      keys[i] = key
      values[i] = value
    } else {
      i = keys.count
      keys.append(key)
      values.append(value)
      prev.append(-1)
      next.append(-1)
    }
    index[key] = i
    pushFront(i)
  }

  @discardableResult
  mutating func remove(_ key: Key) -> Value? {
    guard let i = index.removeValue(forKey: key) else { return nil }
    unlink(i)
    let v = values[i]
    keys[i] = nil
    values[i] = nil
    free.append(i)
    return v
  }

  mutating func removeOldest() -> (Key, Value)? {
    guard tail >= 0, let key = keys[tail] else { return nil }
    guard let value = remove(key) else { return nil }
    return (key, value)
  }

  private mutating func unlink(_ i: Int) {
    if prev[i] >= 0 { next[prev[i]] = next[i] } else if head == i { head = next[i] }
    if next[i] >= 0 { prev[next[i]] = prev[i] } else if tail == i { tail = prev[i] }
    prev[i] = -1
    next[i] = -1
  }

  private mutating func pushFront(_ i: Int) {
    prev[i] = -1
    next[i] = head
    if head >= 0 { prev[head] = i }
    head = i
    if tail < 0 { tail = i }
  }
}
