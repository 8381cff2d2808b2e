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

/// `count` bytes from `generator`, which moves on past them.
package func randomData(_ count: Int, using generator: inout SeededGenerator) -> Data {
  var data = Data(count: count)
  data.withUnsafeMutableBytes { raw in
    let bytes = raw.bindMemory(to: UInt8.self)
    var i = 0
    while i < count {
      var z = generator.next()
      for _ in 0..<8 where i < count {
        bytes[i] = UInt8(truncatingIfNeeded: z)
        z >>= 8
        i += 1
      }
    }
  }
  return data
}
