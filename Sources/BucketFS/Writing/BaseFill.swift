// Fills the holes of an overlaid edit's file (`EditOverlay`) with its base version's bytes, in
// the background, from the start to the end: so that opening a large object to change a few bytes
// returns at once, and the queued bytes become whole before their upload (or a reader) needs
// them. The program's writes and the fill go through one lock, so a fill never lands on bytes the
// program wrote: the holes are worked out again under it for every piece.
import Foundation
import StorageCore
import Synchronization

final class BaseFill: Sendable {
  /// Bytes `range` of the base version: from a staged copy of it, or from the bucket.
  typealias Fetch = @Sendable (PendingChange.Source, Range<Int64>) async throws(BucketError) -> Data

  enum Progress: Sendable {
    case idle
    /// Every hole before `upTo` is filled.
    case filling(upTo: Int64)
    case complete
    /// The last run stopped here; the next wait starts another.
    case failed(BucketError, upTo: Int64)
  }

  private struct State {
    var overlay: EditOverlay
    var progress = Progress.idle
  }

  /// The file's own descriptor (a dup): it outlives the edit's, and the file's name may change
  /// (linked into the queue) while the fill runs.
  private let fd: Int32
  /// Its writes go through the queue's disk: once the edit is closed they land in queued bytes.
  private let disk: any QueueDisk
  private let fetch: Fetch
  private let state: Mutex<State>
  private let moved = ChangeSignal()
  private let abandoned = Atomic(false)

  /// How much one fetch brings: a ranged GET's worth, written before the next one starts.
  static let piece: Int64 = 8 << 20

  init(file: Int32, overlay: EditOverlay, disk: any QueueDisk, fetch: @escaping Fetch) {
    fd = dup(file)
    self.disk = disk
    self.fetch = fetch
    state = Mutex(State(overlay: overlay))
  }

  deinit { close(fd) }

  var overlay: EditOverlay { state.withLock { $0.overlay } }

  /// A change of the file's bytes by the program (a write, a truncation), made with the fill
  /// held off, and noted in the overlay by `body`.
  func change<T>(_ body: (inout EditOverlay) throws(FSError) -> T) throws(FSError) -> T {
    try state.withLock { s throws(FSError) -> T in try body(&s.overlay) }
  }

  /// Starts the fill, unless it runs or ran to its end.
  func start() {
    let begin = state.withLock { s -> Int64? in
      switch s.progress {
      case .idle: s.progress = .filling(upTo: 0); return 0
      case .failed(_, let upTo): s.progress = .filling(upTo: upTo); return upTo
      case .filling, .complete: return nil
      }
    }
    guard let begin else { return }
    Task.detached { [self] in await run(from: begin) }
  }

  private func run(from begin: Int64) async {
    var at = begin
    while true {
      if abandoned.load(ordering: .relaxed) {
        return finish(.failed(BucketError(code: .cancelled, object: overlay.base.name, detail: "the edit was closed"), upTo: at))
      }
      let (end, base) = state.withLock { ($0.overlay.baseEnd, $0.overlay.base) }
      if at >= end { return finish(.complete) }
      let piece = at..<min(end, at + Self.piece)
      if !state.withLock({ $0.overlay.gaps(in: piece).isEmpty }) {
        let data: Data
        do throws(BucketError) {
          data = try await fetch(base, piece)
        } catch {
          return finish(.failed(error, upTo: at))
        }
        let failed = state.withLock { s -> Int32? in
          // Worked out again: the program may have written (or truncated) while the bytes came.
          for gap in s.overlay.gaps(in: piece) {
            let n = data.withUnsafeBytes { bytes in
              let from = Int(gap.lowerBound - piece.lowerBound)
              return disk.pwrite(fd, UnsafeRawBufferPointer(rebasing: bytes[from..<from + Int(gap.count)]), at: gap.lowerBound)
            }
            guard n == gap.count else { return n < 0 ? errno : ENOSPC }
          }
          return nil
        }
        if let failed {
          let error = BucketError(code: .unknown, object: base.name, detail: "cannot write the edit's file: errno \(failed)")
          return finish(.failed(error, upTo: at))
        }
      }
      at = piece.upperBound
      state.withLock { $0.progress = .filling(upTo: at) }
      moved.signal()
    }
  }

  /// A fill for a copy of this fill's file (a file edited again while its bytes are queued):
  /// `output` gets the bytes the program wrote and those past the base's end, now; its holes
  /// come from this file as this fill makes them whole. The copy's overlay is this one's, so a
  /// later mount fills it from the base itself.
  func copy(into output: Int32) throws(FSError) -> BaseFill {
    let overlay = self.overlay
    var st = stat()
    guard fstat(fd, &st) == 0, disk.truncate(output, to: Int64(st.st_size)) == 0 else { throw FSError(errno) }
    let own = overlay.baseEnd < Int64(st.st_size) ? [overlay.baseEnd..<Int64(st.st_size)] : []
    var buffer = [UInt8](repeating: 0, count: 1 << 20)
    for range in overlay.written + own {
      var at = range.lowerBound
      while at < range.upperBound {
        let n = pread(fd, &buffer, Int(min(Int64(buffer.count), range.upperBound - at)), off_t(at))
        guard n > 0 else { throw FSError(n < 0 ? errno : EIO) }
        guard buffer.withUnsafeBytes({ disk.pwrite(output, UnsafeRawBufferPointer(rebasing: $0[..<n]), at: at) }) == n else { throw FSError(errno) }
        at += Int64(n)
      }
    }
    let copy = BaseFill(file: output, overlay: overlay, disk: disk) { [self] base, range throws(BucketError) in
      try await ready(range)
      var data = Data(count: range.count)
      let n = data.withUnsafeMutableBytes { pread(fd, $0.baseAddress, range.count, off_t(range.lowerBound)) }
      guard n == range.count else {
        throw BucketError(code: .unknown, object: base.name, detail: "cannot read the queued bytes: errno \(n < 0 ? errno : EIO)")
      }
      return data
    }
    copy.start()
    return copy
  }

  /// The edit ended with nothing queued: its bytes are needed no more.
  func abandon() { abandoned.store(true, ordering: .relaxed) }

  private func finish(_ progress: Progress) {
    state.withLock { $0.progress = progress }
    moved.signal()
  }

  /// Waits until the base's bytes in `range` are in the file (all of them: `range` nil).
  func ready(_ range: Range<Int64>? = nil) async throws(BucketError) {
    start()
    while true {
      let epoch = moved.epoch
      if try isReady(range) { return }
      await moved.wait(after: epoch, until: nil)
    }
  }

  /// Whether `range` (nil: all) needs nothing more from the base; throws what stopped the fill.
  func isReady(_ range: Range<Int64>?) throws(BucketError) -> Bool {
    let (progress, gapless) = state.withLock { s in (s.progress, range.map { s.overlay.gaps(in: $0).isEmpty } ?? false) }
    switch progress {
    case .complete: return true
    case .failed(let error, _): if !gapless { throw error } else { return true }
    case .idle: return gapless
    case .filling(let upTo): return gapless || range.map { $0.upperBound <= upTo } ?? false
    }
  }
}
