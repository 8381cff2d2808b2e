// How the queue's workers and waiters learn that something changed (a change queued, one carried
// out or refused, the server answering again) without polling: a new change wakes one waiter, an
// end wakes them all (it may free several changes, and waits for it). A waiter reads `epoch` before it
// looks at the queue and waits for a signal after that epoch, so a signal between the look and the
// wait is not lost.
import Synchronization

final class ChangeSignal: Sendable {
  private struct Waiter {
    var continuation: CheckedContinuation<Void, Never>
    var timer: Task<Void, Never>?
  }
  private struct State {
    var epoch: UInt64 = 0
    var waiters: [UInt64: Waiter] = [:]
    var nextID: UInt64 = 0
  }
  private let state = Mutex(State())

  var epoch: UInt64 { state.withLock { $0.epoch } }

  /// Wakes one waiter (the one waiting longest): there is one new thing to do.
  func signalOne() {
    let woken = state.withLock { s -> Waiter? in
      s.epoch &+= 1
      guard let first = s.waiters.keys.min() else { return nil }
      return s.waiters.removeValue(forKey: first)
    }
    woken?.timer?.cancel()
    woken?.continuation.resume()
  }

  /// Wakes every waiter.
  func signal() {
    let woken = state.withLock { s -> [Waiter] in
      s.epoch &+= 1
      defer { s.waiters.removeAll() }
      return Array(s.waiters.values)
    }
    for waiter in woken {
      waiter.timer?.cancel()
      waiter.continuation.resume()
    }
  }

  /// Returns once a signal came after `epoch` was read, or at `deadline` (nil: no deadline).
  func wait(after epoch: UInt64, until deadline: ContinuousClock.Instant?) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      let id = state.withLock { s -> UInt64? in
        guard s.epoch == epoch else { return nil }
        s.nextID += 1
        s.waiters[s.nextID] = Waiter(continuation: continuation)
        return s.nextID
      }
      guard let id else { return continuation.resume() }
      guard let deadline else { return }
      let timer = Task { [self] in
        try? await Task.sleep(until: deadline, clock: .continuous)
        if let expired = state.withLock({ $0.waiters.removeValue(forKey: id) }) { expired.continuation.resume() }
      }
      state.withLock { s in
        if s.waiters[id] != nil { s.waiters[id]!.timer = timer } else { timer.cancel() }
      }
    }
  }
}
