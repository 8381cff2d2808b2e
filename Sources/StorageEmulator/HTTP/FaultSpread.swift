/// Which requests an error fraction fails. Exactly that share of each block of 16 requests, at
/// places in the block that a fixed generator shuffles: repeatable from run to run, and with no
/// period for a client to fall into. (Request n failing when n·fraction crossed an integer failed
/// every second request at 0.5, so a client whose retry is two requests, a resumable upload's
/// query then its chunk, failed every retry, where Google's servers fail at random.)
enum FaultSpread {
  static let block = 16

  /// Whether request `request` (1, 2, …, counted since the faults were set) gets the fault.
  static func fails(request: Int, fraction: Double) -> Bool {
    let n = request - 1
    let (index, place) = (n / block, n % block)
    let share = { (blocks: Int) in Int((Double(blocks * block) * min(1, fraction)).rounded(.down)) }
    let failing = share(index + 1) - share(index)
    guard failing > 0 else { return false }
    guard failing < block else { return true }
    // The block's places in an order of its own (Fisher–Yates with SplitMix64 seeded by the block).
    var order = Array(0..<block)
    var state = UInt64(truncatingIfNeeded: index) &* 0x9E37_79B9_7F4A_7C15 &+ 0xD1B5_4A32_D192_ED03
    for i in stride(from: block - 1, to: 0, by: -1) {
      state &+= 0x9E37_79B9_7F4A_7C15
      var z = state
      z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
      z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
      z ^= z >> 31
      order.swapAt(i, Int(z % UInt64(i + 1)))
    }
    return order.prefix(failing).contains(place)
  }
}
