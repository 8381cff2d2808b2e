import Testing

@testable import StorageEmulator

/// Which requests an error fraction fails: the share asked for, repeatable, and in no pattern
/// that a client's retries can fall into.
@Suite struct FaultSpreadTests {
  @Test(arguments: [0.2, 0.5, 0.75]) func eachBlockFailsItsShare(fraction: Double) {
    let failed = (1...1600).filter { FaultSpread.fails(request: $0, fraction: fraction) }.count
    #expect(failed == Int(1600 * fraction))
    #expect((1...1600).map { FaultSpread.fails(request: $0, fraction: fraction) }
      == (1...1600).map { FaultSpread.fails(request: $0, fraction: fraction) })
  }

  /// At 0.5, every second request failed before: an attempt of two requests in a row (a
  /// resumable upload's query, then its chunk) never got both through. Now many do.
  @Test func twoRequestsInARowGetThroughAtHalf() {
    let pairs = stride(from: 1, to: 320, by: 2).filter {
      !FaultSpread.fails(request: $0, fraction: 0.5) && !FaultSpread.fails(request: $0 + 1, fraction: 0.5)
    }
    #expect(pairs.count > 20)
    // Runs of failures stay short enough for a client's retry budget.
    var run = 0
    var longest = 0
    for n in 1...1600 {
      run = FaultSpread.fails(request: n, fraction: 0.5) ? run + 1 : 0
      longest = max(longest, run)
    }
    #expect(longest <= 16)
  }

  @Test func noneAndAll() {
    #expect(!(1...64).contains { FaultSpread.fails(request: $0, fraction: 0) })
    #expect((1...64).allSatisfy { FaultSpread.fails(request: $0, fraction: 1) })
  }
}
