// How many changes the queue carries out at once: as many as keep the server busy, no more.
// A bucket far away needs many at once to cover its round trips (20 ms away, one at a time
// would take minutes for a folder of small files). A server on this machine answers a small
// change in a millisecond or two: there, more than a few at once add no throughput, only wait
// in its queue and ours, and take the CPU from the programs writing into the mount (an untar on
// two cores returned in 2.2 s with sixteen uploads at once and in 1.2 s with two, landing about
// as soon). So the limit follows the delay the changes add to each other, as TCP Vegas follows
// a link's: each change whose time is a round trip's more than its payload's (a small upload, a
// delete, a metadata change) is compared with the fastest one lately. Longer by more than that
// fastest time (they wait behind each other, not for the server): the limit comes down by a
// quarter; once as many as the limit went by without that, it goes up by one. Only a server
// nearby (its fastest change under 5 ms) is paced so: one across a network keeps all sixteen,
// since its times vary with the network whatever we send, and it shares no CPU with us.
import Foundation
import Synchronization

final class ChangeConcurrency: Sendable {
  static let most = 16
  static let least = 2
  /// Changes up to this size take about a round trip.
  static let smallUpload: Int64 = 256 << 10
  /// Samples over which the fastest time is taken: a server that got slower for good is seen
  /// as it is within this many changes.
  static let window = 128
  /// A server whose fastest change takes less than this is on this machine or next to it.
  static let nearby = 0.005

  private struct State {
    /// As many as ever until the server's times say otherwise: a mount that sends only large
    /// files (no round-trip times) keeps them all going.
    var limit = ChangeConcurrency.most
    var running = 0
    /// The fastest time of the last full window, and of the window so far.
    var fastest: Double?
    var fastestNow: Double?
    var samples = 0
    /// The recent times, smoothed.
    var recent: Double?
    /// Changes without delay since the limit last moved.
    var credit = 0
  }
  private let state = Mutex(State())

  var limit: Int { state.withLock { $0.limit } }

  /// Takes a place for one more change: false when as many as the limit are running.
  func mayStart() -> Bool {
    state.withLock { s in
      guard s.running < s.limit else { return false }
      s.running += 1
      return true
    }
  }

  /// A change ended, or none was there to take: its place is free.
  func ended() { state.withLock { $0.running = max(0, $0.running - 1) } }

  /// A change carried out in `time`, which is a round trip's (`isSmall`).
  func took(_ time: Duration) {
    let seconds = time / .seconds(1)
    state.withLock { s in
      s.fastestNow = min(s.fastestNow ?? seconds, seconds)
      s.fastest = min(s.fastest ?? seconds, seconds)
      s.samples += 1
      if s.samples >= Self.window {
        s.fastest = s.fastestNow
        s.fastestNow = nil
        s.samples = 0
      }
      let recent = s.recent.map { 0.8 * $0 + 0.2 * seconds } ?? seconds
      s.recent = recent
      guard let fastest = s.fastest else { return }
      // A server across a network (its fastest change takes 5 ms or more): its times vary with
      // the network, not with how many go at once (a real bucket's small uploads take anything
      // from 50 to 300 ms), and all of them at once are what cover its round trips.
      guard fastest < Self.nearby else {
        s.limit = Self.most
        return
      }
      // Waiting behind each other rather than for the server: longer than the fastest by more
      // than that fastest time (and 2 ms, a loaded machine's scheduling).
      if recent - fastest > max(fastest, 0.002) {
        s.limit = max(Self.least, min(s.limit - 1, s.limit * 3 / 4))
        s.credit = 0
      } else {
        // One more once as many changes as the limit went by without waiting (TCP's additive
        // increase, a step per round trip).
        s.credit += 1
        if s.credit >= s.limit {
          s.limit = min(Self.most, s.limit + 1)
          s.credit = 0
        }
      }
    }
  }

  /// Whether `change`'s time is about a round trip (a server-side copy's is the object's size).
  static func isSmall(_ change: PendingChange) -> Bool {
    switch change.kind {
    case .upload: (change.dataSize ?? 0) <= smallUpload
    case .copy: false
    default: true
    }
  }
}
