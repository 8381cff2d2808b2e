@testable import BucketFS
import Foundation
import Synchronization
import Testing

/// A kept listing's word on absent names: for `negative_ttl`, then confirmed by a new listing
/// that holds no name the kept one lacks (a writer elsewhere), save this mount's queued ones.
@Suite struct FolderListingsTests {
  @Test func aNewListingConfirmsAbsencesUnlessItHoldsANameFromElsewhere() {
    let now = Mutex(1000.0)
    let listings = FolderListings(ttl: 60, negativeTTL: 5, capacity: 10, clock: { now.withLock { $0 } })
    let a = DirectoryEntry(name: "a", isDirectory: false, objectName: "d/a", metadata: nil)
    let c = DirectoryEntry(name: "c", isDirectory: false, objectName: "d/c", metadata: nil)
    #expect(listings.store("d", [a]))
    guard case .absent = listings.lookup(dir: "d", name: "b") else {
      Issue.record("b is not absent at first")
      return
    }
    now.withLock { $0 += 6 }
    guard case .absenceToConfirm(count: 1) = listings.lookup(dir: "d", name: "b") else {
      Issue.record("the window did not pass")
      return
    }
    // Another writer's name: not confirmed, the names are asked for.
    #expect(!listings.confirmAbsences("d", from: [a, c], ours: []))
    guard case .absenceToConfirm = listings.lookup(dir: "d", name: "b") else {
      Issue.record("confirmed by a foreign name")
      return
    }
    // This mount's queued name, or nothing new: confirmed for another window.
    #expect(listings.confirmAbsences("d", from: [a, c], ours: ["c"]))
    guard case .absent = listings.lookup(dir: "d", name: "b") else {
      Issue.record("not confirmed")
      return
    }
    now.withLock { $0 += 6 }
    #expect(listings.confirmAbsences("d", from: [a], ours: []))
    guard case .absent = listings.lookup(dir: "d", name: "b") else {
      Issue.record("not confirmed again")
      return
    }
    // Past the listing's own life there is nothing to confirm.
    now.withLock { $0 += 60 }
    #expect(!listings.confirmAbsences("d", from: [a], ours: []))
  }
}
