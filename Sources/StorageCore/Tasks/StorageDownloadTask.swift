// A download into a local file. Bytes go to a temporary name in the destination's folder and are
// renamed into place only when complete and verified, so the destination never holds a partial
// file. Pause keeps the temporary file; resume continues with `Range: bytes=N-` and checks that
// the object's generation did not change (a changed object restarts from byte 0, or fails when
// the caller pinned a generation). `getData(maxSize:)` runs the same task into a private
// temporary file and hands over its bytes, so it can be observed, paused and cancelled like any
// download; a `maxSize` refuses an object as soon as its size is known.
import Foundation
import Synchronization

public final class StorageDownloadTask: StorageTask, @unchecked Sendable {
  public let destination: URL
  let pinnedGeneration: Int64?
  /// fsync before the rename, for copies that must survive a crash (staging); `cp` skips it as
  /// cp(1) does.
  let durable: Bool
  /// Whether an object stored gzip-compressed is handed over decompressed (the SDK's answer) or
  /// as stored (`bucketfs cp`, like gsutil and rclone).
  let decodesGzip: Bool
  let temporaryPath: String

  /// Where the bytes are written until the download completes (they arrive in order from byte 0).
  public var partialFilePath: String { temporaryPath }

  /// The generation the bytes came from, once the server has answered.
  public var generation: Int64? { servedGeneration.withLock { $0 } }

  /// The generation of the bytes on disk (nil until the server answered or after a restart).
  private let servedGeneration = Mutex<Int64?>(nil)

  /// For `getData(maxSize:)`: the limit, and the bytes once the download succeeded.
  let maxSize: Int64?
  let inMemory: Bool
  private let collected = Mutex<Data?>(nil)
  /// The downloaded bytes of a `getData(maxSize:)` task, once it succeeded.
  public var data: Data? { collected.withLock { $0 } }

  init(
    reference: StorageReference, destination: URL, generation: Int64?, durable: Bool, maxSize: Int64? = nil, inMemory: Bool = false,
    decodesGzip: Bool = true
  ) {
    // `URL(string: "path/to/file")`, as the SDK's examples write it, is a path relative to the
    // working directory.
    let destination = destination.isFileURL ? destination : URL(fileURLWithPath: destination.path)
    self.destination = destination
    self.durable = durable
    self.pinnedGeneration = generation
    self.maxSize = maxSize
    self.inMemory = inMemory
    self.decodesGzip = decodesGzip
    let folder = destination.deletingLastPathComponent().path
    let random = String(UInt32.random(in: 0...UInt32.max), radix: 36)
    // Beside the destination, named after it where that fits in a name (255 bytes): a name
    // that long itself left no room, and the download failed "File name too long".
    let suffix = ".bucketfs-" + random + ".part"
    var stem = destination.lastPathComponent
    if 1 + stem.utf8.count + suffix.utf8.count > 255 {
      stem = String(decoding: Array(stem.utf8.prefix(255 - 1 - suffix.utf8.count - 4)), as: UTF8.self)
    }
    self.temporaryPath = folder + "/." + stem + suffix
    super.init(reference: reference)
  }

  /// Stops for good; the temporary file is removed and the task fails with `cancelled`.
  public func cancel() {
    guard !phase.isFinal else { return }
    stopDriver()
    unlink(temporaryPath)
    finish(.cancelled, error: .cancelled)
  }

  override func drive() async {
    let storage = reference.storage
    let (timeouts, budget) = storage.settings.withLock { ($0.timeouts, $0.maxDownloadRetryTime) }
    do {
      try await RetryBudget.run(storage, seconds: budget, object: reference.description) { () async throws(StorageError) -> Attempt<Void> in
        guard phase == .running && !Task.isCancelled else { return .done(()) }
        let before = bytesOnDisk()
        // A connection that breaks every few hundred kilobytes still gets the file through.
        return try await attempt(timeouts: timeouts).markingProgress(bytesOnDisk() > before)
      }
    } catch {
      // A pause cancels the driver: that is no failure.
      if Task.isCancelled || phase != .running { return }
      fail(error)
    }
  }

  private func bytesOnDisk() -> Int64 {
    var st = stat()
    return stat(temporaryPath, &st) == 0 ? Int64(st.st_size) : 0
  }

  private func fail(_ error: StorageError) {
    unlink(temporaryPath)
    finish(.failed, error: error)
  }

