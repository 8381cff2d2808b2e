// A staged copy being filled: a sparse file of the object's size and a map of the 64 KiB blocks
// it holds. Ranged GETs write straight into the file, whether a read asked for them or the
// background filler did, so each byte crosses the network once and none is held in memory; a
// read waits only for the blocks it needs (they are marked as they arrive, not when their GET
// ends) and is answered from the file. The filler fetches the gaps starting where the last read
// ended, so a sequential reader finds its bytes arriving just ahead of it.
//
// Bytes in a partial copy come from GETs pinned to one generation, like any ranged read; the
// whole copy is checked against the object's hash when the last block arrives (StagingArea).
import Foundation
import StorageCore
import Synchronization

package final class PartialCopy: Sendable {
  static let blockSize = Int64(BlockChecksums.blockSize)
  /// Bytes per GET of the filler.
  static let fetchSize: Int64 = 4 << 20
  /// GETs the filler keeps in flight.
  static let fillerConcurrency = 4

  let name: String
  let metadata: StorageMetadata
  var size: Int64 { metadata.size }
  let path: String
  let file: FileDescriptor
  let client: any ObjectClient
  private let stagingWriter: StagingWriter
  private let blockCount: Int
  private let log: @Sendable (String) -> Void
  /// Called once: with true when every block is in the file, with false when the filler gave up.
  private let onEnd: @Sendable (PartialCopy, _ filled: Bool) -> Void

  /// Why a copy cannot be used any more (reads then go to the server without it).
  enum Broken: Error {
    case cannotWrite(String)
    case abandoned
    /// A block read back did not match the checksum taken when it arrived.
    case damaged(String)
  }

  /// A read waiting for `blocks`.
  private struct WaitingRead {
    let blocks: Range<Int>
    let waiter: Waiter<Void>
  }

  /// Where each block of the file stands.
  private enum Block: Equatable {
    /// Neither here nor being fetched.
    case gap
    /// Claimed by a GET in flight.
    case fetching
    /// In the file, with the CRC32C taken as it arrived.
    case present(crc: UInt32)

    var crc: UInt32? {
      if case .present(let crc) = self { crc } else { nil }
    }
  }

  /// The background fetch of every gap.
  private enum Filler {
    case idle
    case running
    /// A GET of it failed: the copy is abandoned, and no filler starts again.
    case gaveUp
  }

  private struct State {
    var blocks: [Block]
    var presentCount = 0
    var waiters: [WaitingRead] = []
    /// The block after the last one read: where the filler looks for gaps first.
    var cursor = 0
    var filler = Filler.idle
    /// Set once, when the copy cannot be used any more; its GETs stop at their next bytes.
    var broken: Broken?
    /// Why the last GET failed, for a pin to say why its file is not staged.
    var lastError: BucketError?

    func isGap(_ i: Int) -> Bool { blocks[i] == .gap }
    func allPresent(_ range: Range<Int>) -> Bool { range.allSatisfy { blocks[$0].crc != nil } }
  }

  private let state: Mutex<State>

  init?(name: String, metadata: StorageMetadata, path: String, client: any ObjectClient, writer: StagingWriter,
        log: @escaping @Sendable (String) -> Void, onEnd: @escaping @Sendable (PartialCopy, _ filled: Bool) -> Void) {
    // A fresh file of ours: whatever had the name (a leftover, or a link someone planted) is
    // removed, never written through.
    unlink(path)
    let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
    guard fd >= 0 else { return nil }
    guard ftruncate(fd, off_t(metadata.size)) == 0 else {
      let error = errno
      close(fd)
      unlink(path)
      errno = error
      return nil
    }
    self.name = name
    self.metadata = metadata
    self.path = path
    self.file = FileDescriptor(fd)
    self.client = client
    self.stagingWriter = writer
    self.log = log
    self.onEnd = onEnd
    blockCount = Int((metadata.size + Self.blockSize - 1) / Self.blockSize)
    state = Mutex(State(blocks: Array(repeating: .gap, count: blockCount)))
  }

  private func blocks(offset: Int64, end: Int64) -> Range<Int> {
    Int(offset / Self.blockSize)..<Int((end - 1) / Self.blockSize + 1)
  }

  /// Bytes held so far.
  var bytesPresent: Int64 {
    state.withLock { s in
      let full = Int64(s.presentCount) * Self.blockSize
      return s.blocks.last?.crc != nil ? full - (Int64(blockCount) * Self.blockSize - size) : full
    }
  }

  var isBroken: Bool { state.withLock { $0.broken != nil } }

  /// Why the copy did not complete, in words: the server's last refusal, or what broke it.
  var failure: String {
    state.withLock { s in
      if let error = s.lastError { return error.detail }
      switch s.broken {
      case .cannotWrite(let why)?: return "cannot write the staged copy: \(why)"
      case .damaged(let why)?: return "the staged copy is damaged: \(why)"
      case .abandoned?, nil: return "the download was abandoned"
      }
    }
  }

  /// The checksums of every block, once all are present.
  var checksums: BlockChecksums? {
    state.withLock { s in s.presentCount == blockCount ? BlockChecksums(crcs: s.blocks.compactMap(\.crc)) : nil }
  }

  /// True when bytes `offset..<end` are in the file; records the read for the filler.
  func holds(offset: Int64, end: Int64) -> Bool {
    let wanted = blocks(offset: offset, end: end)
    return state.withLock { s in
      guard s.broken == nil, s.allPresent(wanted) else { return false }
      s.cursor = wanted.upperBound
      return true
    }
  }

  /// Waits until bytes `offset..<end` are in the file, fetching those nobody is fetching yet.
  /// Throws the server's error for a block that could not be fetched, or `Broken` when the copy
  /// cannot be used (then read from the server without it).
  func wait(offset: Int64, end: Int64, by deadline: ReadDeadline? = nil) async throws -> Void {
    let wanted = blocks(offset: offset, end: end)
    while true {
      var runs: [Range<Int>] = []
      let outcome = await Waiter<Void>.wait(by: deadline) { waiter in
        let ready = state.withLock { s -> Result<Void, BucketError>? in
          if s.broken != nil { return .failure(BucketError(code: .cancelled, object: name, detail: "copy unusable")) }
          s.cursor = wanted.upperBound
          runs = Self.claimGaps(&s, in: wanted)
          if s.allPresent(wanted) { return .success(()) }
          s.waiters.append(WaitingRead(blocks: wanted, waiter: waiter))
          return nil
        }
        for run in runs { startFetch(run, byFiller: false) }
        return ready
      }
      if let broken = state.withLock({ $0.broken }) { throw broken }
      switch outcome {
      case .success:
        if state.withLock({ $0.allPresent(wanted) }) { return }
      // A fetch of some of these blocks failed (its error is the read's), or the deadline passed.
      case .failure(let error):
        throw error
      }
    }
  }

  /// Claims the runs of blocks in `range` that are neither present nor being fetched.
  private static func claimGaps(_ s: inout State, in range: Range<Int>) -> [Range<Int>] {
    let runs = IndexRuns.all(in: range, where: s.isGap)
    for run in runs { claim(run, &s) }
    return runs
  }

  private static func claim(_ run: Range<Int>, _ s: inout State) {
    for i in run { s.blocks[i] = .fetching }
  }

  /// Starts the filler unless it runs or gave up: it fetches every gap, a few GETs at a time.
  func startFilling() {
    let start = state.withLock { s -> Bool in
      guard case .idle = s.filler, s.broken == nil, s.presentCount < blockCount else { return false }
      s.filler = .running
      return true
    }
    guard start else { return }
    Task { await fill() }
  }

  private func fill() async {
    let perFetch = Int(Self.fetchSize / Self.blockSize)
    let succeeded = await withTaskGroup(of: Bool.self) { group -> Bool in
      var running = 0
      var ok = true
      while ok {
        let run = state.withLock { s -> Range<Int>? in
          guard s.broken == nil else { return nil }
          // The first gap at or after the cursor, else the first one before it; one run, as one
          // GET fetches it (claiming further gaps here would leave them claimed by nobody).
          guard let run = IndexRuns.first(in: s.cursor..<blockCount, limit: perFetch, where: s.isGap)
            ?? IndexRuns.first(in: 0..<min(s.cursor, blockCount), limit: perFetch, where: s.isGap)
          else { return nil }
          Self.claim(run, &s)
          return run
        }
        guard let run else { break }
        if running == Self.fillerConcurrency {
          ok = await group.next() ?? true
          running -= 1
        }
        group.addTask { await self.fetch(run, byFiller: true) }
        running += 1
      }
      for await done in group where !done { ok = false }
      return ok
    }
    let gaveUp = state.withLock { s -> Bool in
      s.filler = succeeded ? .idle : .gaveUp
      return !succeeded && s.broken == nil
    }
    if gaveUp {
      // Reads of the open handles go on without it (to the server, through the block cache);
      // the next open makes a new copy.
      breakCopy(.abandoned)
      onEnd(self, false)
    }
  }

  private func startFetch(_ run: Range<Int>, byFiller: Bool) {
    Task { _ = await fetch(run, byFiller: byFiller) }
  }

  /// GETs the blocks of `run` (claimed by the caller) into the file; true when all arrived.
  private func fetch(_ run: Range<Int>, byFiller: Bool) async -> Bool {
    let bytes = Int64(run.lowerBound) * Self.blockSize..<min(size, Int64(run.upperBound) * Self.blockSize)
    let valve = DeliveryValve()
    let writer = BlockWriter(
      writer: stagingWriter, valve: valve, file: file, run: run, end: bytes.upperBound, blockSize: Self.blockSize
    ) { [self] outcome in
      switch outcome {
      case .success(let (blocks, crcs)): if !blocks.isEmpty { markPresent(blocks, crcs: crcs) }
      case .failure(let broken): breakCopy(broken)
      }
    }
    do throws(BucketError) {
      do {
        try await RangedGet.run(client, name, range: bytes, generation: metadata.generation, valve: valve) { [self] chunk, offset in
          if isBroken { return .stop }
          return writer.add(chunk, at: offset)
        }
        writer.close()
      } catch {
        writer.close()
        throw error
      }
      return true
    } catch {
      failed(writer.submitted.upperBound..<run.upperBound, error: error)
      if byFiller && error.code != .cancelled && !isBroken {
        log("staging \(name): \(error.detail)")
      }
      if !byFiller { startFilling() }
      return false
    }
  }

  private func markPresent(_ run: Range<Int>, crcs: [UInt32]) {
    let (ready, filled) = state.withLock { s -> ([Waiter<Void>], Bool) in
      var added = 0
      for (i, crc) in zip(run, crcs) where s.blocks[i].crc == nil {
        s.blocks[i] = .present(crc: crc)
        added += 1
      }
      s.presentCount += added
      var ready: [Waiter<Void>] = []
      let map = s.blocks
      s.waiters.removeAll { w in
        guard w.blocks.overlaps(run), w.blocks.allSatisfy({ map[$0].crc != nil }) else { return false }
        ready.append(w.waiter)
        return true
      }
      return (ready, added > 0 && s.presentCount == blockCount)
    }
    for waiter in ready { waiter.resume(.success(())) }
    if filled { onEnd(self, true) }
  }

  /// Gives back the blocks of a failed GET and fails the reads that were waiting for them.
  private func failed(_ run: Range<Int>, error: BucketError) {
    let waiting = state.withLock { s -> [Waiter<Void>] in
      if error.code != .cancelled { s.lastError = error }
      for i in run where s.blocks[i].crc == nil { s.blocks[i] = .gap }
      var out: [Waiter<Void>] = []
      s.waiters.removeAll { w in
        guard w.blocks.overlaps(run) else { return false }
        out.append(w.waiter)
        return true
      }
      return out
    }
    for waiter in waiting { waiter.resume(.failure(error)) }
  }

  /// Marks the copy unusable and wakes every waiting read (they go to the server instead).
  func breakCopy(_ reason: Broken) {
    let (waiting, first) = state.withLock { s -> ([Waiter<Void>], Bool) in
      let first = s.broken == nil
      if first { s.broken = reason }
      let w = s.waiters.map(\.waiter)
      s.waiters = []
      return (w, first)
    }
    for waiter in waiting { waiter.resume(.failure(BucketError(code: .cancelled, object: name, detail: "copy unusable"))) }
    if first, case .cannotWrite(let why) = reason {
      log("staging \(name): cannot write the staged copy (\(why)); reading from the server")
      onEnd(self, false)
    }
    if first, case .damaged(let why) = reason {
      log("staging \(name): the copy being staged is damaged (\(why)); dropped, reading from the server")
      onEnd(self, false)
    }
  }

  /// Bytes `offset..<end` (all present) read from the file, each block checked against the
  /// checksum taken as it arrived; nil, and the copy dropped, when one does not match (the file
  /// was changed under us: a flipped byte, a truncation, a hole punched).
  func verifiedReply(offset: Int64, end: Int64) -> ReadReply? {
    let wanted = blocks(offset: offset, end: end)
    guard let crcs = state.withLock({ s -> [UInt32]? in
      s.broken == nil && s.allPresent(wanted) ? wanted.map { s.blocks[$0].crc! } : nil
    }) else { return nil }
    let from = Int64(wanted.lowerBound) * Self.blockSize
    let to = min(size, Int64(wanted.upperBound) * Self.blockSize)
    var damage: String?
    let buffer = ReadBuffer.filled(count: Int(to - from), answer: Int(offset - from)..<Int(end - from)) { raw in
      guard BlockChecksums.readFully(file.fd, into: raw, at: from) else {
        damage = "reading it failed: \(String(cString: strerror(errno)))"
        return false
      }
      if let bad = BlockChecksums(crcs: crcs).firstMismatch(UnsafeRawBufferPointer(raw), firstBlock: 0) {
        damage = "block \(wanted.lowerBound + bad) does not match its checksum"
        return false
      }
      return true
    }
    guard let buffer else {
      breakCopy(.damaged(damage ?? "reading it failed"))
      return nil
    }
    return .buffer(buffer)
  }

  static func writeFully(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, at offset: Int64) -> Bool {
    var done = 0
    while done < bytes.count {
      let n = pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
      if n < 0 && errno == EINTR { continue }
      guard n > 0 else { return false }
      done += n
    }
    return true
  }
}

