// Watches the transfer loop from outside it: a loop that is stuck cannot report itself. When a
// turn has taken longer than a second the log says so once, and again when the loop turns
// again, so that a stuck mount shows before its users notice.
import BucketFS
import Foundation
import StorageCore

final class TransferWatchdog: @unchecked Sendable {
  static let threshold = 1.0
  private let timer: DispatchSourceTimer
  // Touched only on the timer's queue.
  private var stuckSince: Double?

  init(client: HTTPClient, metrics: Metrics, log: @escaping @Sendable (String) -> Void) {
    timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "bucketfs.watchdog"))
    timer.schedule(deadline: .now() + 0.25, repeating: 0.25)
    timer.setEventHandler { [unowned self] in
      let age = client.secondsSinceLastTurn
      if age > Self.threshold, stuckSince == nil {
        stuckSince = age
        metrics.transferLoopStalls.add(1, ordering: .relaxed)
        log("the transfer loop has not turned for \(String(format: "%.1f", age)) s: every request of this mount waits")
      } else if age <= Self.threshold, stuckSince != nil {
        stuckSince = nil
        log("the transfer loop turns again")
      }
    }
    timer.resume()
  }

  func stop() { timer.cancel() }
}
