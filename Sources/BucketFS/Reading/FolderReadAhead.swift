// Read-ahead across the files of a folder. A process that opens a folder's files one after
// another in listing order (cp -r, tar c, cat *, grep -r, sha256sum *) would wait a round trip
// per file while the network idles. Once two opens in a row follow the listing, the next small
// files are fetched whole into the block cache before they are opened: a few at first, more as
// the run goes on, a few GETs at a time, and only within the cache's prefetch budget. An open
// out of order ends the run.
import Foundation
import StorageCore
import Synchronization

final class FolderReadAhead: Sendable {
  /// Entries ahead of the last open at most.
  static let maxAhead = 64
  /// GETs of read-ahead in flight at once, across folders.
  static let concurrency = 16

  private struct Run {
    var lastIndex: Int
    var length: Int
    /// The last entry already handed out for fetching.
    var fetchedThrough: Int
    var tick: UInt64
  }
  private struct State {
    var runs: [ObjectName: Run] = [:]
    var tick: UInt64 = 0
  }
  private let state = Mutex(State())

  /// Records that entry `index` (of `count`) of folder `dir` was opened; returns the entries
  /// to fetch now (empty unless the opens follow the listing).
  func opened(dir: String, index: Int, count: Int) -> Range<Int> {
    state.withLock { s in
      s.tick += 1
      var run = s.runs[ObjectName(dir)] ?? Run(lastIndex: -2, length: 0, fetchedThrough: -1, tick: 0)
      if index == run.lastIndex + 1 {
        run.length += 1
      } else if index != run.lastIndex {
        run = Run(lastIndex: index, length: 1, fetchedThrough: index, tick: 0)
      }
      run.lastIndex = index
      run.tick = s.tick
      defer {
        s.runs[ObjectName(dir)] = run
        // Folders read long ago are forgotten.
        if s.runs.count > 64, let oldest = s.runs.min(by: { $0.value.tick < $1.value.tick })?.key { s.runs[oldest] = nil }
      }
      guard run.length >= 2 else { return index..<index }
      // 4, 8, 16, 32, then 64 entries ahead as the run grows.
      let ahead = min(Self.maxAhead, 4 << min(run.length - 2, 4))
      let from = max(run.fetchedThrough + 1, index + 1)
      let to = min(count, index + 1 + ahead)
      guard from < to else { return index..<index }
      run.fetchedThrough = to - 1
      return from..<to
    }
  }
}

/// A few slots for read-ahead GETs: a task waits (suspended, not spinning) for a free one.
final class ReadAheadSlots: Sendable {
  private let state: Mutex<(free: Int, waiters: [CheckedContinuation<Void, Never>])>

  init(_ count: Int) { state = Mutex((count, [])) }

  func acquire() async {
    await withCheckedContinuation { (cont: CheckedContinuation<Void, Never>) in
      let now = state.withLock { s -> Bool in
        guard s.free > 0 else {
          s.waiters.append(cont)
          return false
        }
        s.free -= 1
        return true
      }
      if now { cont.resume() }
    }
  }

  func release() {
    let next = state.withLock { s -> CheckedContinuation<Void, Never>? in
      guard !s.waiters.isEmpty else {
        s.free += 1
        return nil
      }
      return s.waiters.removeFirst()
    }
    next?.resume()
  }
}