/// Gathers one GET's bytes (libcurl hands them on 16 KiB at a time) into writes of up to a few
/// blocks, made by the staging writer: each write costs a system call and an inode update,
/// whatever its size. Block checksums are taken as bytes arrive, so a write may end mid-block (it
/// does when the pool has no buffer for the rest of a chunk: the GET then writes what it holds and
/// pauses). Touched only by the GET's transfer callbacks, then by the task that awaited it.
final class BlockWriter: @unchecked Sendable {
  let writer: StagingWriter
  let claim: StagingWriter.Claim
  let file: FileDescriptor
  let end: Int64
  let blockSize: Int64
  /// Called on the writer's thread with the blocks a write completed and their CRC32Cs, or why
  /// it failed.
  let written: @Sendable (Result<(Range<Int>, [UInt32]), PartialCopy.Broken>) -> Void
  /// Blocks whose every byte was handed to the writer so far.
  private(set) var submitted: Range<Int>
  private var buffer: StagingWriter.Buffer?
  private var buffered = 0
  /// Where `buffer` starts in the object.
  private var bufferStart: Int64
  /// The checksum of the block being received, and the checksums of blocks completed since the
  /// last write was handed over.
  private var blockCRC = CRC32C()
  private var blockFill: Int64 = 0
  private var completedCRCs: [UInt32] = []

