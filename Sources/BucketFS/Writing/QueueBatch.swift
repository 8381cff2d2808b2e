// Changes that go into the write-back queue as one (a folder rename: every file's move, the new
// folders' placeholders and the old ones' deletes). They are gathered here while the caller
// works out each of them, then `WriteBackQueue.queueTogether` writes their records in one
// append: a crash keeps the whole rename or none of it, never a folder split between its two
// names. Used by one task at a time.
final class QueueBatch {
  /// A change on its way into the queue, and what goes with it.
  struct Arrival {
    var change: PendingChange
    var size: Int64
    /// An upload whose bytes wait under their temporary name until its record is written.
    var withBytes: Bool
    /// Bytes the kernel still writes: no worker takes the change before `sealWritten`.
    var held: Bool
    /// A rename's delete of its old name, written in the same append.
    var delete: PendingChange?
    var appended: AppendedBytes?
  }

  var arrivals: [Arrival] = []
  private var actions: [(Bool) -> Void] = []

  /// `action` runs once the batch is queued (true) or dropped (false): what must wait until the
  /// changes are the queue's (an open file following its rename), and what is owed either way.
  func whenQueued(_ action: @escaping (Bool) -> Void) { actions.append(action) }

  func finish(queued: Bool) {
    for action in actions { action(queued) }
    actions = []
  }
}
