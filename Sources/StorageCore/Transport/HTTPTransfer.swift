import Foundation
import Synchronization

/// One request in flight: its callbacks run on the transfer thread and must not block for long.
package final class HTTPTransfer: @unchecked Sendable {
  package typealias HeadHandler = @Sendable (HTTPResponseHead) -> Bool
  package typealias DataHandler = @Sendable (UnsafeRawBufferPointer) -> Bool
  /// What a handler that may not take bytes at once does with them.
  package enum Flow: Sendable {
    case accept
    case stop
    /// Not taken now: libcurl keeps them and hands them over again after `resumeReceiving()`.
    case pause
  }
  package typealias FlowHandler = @Sendable (UnsafeRawBufferPointer) -> Flow
  package typealias CompletionHandler = @Sendable (Result<HTTPResponseHead, TransportError>) -> Void

  let request: HTTPRequest
  let timeouts: TransportTimeouts
  let onHead: HeadHandler
  let onData: FlowHandler
  let onComplete: CompletionHandler

  // Guarded by the transfer thread: these are touched only by libcurl callbacks and the loop.
  var statusLine: Int = 0
  var headerLines: [String: String] = [:]
  var headDelivered = false
  var abortedByHandler = false
  var bodyFile: UploadReader?
  var bodyOffset: Int64 = 0
  var localError: String?
  /// When a byte last moved either way (or the transfer started).
  var lastProgress = ContinuousClock.now
  /// Set when the loop ended the transfer for moving nothing for the stall timeout.
  var stalled = false
  /// Set when the data handler paused the transfer; the loop resumes it once asked.
  var pausedByHandler = false
  /// When the loop first saw the current pause.
  var pausedAt: ContinuousClock.Instant?
  let resumeRequested = Atomic<Bool>(false)

  let cancelled = Atomic<Bool>(false)
  weak var client: HTTPClient?

  init(
    request: HTTPRequest, timeouts: TransportTimeouts, onHead: @escaping HeadHandler,
    onData: @escaping FlowHandler, onComplete: @escaping CompletionHandler
  ) {
    self.request = request
    self.timeouts = timeouts
    self.onHead = onHead
    self.onData = onData
    self.onComplete = onComplete
  }

  /// Lets a transfer paused by its data handler go on (from any thread).
  package func resumeReceiving() {
    resumeRequested.store(true, ordering: .releasing)
    client?.wake()
  }

  /// Stops the transfer; its completion reports `.cancelled`.
  package func cancel() {
    if cancelled.exchange(true, ordering: .acquiringAndReleasing) { return }
    client?.wake()
  }

  var head: HTTPResponseHead { HTTPResponseHead(status: statusLine, headers: headerLines) }
}
