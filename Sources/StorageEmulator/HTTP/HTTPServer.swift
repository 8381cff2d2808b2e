// A small HTTP/1.1 server on POSIX sockets: one thread accepts, one thread serves each connection
// (keep-alive, many connections at once). Enough for a local emulator, and simple to reason about.
// It stays up and bounded whatever clients do: connections are capped below the descriptor limit
// (the longest-idle one makes room for a newcomer), idle and slow clients time out, and running
// out of descriptors makes the accept loop back off rather than end.
import Foundation
import ListeningSocket
import Synchronization

final class HTTPServer: @unchecked Sendable {
  typealias Handler = @Sendable (inout ServerRequest) -> ServerResponse

  let listenFD: Int32
  let port: Int
  let host: String
  private let handler: Handler
  let faults: Mutex<Faults>
  private let faultCounter = Mutex<(seen: Int, injected: Int)>((0, 0))
  /// Requests held by `Faults.hold`, and how many times the faults have changed: a request
  /// that read faults already replaced is not held.
  private let held = Mutex<(changes: Int, waiting: [DispatchSemaphore])>((0, []))
  let connections = ConnectionTable()
  let limits: ConnectionLimits
  private let maxConnections: Int
  private let stopped = Atomic<Bool>(false)
  /// Requests answered so far (tests use it to count round trips).
  let requestsServed = Atomic<Int>(0)
  let connectionsAccepted = Atomic<Int>(0)
  /// Response body bytes written so far.
  let bodyBytesSent = Atomic<Int>(0)
  /// Request body bytes taken so far (uploads).
  let bodyBytesReceived = Atomic<Int>(0)

  enum StartError: Error, CustomStringConvertible {
    case socket(String)
    var description: String {
      switch self { case .socket(let s): return s }
    }
  }

  init(host: String, port: Int, faults: Faults, limits: ConnectionLimits, handler: @escaping Handler) throws {
    self.limits = limits
    self.maxConnections = limits.effectiveMaxConnections
    // sendfile(2) has no MSG_NOSIGNAL: a client that hangs up must not kill the process.
    signal(SIGPIPE, SIG_IGN)
    self.handler = handler
    self.host = host
    self.faults = Mutex(faults)
    let (fd, boundPort): (Int32, Int)
    do throws(ListeningSocket.Failure) {
      (fd, boundPort) = try ListeningSocket.open(host: host, port: port, backlog: 512)
    } catch {
      switch error {
      case .notNumeric(let host): throw StartError.socket("cannot use address \(host): expected a numeric IP such as 127.0.0.1")
      case .refused(let reason): throw StartError.socket("cannot listen on \(host):\(port): \(reason)")
      }
    }
    self.listenFD = fd
    self.port = boundPort
  }

  func start() {
    let thread = Thread { [self] in acceptLoop() }
    thread.name = "emulator-accept"
    thread.start()
  }

  func stop() {
    guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
    shutdown(listenFD, Int32(SHUT_RDWR))
    close(listenFD)
    releaseHeld()
    connections.shutdownAll()
  }

  private func acceptLoop() {
    while !stopped.load(ordering: .acquiring) {
      let fd = accept(listenFD, nil, nil)
      if fd < 0 {
        if stopped.load(ordering: .acquiring) { return }
        switch errno {
        case EINTR, ECONNABORTED:
          continue
        case EMFILE, ENFILE, ENOBUFS, ENOMEM:
          // Out of descriptors or memory: make room if a connection is idle, then wait for
          // descriptors to come back instead of giving up on accepting.
          _ = connections.closeLongestIdle()
          Thread.sleep(forTimeInterval: 0.05)
          continue
        default:
          Thread.sleep(forTimeInterval: 0.01)
          continue
        }
      }
      connectionsAccepted.add(1, ordering: .relaxed)
      if connections.count >= maxConnections && !connections.closeLongestIdle() {
        // Full of busy connections: say so rather than queue without bound.
        refuse(fd)
        continue
      }
      var one: Int32 = 1
      setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
      var sendLimit = timeval(tv_sec: Int(limits.stallTimeout.components.seconds), tv_usec: 0)
      setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &sendLimit, socklen_t(MemoryLayout<timeval>.size))
      connections.add(fd)
      let thread = Thread { [self] in
        HTTPConnection(fd: fd, server: self).serve()
        connections.remove(fd)
        close(fd)
      }
      thread.stackSize = 512 << 10
      thread.start()
    }
  }

  private func refuse(_ fd: Int32) {
    let answer = "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    _ = answer.withCString { send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
    close(fd)
  }

  /// Faults applied since the faults were last set, as `Faults.limit` counts them.
  var faultsInjected: Int { faultCounter.withLock { $0.injected } }

  /// Counts a reset or stall that was applied, toward `Faults.limit`.
  func noteInjected() {
    faultCounter.withLock { $0.injected += 1 }
  }

  var isStopped: Bool { stopped.load(ordering: .acquiring) }

  func handle(_ request: inout ServerRequest) -> ServerResponse {
    requestsServed.add(1, ordering: .relaxed)
    return handler(&request)
  }

  /// New faults, counted from now (`Faults.limit`).
  func setFaults(_ new: Faults) {
    faults.withLock { $0 = new }
    faultCounter.withLock { $0 = (0, 0) }
    releaseHeld()
  }

  /// How many times the faults have changed; read before the faults a request goes by.
  var faultChanges: Int { held.withLock { $0.changes } }

  /// Holds the calling connection until the faults change after `changes` (or the server stops).
  func hold(since changes: Int) {
    let release = DispatchSemaphore(value: 0)
    let waits = held.withLock { h -> Bool in
      guard h.changes == changes else { return false }
      h.waiting.append(release)
      return true
    }
    if waits { release.wait() }
  }

  private func releaseHeld() {
    let waiting = held.withLock { h -> [DispatchSemaphore] in
      h.changes += 1
      defer { h.waiting.removeAll() }
      return h.waiting
    }
    waiting.forEach { $0.signal() }
  }

  /// Whether requests are served without their Range (`Faults.ignoreRange`).
  var ignoresRange: Bool { faults.withLock { $0.ignoreRange } }

  /// True when the answer to the request for `target` is to be lost (see `Faults.loseAnswerTo`).
  func losesAnswer(target: String) -> Bool {
    let f = faults.withLock { $0 }
    guard let text = f.loseAnswerTo, target.contains(text) else { return false }
    return faultCounter.withLock { counter -> Bool in
      if let limit = f.limit, counter.injected >= limit { return false }
      counter.injected += 1
      return true
    }
  }

  /// Decides which fault (if any) this request gets.
  func faultPlan(path: String) -> Faults? {
    let f = faults.withLock { $0 }
    if f.isEmpty { return nil }
    if let filter = f.pathFilter, !path.contains(filter) { return nil }
    return faultCounter.withLock { counter -> Faults? in
      if let limit = f.limit, counter.injected >= limit { return nil }
      counter.seen += 1
      var plan = f
      if f.errorFraction > 0 && !FaultSpread.fails(request: counter.seen, fraction: f.errorFraction) { plan.errorFraction = 0 }
      if plan.errorFraction > 0 { counter.injected += 1 }
      return plan
    }
  }
}
