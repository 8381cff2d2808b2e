/// A number of bytes as people read it: "512 B", "1.5 MiB".
package struct ByteCount: CustomStringConvertible, Sendable {
  package let bytes: Int64

  package init(_ bytes: Int64) { self.bytes = bytes }

  package var description: String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"]
    var value = Double(bytes)
    var unit = 0
    while abs(value) >= 1024 && unit < units.count - 1 {
      value /= 1024
      unit += 1
    }
    guard unit > 0 else { return "\(bytes) B" }
    let tenths = Int((value * 10).rounded())
    return "\(tenths / 10).\(abs(tenths % 10)) \(units[unit])"
  }
}
