import Foundation
import Synchronization

/// How long and how many: the server's bounds, so that idle clients, slow clients and floods cost
/// it a fixed amount of memory and descriptors.
public struct ConnectionLimits: Sendable {
  /// A keep-alive connection with no request for this long is closed.
  public var idleTimeout: Duration = .seconds(60)
  /// The headers of a request must be complete this long after its request line (slowloris).
  public var headerTimeout: Duration = .seconds(10)
  /// A request body or a response that makes no progress for this long ends the connection.
  public var stallTimeout: Duration = .seconds(60)
  /// Connections served at once (a thread each). When full, the longest-idle connection is
  /// closed to make room; when none is idle, the newcomer gets 503. Also kept 64 below the
  /// process's descriptor limit.
  public var maxConnections: Int = 1000

  public init() {}

  /// `maxConnections`, lowered to leave descriptors for files and the listening socket.
  var effectiveMaxConnections: Int {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur != rlim_t.max, limit.rlim_cur < 1 << 30 else {
      return maxConnections
    }
    return max(8, min(maxConnections, Int(limit.rlim_cur) - 64))
  }
}

/// The open connections and which of them are idle (waiting for their next request).
final class ConnectionTable: Sendable {
  /// Since when each connection has waited for its next request (nil: it is serving one).
  private let idleSince = Mutex<[Int32: ContinuousClock.Instant?]>([:])

  var count: Int { idleSince.withLock { $0.count } }

  /// A new connection is idle until its first request line arrives.
  func add(_ fd: Int32) { idleSince.withLock { $0[fd] = .some(.now) } }

  func remove(_ fd: Int32) { _ = idleSince.withLock { $0.removeValue(forKey: fd) } }

  func setIdle(_ fd: Int32, _ idle: Bool) {
    idleSince.withLock { table in
      if table[fd] != nil { table[fd] = .some(idle ? .now : nil) }
    }
  }

  /// Shuts down the connection idle the longest; false when none is idle. Its thread sees the
  /// end of the stream and closes the descriptor. The shutdown is made under the lock (it does
  /// not wait): the connection's thread removes its entry before it closes the descriptor, so a
  /// number shut down here cannot have been reused by a newer connection meanwhile.
  func closeLongestIdle() -> Bool {
    idleSince.withLock { table in
      guard let (fd, _) = table.compactMap({ fd, since in since.map { (fd, $0) } }).min(by: { $0.1 < $1.1 }) else { return false }
      table[fd] = .some(nil)
      shutdown(fd, Int32(SHUT_RDWR))
      return true
    }
  }

  func shutdownAll() {
    idleSince.withLock { table in
      for fd in table.keys { shutdown(fd, Int32(SHUT_RDWR)) }
    }
  }
}
