import Foundation

/// SplitMix64: the same numbers for the same seed, so a failing test replays the same run.
package struct SeededGenerator: RandomNumberGenerator, Sendable {
  var state: UInt64
  package init(seed: UInt64) { state = seed }
  package mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }
}

/// `count` bytes from `SeededGenerator(seed:)`.
package func randomData(_ count: Int, seed: UInt64 = 42) -> Data {
  var generator = SeededGenerator(seed: seed)
  return randomData(count, using: &generator)
}

/// `count` bytes from `generator`, which moves on past them: each number's bytes, low byte first.
package func randomData(_ count: Int, using generator: inout SeededGenerator) -> Data {
  var data = Data(count: count)
  data.withUnsafeMutableBytes { raw in
    // A word at a time: the suite makes hundreds of MiB of these in a debug build, on the task
    // pool's two threads, and byte by byte that held a thread for seconds.
    let words = count / 8
    for w in 0..<words {
      raw.storeBytes(of: generator.next().littleEndian, toByteOffset: w * 8, as: UInt64.self)
    }
    var z = words * 8 < count ? generator.next() : 0
    for i in (words * 8)..<count {
      raw[i] = UInt8(truncatingIfNeeded: z)
      z >>= 8
    }
  }
  return data
}
