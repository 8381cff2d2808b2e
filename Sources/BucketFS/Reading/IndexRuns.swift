// Runs of consecutive block or page numbers: the one rule by which a partial copy's block map,
// its filler and the block cache find what is still to fetch — a run starts at the first free
// number and ends before the next one that is not (present, or being fetched by someone else).
enum IndexRuns {
  /// The first run of numbers in `range` for which `free` holds, at most `limit` long.
  static func first(in range: Range<Int>, limit: Int = .max, where free: (Int) -> Bool) -> Range<Int>? {
    guard let start = range.first(where: free) else { return nil }
    var end = start + 1
    while end < range.upperBound && end - start < limit && free(end) { end += 1 }
    return start..<end
  }

  /// Every run of free numbers in `range`, in order.
  static func all(in range: Range<Int>, where free: (Int) -> Bool) -> [Range<Int>] {
    var runs: [Range<Int>] = []
    var rest = range
    while let run = first(in: rest, where: free) {
      runs.append(run)
      rest = run.upperBound..<range.upperBound
    }
    return runs
  }
}
