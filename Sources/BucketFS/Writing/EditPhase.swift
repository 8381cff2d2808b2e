/// Where a file open for writing stands with the write-back queue, as one value: what five flags
/// of `LocalEdits.Edit` said between them (changed since the last close, queued as which upload,
/// a write failed, an fsync returned, unlinked), with the combinations they allowed and no state
/// ever had (a change queued after the file was unlinked, a failure that an fsync undid) now
/// unsayable. Every transition is here, one function per event; `EditPhaseTests` runs random
/// events against the flags they replaced.
enum EditPhase: Equatable, Sendable {
  /// Nothing of it queued yet; `changed`: something a close would queue (bytes, times, metadata).
  case open(changed: Bool)
  /// A close or fsync queued its bytes, last as upload `last`; `changed`: something since, for
  /// the next close; `fsynced`: an fsync returned, so what is queued is kept whatever comes after.
  case queued(last: UInt64, changed: Bool, fsynced: Bool)
  /// A write failed with `errno`: the bytes are not what the program wrote, so its closes and
  /// fsyncs report it and nothing more of it is queued. `last`: what its closes queued before.
  case failed(errno: Int32, last: UInt64?, fsynced: Bool)
  /// Unlinked while open (or replaced by a rename over it): nothing of it is queued again.
  case gone(last: UInt64?)

  /// Something changed that a close would queue.
  var isChanged: Bool {
    switch self {
    case .open(let changed), .queued(_, let changed, _): changed
    case .failed, .gone: false
    }
  }

  /// The upload its bytes went to last, if any.
  var lastQueued: UInt64? {
    switch self {
    case .open: nil
    case .queued(let last, _, _): last
    case .failed(_, let last, _), .gone(let last): last
    }
  }

  /// The errno of the write that failed.
  var failure: Int32? {
    if case .failed(let errno, _, _) = self { errno } else { nil }
  }

  /// The upload a failed write takes back while it waits (what the edit's closes queued: dd's
  /// O_TRUNC closed once by a dup), so the version before stays; none once an fsync returned.
  var withdrawable: UInt64? {
    if case .failed(_, let last?, false) = self { last } else { nil }
  }

  /// Bytes, times or metadata changed.
  mutating func change() {
    switch self {
    case .open: self = .open(changed: true)
    case .queued(let last, _, let fsynced): self = .queued(last: last, changed: true, fsynced: fsynced)
    case .failed, .gone: break
    }
  }

  /// A close takes what changed, to queue it: true when there is something (then it is no
  /// longer changed, until `untake` or the next change).
  mutating func take() -> Bool {
    switch self {
    case .open(true):
      self = .open(changed: false)
      return true
    case .queued(let last, true, let fsynced):
      self = .queued(last: last, changed: false, fsynced: fsynced)
      return true
    case .open(false), .queued(_, false, _), .failed, .gone: return false
    }
  }

  /// What `take` took could not be queued: it is changed again.
  mutating func untake() { change() }

  /// Its bytes went to the queue as upload `sequence`; a change made meanwhile stays to queue
  /// (a write between a close's take and its hand-over, which may also have failed, or an
  /// unlink: the upload is queued all the same, and is the one to know).
  mutating func queued(_ sequence: UInt64) {
    switch self {
    case .open(let changed): self = .queued(last: sequence, changed: changed, fsynced: false)
    case .queued(_, let changed, let fsynced): self = .queued(last: sequence, changed: changed, fsynced: fsynced)
    case .failed(let errno, _, let fsynced): self = .failed(errno: errno, last: sequence, fsynced: fsynced)
    case .gone: self = .gone(last: sequence)
    }
  }

  /// An fsync of it returned.
  mutating func fsynced() {
    if case .queued(let last, let changed, _) = self { self = .queued(last: last, changed: changed, fsynced: true) }
  }

  /// A write to it failed with `errno` (the first failure is the one reported).
  mutating func writeFailed(_ errno: Int32) {
    switch self {
    case .open: self = .failed(errno: errno, last: nil, fsynced: false)
    case .queued(let last, _, let fsynced): self = .failed(errno: errno, last: last, fsynced: fsynced)
    case .failed, .gone: break
    }
  }

  /// Unlinked while open.
  mutating func unlinked() { self = .gone(last: lastQueued) }
}
