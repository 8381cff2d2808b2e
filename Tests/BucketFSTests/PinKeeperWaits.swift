@testable import BucketFS
import StorageCore

/// What the pin keeper tests wait for and ask.
extension PinKeeper {
  /// `condition`, waited for through the keeper's changes (at most 20 s).
  func eventually(_ condition: () -> Bool) async -> Bool {
    for _ in 0..<200 {
      if condition() { return true }
      await waitForChange(within: 0.1)
    }
    return condition()
  }

  /// Whether the pin of `target` is kept with `files` files, each named in its tree.
  func isKept(_ target: ObjectName, files: Int) -> Bool {
    guard let pin = pin(for: target), case .kept = pin.phase else { return false }
    return kept(pin).files == files && pin.files.count == files
  }
}
