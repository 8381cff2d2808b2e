@testable import BucketFS
import Foundation
import Testing

/// `EditPhase` against the flags it replaced (`dirty`, `gone`, `queued`, `failedWrite`,
/// `fsynced`, as `LocalEdits.Edit` kept them), event by event over random sequences: every
/// question the mount asks of an edit gets the same answer, and the rules of the contract hold
/// at every step.
@Suite struct EditPhaseTests {
  /// The flags, with the rules the code applied to them spelled out.
  struct Flags {
    var dirty: Bool
    var gone = false
    var queued: UInt64? = nil
    var failedWrite: Int32? = nil
    var fsynced = false

    var isChanged: Bool { dirty && !gone && failedWrite == nil }
    var withdrawable: UInt64? { failedWrite != nil && !gone && !fsynced ? queued : nil }

    mutating func take() -> Bool {
      guard dirty, !gone, failedWrite == nil else { return false }
      dirty = false
      return true
    }
  }

  enum Event: CaseIterable {
    case change, take, untake, queue, fsync, fail, unlink
  }

  @Test func randomEventsAnswerAsTheFlagsDid() {
    var rng = SystemRandomNumberGenerator()
    var checked = 0
    for run in 0..<2_000 {
      let startsChanged = run % 2 == 0
      var phase = EditPhase.open(changed: startsChanged)
      var flags = Flags(dirty: startsChanged)
      var next: UInt64 = 1
      var took = false
      var trail: [Event] = []
      for _ in 0..<Int.random(in: 1...30, using: &rng) {
        let event = Event.allCases.randomElement(using: &rng)!
        trail.append(event)
        switch event {
        case .change:
          phase.change()
          if !flags.gone && flags.failedWrite == nil { flags.dirty = true }
        case .take:
          took = phase.take()
          let flagsTook = flags.take()
          #expect(took == flagsTook, "run \(run): \(trail)")
        case .untake:
          // Only what a take took comes back.
          guard took else { continue }
          phase.untake()
          flags.dirty = true
          took = false
        case .queue:
          // A close queues only what it took, and never for a failed or unlinked edit.
          guard took else { continue }
          phase.queued(next)
          flags.queued = next
          next += 1
          took = false
        case .fsync:
          phase.fsynced()
          if flags.queued != nil && !flags.gone && flags.failedWrite == nil { flags.fsynced = true }
        case .fail:
          phase.writeFailed(EIO)
          if !flags.gone && flags.failedWrite == nil { flags.failedWrite = EIO }
        case .unlink:
          phase.unlinked()
          flags.gone = true
        }
        #expect(phase.isChanged == flags.isChanged, "run \(run): \(trail) → \(phase)")
        #expect(phase.lastQueued == flags.queued, "run \(run): \(trail) → \(phase)")
        #expect(phase.failure == (flags.gone ? nil : flags.failedWrite), "run \(run): \(trail) → \(phase)")
        #expect(phase.withdrawable == flags.withdrawable, "run \(run): \(trail) → \(phase)")
        // The contract, whatever came before: an unlinked or failed edit is never taken again;
        // what an fsync returned is never withdrawn.
        if case .gone = phase { #expect(!phase.isChanged) }
        if flags.fsynced { #expect(phase.withdrawable == nil) }
        checked += 1
      }
    }
    #expect(checked > 10_000)
  }

  @Test func eachTransitionOfTheTable() {
    var p = EditPhase.open(changed: false)
    var took = p.take()
    #expect(!took)
    p.change()
    #expect(p == .open(changed: true))
    took = p.take()
    #expect(took)
    p.queued(7)
    #expect(p == .queued(last: 7, changed: false, fsynced: false))
    p.change()
    p.fsynced()
    #expect(p == .queued(last: 7, changed: true, fsynced: true))
    p.writeFailed(ENOSPC)
    #expect(p == .failed(errno: ENOSPC, last: 7, fsynced: true))
    #expect(p.withdrawable == nil)
    p.writeFailed(EIO)
    #expect(p.failure == ENOSPC)
    p.unlinked()
    #expect(p == .gone(last: 7))
    var q = EditPhase.queued(last: 3, changed: false, fsynced: false)
    q.writeFailed(ENOSPC)
    #expect(q.withdrawable == 3)
  }
}
