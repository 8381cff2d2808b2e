import Foundation
import Synchronization

/// One open of an edit (`LocalEdits.Edit`): what the program that opened it may do with it, and
/// whether it changed the file. Only a handle that changed the file queues its bytes at close,
/// so a reader's close never uploads what a writer has half written; the edit's last close
/// queues whatever is still unqueued (a chmod while it was open), when no writer is left.
final class EditHandle: Sendable {
  enum Access: Sendable, Equatable {
    /// Opened read-only while someone else writes the file: reads the writer's bytes.
    case reading
    case writing
    /// `O_APPEND`: every write goes at the end of the edit's bytes as they are, whatever offset
    /// the kernel computed from the size it cached (which may be another version's).
    case appending
  }

  let edit: LocalEdits.Edit
  let access: Access
  /// The inode the kernel holds the handle on: told to forget its size and pages when an append
  /// lands elsewhere than the kernel thought.
  let ino: UInt64
  private let changedFile: Atomic<Bool>
  /// One of the writers while the kernel writes the edit's file (`LocalEdits.Edit.Writers`):
  /// its release may be the last of them.
  let writesByKernel: Bool

  init(_ edit: LocalEdits.Edit, access: Access, ino: UInt64, changed: Bool, writesByKernel: Bool = false) {
    self.edit = edit
    self.access = access
    self.ino = ino
    changedFile = Atomic(changed)
    self.writesByKernel = writesByKernel
  }

  /// Opened with these `open(2)` flags.
  static func access(flags: Int32) -> Access {
    if flags & O_ACCMODE == O_RDONLY && flags & O_TRUNC == 0 { return .reading }
    return flags & O_APPEND != 0 ? .appending : .writing
  }

  /// This handle wrote, truncated or made the file: its close queues the bytes.
  var changed: Bool { changedFile.load(ordering: .acquiring) }
  func markChanged() { changedFile.store(true, ordering: .releasing) }
}
