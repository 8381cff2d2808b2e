/// What an edit's writes say about whether it only appended to the bytes it started from: a
/// logger's `O_APPEND` handle, `>>`, `tee -a`, or writes at or past the start's end only. Such
/// an upload can be carried onto a version another writer made meanwhile (`PendingChange.Rebase`)
/// instead of going beside it as a conflict copy.
struct AppendWatch: Sendable {
  /// The length of the bytes the edit started from (nil: they were cut at the open, `O_TRUNC`).
  private var start: Int64?
  /// The lowest offset a write or truncation touched since the open, and since the last close
  /// that queued the bytes (`Int64.max`: none).
  private var lowest = Int64.max
  private var lowestSinceTake = Int64.max
  /// The bytes' length when a close last queued them (nil: none did).
  private var takenLength: Int64?
  /// Every handle that wrote was opened `O_APPEND`: what the writes did is an append wherever
  /// they landed (a file the kernel writes, which the daemon never sees a write of, too).
  private var everyWriterAppends = true
  /// The kernel writes the file itself: where its writes land is never seen here.
  private var writesUnseen = false

  /// An edit that started from `length` bytes of its base (nil: from none of them).
  init(startLength: Int64?) { start = startLength }

  /// A handle that may write was opened (`appending`: with `O_APPEND`).
  mutating func writerOpened(appending: Bool) {
    if !appending { everyWriterAppends = false }
  }

  /// From now on the kernel writes the file (passthrough): only `O_APPEND` says where.
  mutating func kernelWrites() { writesUnseen = true }

  /// Bytes were written from `offset`, or the file was cut (or extended) to `offset`.
  mutating func touched(from offset: Int64) {
    lowest = min(lowest, offset)
    lowestSinceTake = min(lowestSinceTake, offset)
  }

  /// A close queues the bytes, `length` long: where they count as appended from, relative to
  /// the bytes the edit started from and to those the close before queued.
  mutating func take(length: Int64) -> AppendedBytes {
    defer {
      takenLength = length
      lowestSinceTake = .max
    }
    return AppendedBytes(fromStart: appended(onto: start, lowest: lowest), fromLast: appended(onto: takenLength, lowest: lowestSinceTake))
  }

  private func appended(onto length: Int64?, lowest: Int64) -> Int64? {
    guard let length, lowest >= length else { return nil }
    // Onto nothing, only `O_APPEND` makes it an append: a program writing a new file from the
    // start (`cp`, `>`) means that file, not its bytes after another writer's. Where the kernel
    // writes, only `O_APPEND` says where its writes landed.
    if length == 0 || writesUnseen { return everyWriterAppends ? length : nil }
    return length
  }
}

/// Where a close's bytes count as appended from (nil: they do not), as `AppendWatch` saw them.
struct AppendedBytes: Sendable, Equatable {
  /// Relative to the bytes the edit started from: its base version's, or the queued change it
  /// opened on (`startedOn`).
  var fromStart: Int64?
  /// Relative to the bytes the edit's previous close queued (`lastQueued`).
  var fromLast: Int64?
  /// The queued change the edit opened on, and the one its previous close queued.
  var startedOn: UInt64? = nil
  var lastQueued: UInt64? = nil

  /// Where the bytes count as appended from, relative to queued change `sequence` (the one the
  /// close comes after): nil when that change is not one the edit started from or queued.
  func from(after sequence: UInt64) -> Int64? {
    if let lastQueued { return sequence == lastQueued ? fromLast : nil }
    return sequence == startedOn ? fromStart : nil
  }

  /// Relative to what the change is based on when nothing of its name is queued: its own
  /// previous close's result, or the version it opened.
  var fromBase: Int64? { lastQueued != nil ? fromLast : fromStart }
}
