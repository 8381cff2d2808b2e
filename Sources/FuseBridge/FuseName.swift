// A name from the kernel is bytes; the bucket's object names are UTF-8. A name that is not
// valid UTF-8 has no object (and Swift's String(cString:) would replace its bad bytes with
// U+FFFD, making two different names one), so it is told apart here, before anything is done.
enum FuseName {
  /// The name as a string, or nil when its bytes are not UTF-8.
  static func decode(_ name: UnsafePointer<CChar>) -> String? {
    String(validatingCString: name)
  }
}
