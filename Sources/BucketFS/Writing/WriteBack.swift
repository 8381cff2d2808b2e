import Foundation

/// What a writable mount keeps: the queue of changes and the files open for writing.
final class WriteBack: Sendable {
  let queue: WriteBackQueue
  let edits: LocalEdits

  init(folder: URL, commit: Double, log: @escaping @Sendable (String) -> Void) throws {
    queue = try WriteBackQueue(folder: folder, commit: commit, log: log)
    edits = LocalEdits(folder: folder)
  }
}
