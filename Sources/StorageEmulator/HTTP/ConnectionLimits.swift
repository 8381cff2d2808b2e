import Foundation

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
final class ConnectionTable: @unchecked Sendable {
  private struct Entry {
    var idleSince: ContinuousClock.Instant?
  }

  private let lock = NSLock()
  private var entries: [Int32: Entry] = [:]

  var count: Int { lock.withLock { entries.count } }

  /// A new connection is idle until its first request line arrives.
  func add(_ fd: Int32) { lock.withLock { entries[fd] = Entry(idleSince: .now) } }

  func remove(_ fd: Int32) { lock.withLock { _ = entries.removeValue(forKey: fd) } }

  func setIdle(_ fd: Int32, _ idle: Bool) {
    lock.withLock { entries[fd]?.idleSince = idle ? .now : nil }
  }

  /// Shuts down the connection idle the longest; false when none is idle. Its thread sees the
  /// end of the stream and closes the descriptor.
  func closeLongestIdle() -> Bool {
    lock.withLock {
      guard let (fd, _) = entries.filter({ $0.value.idleSince != nil }).min(by: { $0.value.idleSince! < $1.value.idleSince! })
      else { return false }
      entries[fd]?.idleSince = nil
      shutdown(fd, Int32(SHUT_RDWR))
      return true
    }
  }

  func shutdownAll() {
    lock.withLock {
      for fd in entries.keys { shutdown(fd, Int32(SHUT_RDWR)) }
    }
  }
}
