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
  /// Where the program writing through this handle was told the file ends, for `landing`.
  private let view: Mutex<WriteView>

  private struct WriteView {
    /// The edit's size at the open, or as a getattr through the handle (the kernel asks so for
    /// `lseek(SEEK_END)`) last answered it.
    var toldEnd: Int64
    /// Where the kernel sends this handle's next write when the program goes on writing after
    /// one that landed at the end instead (`landing`), so that it follows that one there.
    var appendingAt: Int64?
  }

  init(_ edit: LocalEdits.Edit, access: Access, ino: UInt64, changed: Bool, writesByKernel: Bool = false) {
    self.edit = edit
    self.access = access
    self.ino = ino
    changedFile = Atomic(changed)
    self.writesByKernel = writesByKernel
    view = Mutex(WriteView(toldEnd: edit.size))
  }

  /// Opened with these `open(2)` flags.
  static func access(flags: Int32) -> Access {
    if flags & O_ACCMODE == O_RDONLY && flags & O_TRUNC == 0 { return .reading }
    return flags & O_APPEND != 0 ? .appending : .writing
  }

  /// A getattr through this handle told the program the file is `size` long.
  func told(size: Int64) { view.withLock { $0.toldEnd = size } }

  /// Where a write the kernel sent at `offset` lands in the edit's bytes, now `size` long, of
  /// which those from `writtenFrom` on were all written by appends (no truncation or hole made
  /// them). Called with the edit's `writing` lock held.
  ///
  /// An `O_APPEND` handle writes at the end. So does a plain one writing exactly where it was
  /// told the file ends, when other handles appended since: a program appending the way
  /// `lseek(SEEK_END)`, then `write` does, with another writer of this mount appending in
  /// between. Put where it was sent, it would overwrite that writer's acknowledged line (in the
  /// queued bytes, as on a local disk), and the edit would rewrite what an earlier close queued,
  /// which goes beside the object as a conflict copy; as the append it is, it keeps both and is
  /// carried onto the bucket's newest version (issue 54). The program's next write, sent right
  /// after that one, follows it to the end. Anything else lands where it was sent.
  func landing(_ offset: Int64, count: Int, size: Int64, writtenFrom: Int64) -> Int64 {
    view.withLock { v in
      let raced = offset == v.toldEnd && offset < size && offset >= writtenFrom
      let landsAtEnd = access == .appending || (access == .writing && (raced || offset == v.appendingAt))
      v.appendingAt = landsAtEnd && access == .writing ? offset + Int64(count) : nil
      return landsAtEnd ? size : offset
    }
  }

  /// This handle wrote, truncated or made the file: its close queues the bytes.
  var changed: Bool { changedFile.load(ordering: .acquiring) }
  func markChanged() { changedFile.store(true, ordering: .releasing) }
}
