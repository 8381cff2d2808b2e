// Bytes of one transfer taken off the transfer thread. libcurl runs every transfer's callbacks
// on one thread; a callback that writes to a slow disk or a pipe nobody reads would hold up every
// other transfer. A hand-off copies the bytes to a queue of its own, whose thread writes them;
// when `limit` bytes wait, the transfer is paused (libcurl keeps what it has) until the consumer
// has caught up, so a slow consumer slows only its own transfer.
import Foundation
import Synchronization

package final class HandOff: @unchecked Sendable {
  package let limit: Int
  private let queue: DispatchQueue
  private let consume: @Sendable (UnsafeRawBufferPointer) -> Bool
  private struct State {
    var waiting = 0
    var failed = false
    var paused: HTTPTransfer?
    var transfer: HTTPTransfer?
  }
  private let state = Mutex(State())

  /// `consume` runs on the hand-off's own thread, in order; false stops the transfer.
  package init(limit: Int = 8 << 20, label: String, consume: @escaping @Sendable (UnsafeRawBufferPointer) -> Bool) {
    self.limit = limit
    self.queue = DispatchQueue(label: label)
    self.consume = consume
  }

  /// The transfer to resume after a pause (call from `stream`'s `started`).
  package func attach(_ transfer: HTTPTransfer) {
    state.withLock { $0.transfer = transfer }
  }

  /// True once the consumer refused bytes.
  package var failed: Bool { state.withLock { $0.failed } }

  /// For a flow handler, on the transfer thread: takes `bytes`, or pauses when too many wait.
  package func offer(_ bytes: UnsafeRawBufferPointer) -> HTTPTransfer.Flow {
    let verdict = state.withLock { s -> HTTPTransfer.Flow in
      if s.failed { return .stop }
      // Some bytes always go through, so a single chunk larger than the limit cannot wedge.
      if s.waiting > 0 && s.waiting + bytes.count > limit, s.transfer != nil {
        s.paused = s.transfer
        return .pause
      }
      s.waiting += bytes.count
      return .accept
    }
    guard verdict == .accept else { return verdict }
    let copy = Data(bytes)
    queue.async { [self] in
      let ok = copy.withUnsafeBytes { consume($0) }
      let resume = state.withLock { s -> HTTPTransfer? in
        s.waiting -= copy.count
        if !ok { s.failed = true }
        // Resumed at half the limit, so a transfer is not paused again for every chunk.
        guard s.waiting <= limit / 2 || !ok, let paused = s.paused else { return nil }
        s.paused = nil
        return paused
      }
      resume?.resumeReceiving()
    }
    return .accept
  }

  /// Waits until every byte taken so far has been consumed.
  package func drain() async {
    await withCheckedContinuation { (cont: CheckedContinuation<Void, Never>) in
      queue.async { cont.resume() }
    }
  }
}