  init(
    writer: StagingWriter, valve: DeliveryValve, file: FileDescriptor, run: Range<Int>, end: Int64, blockSize: Int64,
    written: @escaping @Sendable (Result<(Range<Int>, [UInt32]), PartialCopy.Broken>) -> Void
  ) {
    self.writer = writer
    claim = StagingWriter.Claim(valve: valve)
    self.file = file
    self.end = end
    self.blockSize = blockSize
    self.written = written
    submitted = run.lowerBound..<run.lowerBound
    bufferStart = Int64(run.lowerBound) * blockSize
  }

  deinit { close() }

  /// The GET ended: a buffer still held (bytes of an unfinished block) and a buffer handed to
  /// this GET but not used go back to the pool, and the GET leaves the queue for buffers.
  func close() {
    if let buffer {
      self.buffer = nil
      writer.giveBack(buffer)
    }
    writer.release(claim)
  }

  /// Takes bytes at `offset` (each GET delivers in order), or none when no buffer is free for
  /// them: then the GET pauses, holding no buffer, and delivers them again when handed one.
  func add(_ chunk: UnsafeRawBufferPointer, at offset: Int64) -> HTTPTransfer.Flow {
    precondition(offset == bufferStart + Int64(buffered), "bytes out of order")
    // Every buffer the chunk needs is taken before any byte is, since libcurl takes a chunk
    // whole or not at all.
    var room = buffer.map { $0.bytes.count - buffered } ?? 0
    var extra: [StagingWriter.Buffer] = []
    while room < chunk.count {
      guard let next = writer.buffer(for: claim) else {
        extra.forEach { writer.giveBack($0) }
        if let held = buffer, buffered > 0 { submit(held) }
        return .pause
      }
      extra.append(next)
      room += next.bytes.count
    }
    var rest = chunk
    while !rest.isEmpty {
      let current = buffer ?? extra.removeFirst()
      buffer = current
      let n = min(rest.count, current.bytes.count - buffered)
      let piece = UnsafeRawBufferPointer(rebasing: rest[..<n])
      UnsafeMutableRawBufferPointer(rebasing: current.bytes[buffered..<(buffered + n)]).copyMemory(from: piece)
      checksum(piece)
      buffered += n
      rest = UnsafeRawBufferPointer(rebasing: rest[n...])
      if buffered == current.bytes.count || bufferStart + Int64(buffered) == end { submit(current) }
    }
    return .accept
  }

