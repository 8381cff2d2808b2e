// Fixed-width decimal numbers without `String(format:)`, which goes through Foundation's
// CFString formatter: on a new file's path in the mount (its queue file's name, its kept time,
// its dates) that was a tenth of the daemon's work.
extension BinaryInteger {
  /// The number in decimal, `width` characters at least with zeros after the sign, as
  /// `%0*d` writes it.
  package func zeroPadded(_ width: Int) -> String {
    let digits = String(self.magnitude)
    let zeros = Swift.max(0, width - digits.count - (self < 0 ? 1 : 0))
    return (self < 0 ? "-" : "") + String(repeating: "0", count: zeros) + digits
  }
}
