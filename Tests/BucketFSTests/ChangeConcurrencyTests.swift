@testable import BucketFS
import Testing

/// The queue carries out as many changes at once as the server's round trips call for: down
/// when changes wait behind each other (a server on this machine), up when they do not, and
/// all of them for a server whose round trips are long and steady.
@Suite struct ChangeConcurrencyTests {
  func fill(_ c: ChangeConcurrency) -> Int {
    var started = 0
    while c.mayStart() { started += 1 }
    for _ in 0..<started { c.ended() }
    return started
  }

  @Test func aServerWhoseChangesQueueGetsFewAtOnceThenMoreWhenTheyStopWaiting() {
    let c = ChangeConcurrency()
    #expect(c.limit == ChangeConcurrency.most && fill(c) == ChangeConcurrency.most)
    c.took(.seconds(0.001))
    // Sixteen at once on this machine: each takes many times the fastest.
    for _ in 0..<30 { c.took(.seconds(0.015)) }
    #expect(c.limit == ChangeConcurrency.least)
    #expect(fill(c) == ChangeConcurrency.least)
    // They stop waiting: one more for every limit's worth of changes.
    for _ in 0..<20 { c.took(.seconds(0.001)) }
    let grown = c.limit
    #expect(grown > ChangeConcurrency.least && grown < ChangeConcurrency.most, "\(grown)")
    for _ in 0..<400 { c.took(.seconds(0.001)) }
    #expect(c.limit == ChangeConcurrency.most)
  }

  @Test func aFarServerKeepsThemAll() {
    let c = ChangeConcurrency()
    for i in 0..<500 { c.took(.seconds(0.040 + Double(i % 7) * 0.004)) }
    #expect(c.limit == ChangeConcurrency.most)
  }

  /// A real bucket's small uploads take 50 to 300 ms whatever else goes: not taken for waiting.
  @Test func aFarServerWhoseTimesVaryKeepsThemAll() {
    let c = ChangeConcurrency()
    for i in 0..<500 { c.took(.seconds(0.050 + Double((i * 37) % 250) / 1000)) }
    #expect(c.limit == ChangeConcurrency.most)
  }

  @Test func aServerThatGotSlowerForGoodIsSeenAsItIsWithinAWindow() {
    let c = ChangeConcurrency()
    c.took(.seconds(0.001))
    for _ in 0..<(2 * ChangeConcurrency.window) { c.took(.seconds(0.030)) }
    // 30 ms is now its fastest: no longer taken for waiting, the limit is back up.
    for _ in 0..<400 { c.took(.seconds(0.030)) }
    #expect(c.limit == ChangeConcurrency.most)
  }

  @Test func onlyRoundTripChangesAreTimed() {
    var upload = PendingChange(sequence: 1, kind: .upload, name: "a", base: .generation(0), contentType: "x", mtime: nil)
    upload.dataSize = 1 << 20
    #expect(!ChangeConcurrency.isSmall(upload))
    upload.dataSize = 10
    #expect(ChangeConcurrency.isSmall(upload))
    #expect(ChangeConcurrency.isSmall(PendingChange(sequence: 2, kind: .delete, name: "a", base: .any)))
    #expect(!ChangeConcurrency.isSmall(PendingChange(sequence: 3, kind: .copy, name: "a", base: .any)))
  }
}
