import Foundation
import Synchronization

/// SIGINT, SIGTERM and SIGHUP for the long-running commands (serve, mount, cp). They are blocked in
/// every thread from the start (threads inherit the mask) and taken with sigwait(2) by one thread,
/// so a signal can never land on a thread that ignores it.
public enum SignalWaiter {
  static let signals: [Int32] = [SIGINT, SIGTERM, SIGHUP]

  private static var set: sigset_t {
    var set = sigset_t()
    sigemptyset(&set)
    for s in signals { sigaddset(&set, s) }
    return set
  }

  /// Call before any thread is started.
  public static func blockTerminationSignals() {
    var s = set
    pthread_sigmask(SIG_BLOCK, &s, nil)
  }

  /// Blocks until one of the signals arrives; returns it.
  @discardableResult
  static func waitForTermination() -> Int32 {
    var s = set
    var received: Int32 = 0
    while sigwait(&s, &received) != 0 {}
    return received
  }

  private static let received = Atomic<Int32>(0)

  /// The termination signal being handled, or 0: a command that ends because the handler
  /// cancelled its work exits with 128 + this, as a shell expects, not with "cancelled".
  public static var receivedSignal: Int32 { received.load(ordering: .acquiring) }

  /// Runs `handler` with the signal on a thread of its own when a termination signal arrives;
  /// `signal` (if given) runs `instead` each time and is waited past.
  static func onTermination(
    continuingOn other: Int32? = nil, _ instead: (@Sendable () -> Void)? = nil, _ handler: @escaping @Sendable (Int32) -> Void
  ) {
    let thread = Thread {
      var signal = waitForTermination()
      while signal == other, let instead {
        instead()
        signal = waitForTermination()
      }
      received.store(signal, ordering: .releasing)
      handler(signal)
    }
    thread.stackSize = 256 * 1024
    thread.start()
  }
}
