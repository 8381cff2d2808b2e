@testable import BucketFS
import Foundation
import TestSupport
import Testing

/// `QueuedPrefixes` answers as a walk of every queued name would, through random sequences of
/// names gaining and losing their queued changes (NFC and NFD spellings are two names).
@Suite struct QueuedPrefixesTests {
  @Test func agreesWithAWalkOfEveryName() {
    var rng = SeededGenerator(seed: 56)
    let pool = ["a", "a/", "a/b", "a/b/c", "a/b/", "ab/x", "b/x", "c/d/e/f", "a//b", "c/", "caf\u{e9}/x", "cafe\u{301}/y", "z"]
    var prefixes = QueuedPrefixes()
    var live = Set<[UInt8]>()
    for _ in 0..<2_000 {
      let name = pool.randomElement(using: &rng)!
      let queued = Bool.random(using: &rng)
      prefixes.set(name, queued: queued)
      if queued { live.insert(Array(name.utf8)) } else { live.remove(Array(name.utf8)) }
      for dir in ["a/", "a/b/", "a//", "b/", "c/", "c/d/", "caf\u{e9}/", "cafe\u{301}/", "ab/", "z/"] {
        let walked = live.contains { $0.starts(with: Array(dir.utf8)) }
        #expect(prefixes.any(under: dir) == walked, "under \(dir.debugDescription): seed 56")
      }
    }
  }
}
