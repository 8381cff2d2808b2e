@testable import BucketFS
import Foundation
import Testing

/// The bookkeeping of an overlaid edit: which bytes are the program's and which its base's, as
/// writes, truncations and a record written and read back leave them.
@Suite struct EditOverlayTests {
  let base = PendingChange.Source(name: "big.bin", generation: 7, size: 100)

  /// The same question answered byte by byte: is byte `i` the base's?
  func fromBase(_ o: EditOverlay, written: Set<Int64>, ownFrom: Int64) -> [Range<Int64>] {
    var out: [Range<Int64>] = []
    var start: Int64? = nil
    for i in Int64(0)...110 {
      let isBase = i < 100 && i < ownFrom && !written.contains(i)
      if isBase, start == nil { start = i }
      if !isBase, let s = start {
        out.append(s..<i)
        start = nil
      }
    }
    return out
  }

  @Test func gapsAreTheBytesNeitherWrittenNorCutAway() {
    var rng = SystemRandomNumberGenerator()
    for _ in 0..<300 {
      var o = EditOverlay(base: base)
      var written = Set<Int64>()
      var ownFrom: Int64 = 100
      for _ in 0..<Int.random(in: 1...8, using: &rng) {
        if Int.random(in: 0..<5, using: &rng) == 0 {
          let size = Int64.random(in: 0...120, using: &rng)
          o.truncated(to: size)
          ownFrom = min(ownFrom, size)
          written = written.filter { $0 < ownFrom }
        } else {
          let at = Int64.random(in: 0...105, using: &rng)
          let count = Int64.random(in: 1...20, using: &rng)
          o.wrote(at..<at + count)
          for i in at..<at + count where i < ownFrom { written.insert(i) }
        }
      }
      #expect(o.gaps(in: 0..<110) == fromBase(o, written: written, ownFrom: ownFrom))
      // Any window of it agrees with the whole.
      let a = Int64.random(in: 0...100, using: &rng)
      let b = Int64.random(in: a...110, using: &rng)
      let clipped = fromBase(o, written: written, ownFrom: ownFrom).compactMap { r -> Range<Int64>? in
        let (lo, hi) = (max(r.lowerBound, a), min(r.upperBound, b))
        return lo < hi ? lo..<hi : nil
      }
      #expect(o.gaps(in: a..<b) == clipped)
      #expect(o.writtenBytes == Int64(written.count))

      let again = try? JSONDecoder().decode(EditOverlay.self, from: JSONEncoder().encode(o))
      #expect(again == o)
    }
  }

  @Test func touchingWritesBecomeOneRange() throws {
    var o = EditOverlay(base: base)
    o.wrote(10..<20)
    o.wrote(20..<30)
    o.wrote(5..<10)
    #expect(o.gaps(in: 0..<100) == [0..<5, 30..<100])
    let text = String(decoding: try JSONEncoder().encode(o), as: UTF8.self)
    #expect(text.contains("[5,30]"), "\(text)")
  }

  /// A record whose ranges no overlay could have (out of order, overlapping, an odd count) is
  /// damaged: it fails to decode, and the queue sets it aside instead of trusting it.
  @Test func rangesNoOverlayWritesAreRefused() {
    let source = #"{"name":"big.bin","generation":7,"size":100}"#
    for written in ["[30,40,10,20]", "[10,20,15,25]", "[10,20,20,30]", "[10]", "[20,10]"] {
      let json = #"{"base":\#(source),"ownFrom":100,"written":\#(written)}"#
      #expect(throws: (any Error).self, "\(written)") { try JSONDecoder().decode(EditOverlay.self, from: Data(json.utf8)) }
    }
    let fine = #"{"base":\#(source),"ownFrom":100,"written":[10,20,30,40]}"#
    #expect((try? JSONDecoder().decode(EditOverlay.self, from: Data(fine.utf8)))?.gaps(in: 0..<100) == [0..<10, 20..<30, 40..<100])
  }
}
