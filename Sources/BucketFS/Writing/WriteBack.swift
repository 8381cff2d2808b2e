import Foundation

/// What a writable mount keeps: the queue of changes and the files open for writing.
final class WriteBack: Sendable {
  let queue: WriteBackQueue
  let edits: LocalEdits
  private let lock: QueueLock

  /// The queue in `base`, or beside it when another mount writes back through it (`QueueLock`).
  /// Every file operation its durability rests on goes through `disk` (`QueueDisk`).
  init(folder base: URL, commit: Double, disk: any QueueDisk = SystemDisk(), log: @escaping @Sendable (String) -> Void) throws {
    let (folder, lock) = try QueueLock.take(base, disk: disk, log: log)
    self.lock = lock
    queue = try WriteBackQueue(folder: folder, disk: disk, commit: commit, log: log)
    edits = LocalEdits(folder: folder, disk: disk)
  }
}
