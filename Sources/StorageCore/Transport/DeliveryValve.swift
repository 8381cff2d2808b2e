// How a consumer that cannot take bytes now says when it can again. A delivery handler that
// answers `.pause` leaves the bytes with libcurl (only that transfer waits; the transfer thread
// goes on with the others); whoever frees room opens the valve, from any thread.
import Synchronization

package final class DeliveryValve: Sendable {
  private struct State {
    /// Weak: the transfer holds the consumer, which holds this valve.
    weak var transfer: HTTPTransfer?
    /// Opened while nobody waited (a delivery without a transfer reads it on its next wait).
    var opened = false
    var waiter: CheckedContinuation<Void, Never>?
  }
  private let state = Mutex(State())

  package init() {}

  /// The transfer now delivering (a resumed read starts a new one). An opening that found no
  /// transfer is passed on to it, so that it cannot be lost.
  func attach(_ transfer: HTTPTransfer) {
    let pending = state.withLock { s -> Bool in
      s.transfer = transfer
      defer { s.opened = false }
      return s.opened
    }
    if pending { transfer.resumeReceiving() }
  }

  /// Lets a paused delivery go on.
  package func open() {
    let (transfer, waiter) = state.withLock { s -> (HTTPTransfer?, CheckedContinuation<Void, Never>?) in
      let w = s.waiter
      s.waiter = nil
      if w == nil { s.opened = true }
      return (s.transfer, w)
    }
    transfer?.resumeReceiving()
    waiter?.resume()
  }

  /// For deliveries that hold their bytes themselves (no transfer): waits until opened.
  package func waitUntilOpened() async {
    await withCheckedContinuation { (cont: CheckedContinuation<Void, Never>) in
      let now = state.withLock { s -> Bool in
        if s.opened {
          s.opened = false
          return true
        }
        s.waiter = cont
        return false
      }
      if now { cont.resume() }
    }
  }
}
