// Objects whose reads just ran out of time. The kernel retries a failed readahead page by page,
// and it shares one page cache among every reader of a file: a read(2) that waits for pages
// another reader's request holds, and then asks for them itself, would wait a second
// read_timeout. So for a moment after a read of an object timed out, further reads of that
// version that need the server fail at once, through any handle that was open then; a handle
// opened afterwards (a new `cat`) asks the server again.
import Foundation
import StorageCore
import Synchronization

final class RecentTimeouts: Sendable {
  private let failures = Mutex<[ObjectName: ContinuousClock.Instant]>([:])
  let echo: Duration

  init(echo: Duration) { self.echo = echo }

  /// By the name's bytes: NFC and NFD "café" are two objects, and a timeout of one is not the other's.
  private static func key(_ name: String, _ generation: Int64) -> ObjectName { ObjectName(name + "\u{0}" + String(generation)) }

  func timedOut(_ name: String, generation: Int64) {
    let now = ContinuousClock.now
    failures.withLock { f in
      f = f.filter { now - $0.value < echo }
      f[Self.key(name, generation)] = now
    }
  }

  /// Whether a read of this version ran out of time less than `echo` ago, after `opened`.
  func isFresh(_ name: String, generation: Int64, openedAt opened: ContinuousClock.Instant) -> Bool {
    guard let failed = failures.withLock({ $0[Self.key(name, generation)] }) else { return false }
    return failed > opened && ContinuousClock.now - failed < echo
  }
}