  /// One GET from the bytes already on disk to the end: done (finished, or stopped by a pause
  /// or a cancel), or how it failed, for the retry rule; a failure for good is thrown.
  private func attempt(timeouts: TransportTimeouts) async throws(StorageError) -> Attempt<Void> {
    let object = reference.description
    // The SDK writes into missing folders too.
    try? FileManager.default.createDirectory(
      atPath: destination.deletingLastPathComponent().path, withIntermediateDirectories: true)
    let fd = open(temporaryPath, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
    if fd < 0 {
      throw StorageError(
        code: .unknown, object: object, detail: "cannot create \(temporaryPath): \(String(cString: strerror(errno)))", localFile: true)
    }
    defer { close(fd) }
    let have = Int64(lseek(fd, 0, SEEK_END))
    let file = DownloadFile(fd: fd, offset: have)
    if have > 0 {
      // Re-hash what is already on disk so the final check covers the whole file.
      if let handle = FileHandle(forReadingAtPath: temporaryPath) {
        var left = have
        while left > 0 {
          let chunk = handle.readData(ofLength: Int(min(left, 4 << 20)))
          if chunk.isEmpty { break }
          chunk.withUnsafeBytes { file.hash($0) }
          left -= Int64(chunk.count)
        }
        try? handle.close()
      }
    }
    let expected = pinnedGeneration ?? servedGeneration.withLock { $0 }
    let (request, token) = try await reference.storage.authorize(
      reference.storage.wire.download(reference.path, range: nil, from: have > 0 ? have : nil, generation: pinnedGeneration))
    let progressStep: Int64 = 256 * 1024
    file.lastFired = have
    // The file is written on a thread of its own: a slow disk slows this download only.
    let handOff = HandOff(label: "bucketfs.download.write") { [self] bytes in
      guard file.write(bytes) else { return false }
      if file.offset - file.lastFired >= progressStep {
        file.lastFired = file.offset
        updateProgress(completed: file.offset)
        fire([.progress])
      }
      return true
    }
    // With a limit, no byte past it is taken: a larger object stops the transfer there.
    let sink = ObjectSink(end: maxSize, received: have, onWhole: .startOver) { bytes, _ in handOff.offer(bytes) }
    let head: HTTPResponseHead
    do {
      head = try await reference.storage.client.stream(
        request, timeouts: timeouts,
        onHead: { [self] head in
          guard sink.begin(head, expected: expected) else { return false }
          guard sink.answer.isSuccess else { return true }
          if let maxSize, let total = head.objectSize, total > maxSize { return false }
          let hasCRC = head["x-goog-hash"]?.contains("crc32c=") ?? false
          if have == 0 { file.wantsMD5 = !hasCRC }
          if sink.restarted {
            // The server ignored the Range: start the file over (truncated by the writer's
            // thread before its first write: the transfer thread does no disk I/O).
            file.startOver = true
            file.offset = 0
            file.digest = Digest(.md5)
            file.crc = CRC32C()
            file.wantsMD5 = !hasCRC
          }
          updateProgress(completed: file.offset, total: head.objectSize)
          return true
        },
        onFlow: { bytes in sink.take(bytes) },
        started: { handOff.attach($0) })
      await handOff.drain()
    } catch {
      await handOff.drain()
      // A cancelled driver belongs to a pause, even if a resume already set the phase back.
      if Task.isCancelled || phase != .running { return .done(()) }
      if let changed = sink.answer.changedTo { return try changedObject(changed, expected: expected) }
      if let maxSize, let total = sink.overran ?? sink.total, total > maxSize { throw .downloadSizeExceeded(total: total, maxSize: maxSize) }
      if let writeError = file.writeError {
        throw StorageError(code: .unknown, object: object, detail: "writing \(destination.path) failed: \(writeError)", localFile: true)
      }
      return .broken(error)
    }
    if head.status == 416, have > 0, head.objectSize == have {
      // A resume at the end of the object (paused after its last byte): GCS answers 416, the
      // official emulator the whole body (which starts over, above). The bytes are all here.
      if Task.isCancelled || phase != .running { return .done(()) }
      return try await completeAtEnd(file: file, fd: fd, expected: expected)
    }
    guard (200..<300).contains(head.status) else {
      if head.status == 404, let pinned = pinnedGeneration { throw .generationGone(object, pinned) }
      return .answered(head, body: sink.answer.errorBody, token: token)
    }
    if Task.isCancelled || phase != .running { return .done(()) }
    return try complete(head: head, file: file, fd: fd)
  }

  /// Every byte is on disk but no body said which object they belong to: the metadata does
  /// (generation and hashes), and they are checked as a body's would be.
  private func completeAtEnd(file: DownloadFile, fd: Int32, expected: Int64?) async throws(StorageError) -> Attempt<Void> {
    let metadata: StorageMetadata
    do {
      metadata = try await reference.getMetadata()
    } catch {
      guard Backoff.isRetryable(status: error.httpStatus ?? 0) || error.code == .serverUnreachable else { throw error }
      return .retry(error)
    }
    if let expected, metadata.generation != expected { return try changedObject(metadata.generation, expected: expected) }
    guard metadata.size == file.offset else {
      // The object is another size now: what is on disk is not it.
      return try changedObject(metadata.generation, expected: expected ?? -1)
    }
    var hashes: [String] = []
    if let crc = metadata.crc32c { hashes.append("crc32c=\(crc)") }
    if let md5 = metadata.md5Hash {
      hashes.append("md5=\(md5)")
      file.wantsMD5 = metadata.crc32c == nil
    }
    var headers = ["content-length": String(file.offset), "x-goog-generation": String(metadata.generation)]
    if !hashes.isEmpty { headers["x-goog-hash"] = hashes.joined(separator: ",") }
    if let encoding = metadata.contentEncoding { headers["content-encoding"] = encoding }
    return try complete(head: HTTPResponseHead(status: 200, headers: headers), file: file, fd: fd)
  }

  private func changedObject(_ served: Int64, expected: Int64?) throws(StorageError) -> Attempt<Void> {
    if pinnedGeneration != nil { throw .objectChanged(reference.description, from: expected, to: served) }
    // Not pinned: the bytes on disk belong to an older version; start over with the new one, at once.
    unlink(temporaryPath)
    servedGeneration.withLock { $0 = nil }
    return .retry(StorageError(code: .objectChanged, object: reference.description, detail: "object changed"), progressed: true)
  }

  private func complete(head: HTTPResponseHead, file: DownloadFile, fd: Int32) throws(StorageError) -> Attempt<Void> {
    let object = reference.description
    let total = head.objectSize ?? file.offset
    if let generation = head.generation {
      servedGeneration.withLock { $0 = generation }
    }
    guard file.offset == total else {
      return .retry(.shortBody(object, received: file.offset, of: total))
    }
    if let problem = verify(hashHeader: head["x-goog-hash"], file: file) {
      unlink(temporaryPath)
      throw StorageError(code: .nonMatchingChecksum, object: object, detail: problem)
    }
    if decodesGzip && GzipDecoding.isGzip(head) {
      do throws(StorageError) {
        try GzipDecoding.decodeFile(temporaryPath, object: object)
      } catch {
        unlink(temporaryPath)
        throw error
      }
    }
    if inMemory {
      let bytes = FileManager.default.contents(atPath: temporaryPath)
      unlink(temporaryPath)
      guard let bytes else {
        throw StorageError(code: .unknown, object: object, detail: "cannot read back the downloaded bytes")
      }
      collected.withLock { $0 = bytes }
    } else if (durable && fsync(fd) != 0) || rename(temporaryPath, destination.path) != 0 {
      let reason = String(cString: strerror(errno))
      throw StorageError(code: .unknown, object: object, detail: "cannot finish \(destination.path): \(reason)", localFile: true)
    }
    updateProgress(completed: total, total: total)
    finish(.succeeded)
    return .done(())
  }

  /// Compares the bytes with `x-goog-hash` (CRC32C when given, else MD5); nil when they agree.
  private func verify(hashHeader: String?, file: DownloadFile) -> String? {
    guard let hashHeader else { return nil }
    var hashes: [String: String] = [:]
    for part in hashHeader.split(separator: ",") {
      let kv = part.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
      if kv.count == 2 { hashes[String(kv[0])] = String(kv[1]) }
    }
    if let crc = hashes["crc32c"] {
      return file.crc.matches(crc) ? nil : "CRC32C mismatch: server says \(crc), received bytes give \(file.crc.base64)"
    }
    if let md5 = hashes["md5"], file.wantsMD5 {
      let got = file.digest.finalize().base64EncodedString()
      return got == md5 ? nil : "MD5 mismatch: server says \(md5), received bytes hash to \(got)"
    }
    return nil
  }
}

/// The file a download's bytes are written to, and their hashes: written by the hand-off's
/// thread, set up by the transfer thread before an attempt's first bytes.
final class DownloadFile: @unchecked Sendable {
  let fd: Int32
  /// Bytes written to the file.
  var offset: Int64
  var lastFired: Int64 = 0
  var writeError: String?
  var digest = Digest(.md5)
  var crc = CRC32C()

