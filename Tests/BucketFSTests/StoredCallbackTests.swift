@testable import BucketFS
import Foundation
import StorageCore
import Synchronization
import Testing

/// Issue 55: a callback kept for later (the pins' view of an offline mount, the listings'
/// count of inodes, a listener) costs as much on its thousandth call as on its first. Kept in a
/// `Mutex` of a function type, each read wrapped it in two more conversion thunks: calls went
/// through ever more frames, and an offline walk slowed down request by request until it hung.
@Suite struct StoredCallbackTests {
  /// How many frames the stack holds where this is called.
  private static func depth() -> Int { Thread.callStackReturnAddresses.count }

  @Test func theListingsCountOfInodesIsCalledThroughNoMoreFramesWithUse() {
    let listings = FolderListings(ttl: 60, negativeTTL: 5, capacity: 100_000)
    let depths = Mutex<[Int]>([])
    listings.countAlso {
      depths.withLock { $0.append(Self.depth()) }
      return 0
    }
    for i in 0..<500 { listings.store("d\(i)", []) }
    let seen = depths.withLock { $0 }
    #expect(seen.count == 500)
    #expect(seen.first == seen.last, "frames at the 1st call: \(seen.first ?? 0), at the 500th: \(seen.last ?? 0)")
  }

  @Test func theEvictionListenerIsCalledThroughNoMoreFramesWithUse() {
    // Room for one listing: every store evicts the one before.
    let listings = FolderListings(ttl: 60, negativeTTL: 5, capacity: 1)
    let depths = Mutex<[Int]>([])
    listings.onEviction { _, _ in depths.withLock { $0.append(Self.depth()) } }
    let entry = DirectoryEntry(name: "f", isDirectory: false, objectName: "f", metadata: nil)
    for i in 0..<300 { listings.store("d\(i)", [entry]) }
    let seen = depths.withLock { $0 }
    #expect(seen.count >= 200)
    #expect(seen.first == seen.last, "frames at the 1st call: \(seen.first ?? 0), at the last: \(seen.last ?? 0)")
  }

  @Test func aHookOfAnyFunctionShapeIsCalledThroughNoMoreFramesWithUse() {
    let depths = Mutex<[Int]>([])
    let one = Hook<@Sendable (String) -> StorageMetadata?>()
    one.set { _ in
      depths.withLock { $0.append(Self.depth()) }
      return nil
    }
    let version = Hook<(count: @Sendable () -> UInt64, name: String)>()
    version.set((count: { depths.withLock { $0.append(Self.depth()) }; return 1 }, name: "v"))
    for _ in 0..<1000 {
      _ = one.value?("a/")
      _ = version.value?.count()
    }
    let seen = depths.withLock { $0 }
    #expect(seen.count == 2000)
    #expect(seen[0] == seen[1998] && seen[1] == seen[1999], "\(seen.prefix(2)) then \(seen.suffix(2))")
  }
}
