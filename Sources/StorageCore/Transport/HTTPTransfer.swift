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

  /// Why this side ended a transfer before libcurl did; the first reason stands.
  enum Ending: Equatable {
    /// A handler refused the head or the bytes.
    case refusedByHandler
    /// The loop ended it for moving nothing for the stall timeout.
    case stalled
    /// The body to send could not be read.
    case localFailure(String)
  }

  /// Whether a handler has libcurl holding the transfer.
  enum Pause: Equatable {
    case running
    /// Paused for a slow consumer (or a body not ready); `since` is when the loop first saw it.
    case paused(since: ContinuousClock.Instant?)
  }

  // Guarded by the transfer thread: these are touched only by libcurl callbacks and the loop.
  var statusLine: Int = 0
  var headerLines: [String: String] = [:]
  var headDelivered = false
  var bodyFile: UploadReader?
  var bodyOffset: Int64 = 0
  /// When a byte last moved either way (or the transfer started).
  var lastProgress = ContinuousClock.now
  private(set) var ending: Ending?
  var pause = Pause.running

  func end(_ why: Ending) {
    if ending == nil { ending = why }
  }

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
