@testable import BucketFS
import StorageCore
import Synchronization

/// What the write-back queue still has to carry out, as `PinKeeper.queued` asks it.
final class QueuedChanges: Sendable {
  let names = Mutex<[String: PinKeeper.Queued]>([:])

  /// An online keeper whose write-back queue holds these changes.
  func keeper(staging: StagingArea, client: any ObjectClient) -> PinKeeper {
    PinKeeper(
      staging: staging, client: client, online: true,
      queued: { [self] name in names.withLock { $0[name] } },
      queuedUnder: { [self] prefix in names.withLock { $0.keys.contains { $0.hasPrefix(prefix) } } }, log: { _ in })
  }
}

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
