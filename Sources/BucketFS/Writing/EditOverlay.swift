/// An edit of a large object that did not copy the object first: its file is as long as the
/// object and holds only what was written (the rest is a hole), and the rest of the bytes are the
/// base version's, filled in afterwards (`BaseFill`) or, after a crash, from the bucket. Kept in
/// the queued change's record, so that the bytes a program wrote are told apart from the holes
/// whatever happens before the fill ends.
struct EditOverlay: Codable, Sendable, Equatable {
  /// The version whose bytes are under the holes (name, generation, size, hashes).
  var base: PendingChange.Source
  /// Byte ranges the program wrote, in order, none touching another.
  private(set) var written: [Range<Int64>] = []
  /// From here on the bytes are the file's own (zeros where nothing was written): past the
  /// base's end, or past a truncation, which took the base's bytes there away for good.
  private(set) var ownFrom: Int64

  init(base: PendingChange.Source) {
    self.base = base
    ownFrom = base.size
  }

  /// Where the base's bytes end in the file.
  var baseEnd: Int64 { min(ownFrom, base.size) }

  /// The program wrote `range` (what it wrote past the base's end is the file's own anyway).
  mutating func wrote(_ range: Range<Int64>) {
    guard !range.isEmpty, range.lowerBound < baseEnd else { return }
    var merged = range.lowerBound..<min(range.upperBound, baseEnd)
    var kept: [Range<Int64>] = []
    kept.reserveCapacity(written.count + 1)
    for r in written {
      if r.upperBound < merged.lowerBound || r.lowerBound > merged.upperBound {
        kept.append(r)
      } else {
        merged = min(r.lowerBound, merged.lowerBound)..<max(r.upperBound, merged.upperBound)
      }
    }
    let at = kept.firstIndex { $0.lowerBound > merged.lowerBound } ?? kept.endIndex
    kept.insert(merged, at: at)
    written = kept
  }

  /// The file was cut or extended to `size`: what lies past it is the file's own from now on.
  mutating func truncated(to size: Int64) {
    ownFrom = min(ownFrom, size)
    written = written.compactMap { r in r.lowerBound < ownFrom ? r.lowerBound..<min(r.upperBound, ownFrom) : nil }
  }

  /// The parts of `range` that are the base's bytes (neither written nor the file's own).
  func gaps(in range: Range<Int64>) -> [Range<Int64>] {
    let end = min(range.upperBound, baseEnd)
    var at = range.lowerBound
    var out: [Range<Int64>] = []
    guard at < end else { return out }
    for r in written where r.upperBound > at {
      if r.lowerBound >= end { break }
      if r.lowerBound > at { out.append(at..<r.lowerBound) }
      at = max(at, r.upperBound)
      if at >= end { return out }
    }
    if at < end { out.append(at..<end) }
    return out
  }

  /// Bytes the program wrote over the base's.
  var writtenBytes: Int64 { written.reduce(0) { $0 + Int64($1.count) } }

  private enum CodingKeys: String, CodingKey { case base, written, ownFrom }

  init(from decoder: any Decoder) throws {
    let c = try decoder.container(keyedBy: CodingKeys.self)
    base = try c.decode(PendingChange.Source.self, forKey: .base)
    ownFrom = try c.decode(Int64.self, forKey: .ownFrom)
    let pairs = try c.decode([Int64].self, forKey: .written)
    guard pairs.count % 2 == 0 else {
      throw DecodingError.dataCorruptedError(forKey: .written, in: c, debugDescription: "an odd count of range bounds")
    }
    var last: Int64 = -1
    for i in stride(from: 0, to: pairs.count, by: 2) {
      // Ranges out of order or overlapping were never written by this code: the record is damaged.
      guard pairs[i] > last, pairs[i] < pairs[i + 1] else {
        throw DecodingError.dataCorruptedError(forKey: .written, in: c, debugDescription: "ranges out of order")
      }
      written.append(pairs[i]..<pairs[i + 1])
      last = pairs[i + 1]
    }
  }

  func encode(to encoder: any Encoder) throws {
    var c = encoder.container(keyedBy: CodingKeys.self)
    try c.encode(base, forKey: .base)
    try c.encode(ownFrom, forKey: .ownFrom)
    try c.encode(written.flatMap { [$0.lowerBound, $0.upperBound] }, forKey: .written)
  }
}