  init(fd: Int32, offset: Int64) {
    self.fd = fd
    self.offset = offset
  }

  /// MD5 costs more than receiving the bytes; it is computed only when the server gives no CRC32C.
  var wantsMD5 = true

  func hash(_ bytes: UnsafeRawBufferPointer) {
    crc.update(bytes)
    if wantsMD5 { digest.update(bytes) }
  }

  /// Set when the file must be emptied before the next write.
  var startOver = false

  func write(_ bytes: UnsafeRawBufferPointer) -> Bool {
    if startOver {
      startOver = false
      guard ftruncate(fd, 0) == 0, lseek(fd, 0, SEEK_SET) == 0 else {
        writeError = String(cString: strerror(errno))
        return false
      }
    }
    var done = 0
    while done < bytes.count {
      let n = Foundation.write(fd, bytes.baseAddress! + done, bytes.count - done)
      if n < 0 {
        if errno == EINTR { continue }
        writeError = String(cString: strerror(errno))
        return false
      }
      done += n
    }
    hash(bytes)
    offset += Int64(bytes.count)
    return true
  }
}

extension StorageReference {
  /// Downloads the object into `fileURL` (see `StorageDownloadTask`). With `generation`, bytes of
  /// any other generation fail the task with `objectChanged`; with `durable`, the file is fsynced
  /// before it appears; with `storedBytes`, an object stored gzip-compressed is written as stored
  /// instead of decompressed.
  @discardableResult
  public func write(toFile fileURL: URL, generation: Int64? = nil, durable: Bool = false, storedBytes: Bool = false) -> StorageDownloadTask {
    let task = StorageDownloadTask(reference: self, destination: fileURL, generation: generation, durable: durable, decodesGzip: !storedBytes)
    task.start()
    return task
  }
}
