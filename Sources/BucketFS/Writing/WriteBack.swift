import Foundation

/// What a writable mount keeps: the queue of changes, the files open for writing, and the
/// handles that read or write local bytes (numbered apart from the handles of server reads).
final class WriteBack: Sendable {
  enum LocalHandle: Sendable {
    /// A file open for writing (or opened while someone writes it).
    case edit(LocalEdits.Edit)
    /// Bytes queued for the bucket and not there yet, read from the queue.
    case queued(FileDescriptor)
  }

  let queue: WriteBackQueue
  let edits: LocalEdits
  let handles = HandleTable<LocalHandle>(start: WriteBack.firstHandle)
  static let firstHandle: UInt64 = 1 << 48

  init(folder: URL, log: @escaping @Sendable (String) -> Void) throws {
    queue = try WriteBackQueue(folder: folder, log: log)
    edits = LocalEdits(folder: folder)
  }

  static func isLocal(_ handle: UInt64) -> Bool { handle >= firstHandle }
}
