/// A single byte range from a `Range` header, resolved against the object size.
enum RangeHeader {
  enum Result: Equatable {
    case whole
    case partial(start: Int64, end: Int64)  // inclusive
    case unsatisfiable
    case malformed
  }

  static func resolve(_ header: String?, size: Int64) -> Result {
    guard let header else { return .whole }
    let text = header.trimmingCharacters(in: .whitespaces)
    guard text.lowercased().hasPrefix("bytes=") else { return .malformed }
    // Only the first range of a list is served, as the emulators do.
    let spec = text.dropFirst(6).split(separator: ",").first.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
    let parts = spec.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
    guard parts.count == 2 else { return .malformed }
    let first = String(parts[0]), second = String(parts[1])
    if first.isEmpty {
      guard let suffix = Int64(second), suffix >= 0 else { return .malformed }
      if suffix == 0 { return .unsatisfiable }
      if size == 0 { return .whole }
      return .partial(start: max(0, size - suffix), end: size - 1)
    }
    guard let start = Int64(first), start >= 0 else { return .malformed }
    var end = size - 1
    if !second.isEmpty {
      guard let e = Int64(second), e >= start else { return .malformed }
      end = min(e, size - 1)
    }
    if size == 0 && start == 0 { return .whole }
    if start >= size { return .unsatisfiable }
    return .partial(start: start, end: end)
  }
}
