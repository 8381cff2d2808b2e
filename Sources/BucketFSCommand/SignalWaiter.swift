import Dispatch
import Foundation

/// Blocks until SIGINT or SIGTERM arrives.
enum SignalWaiter {
  static func waitForTermination() {
    let semaphore = DispatchSemaphore(value: 0)
    let sources = [SIGINT, SIGTERM].map { sig -> DispatchSourceSignal in
      signal(sig, SIG_IGN)
      let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
      source.setEventHandler { semaphore.signal() }
      source.resume()
      return source
    }
    semaphore.wait()
    sources.forEach { $0.cancel() }
  }
}