  /// Carries the block checksums over `bytes`, which follow the bytes seen so far.
  private func checksum(_ bytes: UnsafeRawBufferPointer) {
    var rest = bytes
    while !rest.isEmpty {
      let n = Int(min(Int64(rest.count), blockSize - blockFill))
      blockCRC.update(UnsafeRawBufferPointer(rebasing: rest[..<n]))
      blockFill += Int64(n)
      rest = UnsafeRawBufferPointer(rebasing: rest[n...])
      let blockStart = Int64(submitted.upperBound + completedCRCs.count) * blockSize
      if blockFill == blockSize || blockStart + blockFill == end {
        completedCRCs.append(blockCRC.value)
        blockCRC = CRC32C()
        blockFill = 0
      }
    }
  }

  private func submit(_ full: StagingWriter.Buffer) {
    let start = bufferStart
    let count = buffered
    bufferStart += Int64(buffered)
    let blocks = submitted.upperBound..<(submitted.upperBound + completedCRCs.count)
    let crcs = completedCRCs
    completedCRCs = []
    submitted = submitted.lowerBound..<blocks.upperBound
    let callback = written
    buffer = nil
    buffered = 0
    writer.write(full, count: count, to: file, at: start) { failure in
      if let failure { callback(.failure(.cannotWrite(failure))) } else { callback(.success((blocks, crcs))) }
    }
  }
}

/// An open file descriptor, closed when the last holder lets go: a read of a staged copy, or a
/// backing id registered for it, keeps it open even if the copy is dropped meanwhile.
package final class FileDescriptor: Sendable {
  package let fd: Int32
  init(_ fd: Int32) { self.fd = fd }
  deinit { close(fd) }
}
