// An upload of bytes or a file. Small sources go in one multipart request; larger ones use the
// resumable protocol in chunks, and an interrupted chunk continues from the offset the server
// reports (`X-Goog-Upload-Size-Received`), so a reset costs one chunk at most.
import Foundation
import Synchronization

public final class StorageUploadTask: StorageTask, @unchecked Sendable {
  enum Source: Sendable {
    case data(Data)
    case file(path: String, size: Int64)

    var size: Int64 {
      switch self {
      case .data(let d): return Int64(d.count)
      case .file(_, let size): return size
      }
    }

    func body(_ range: Range<Int64>) -> HTTPRequest.Body {
      switch self {
      case .data(let d): return .data(d.subdata(in: Int(range.lowerBound)..<Int(range.upperBound)))
      case .file(let path, _): return .file(path: path, offset: range.lowerBound, length: Int64(range.count))
      }
    }
  }

  /// Sources up to this size go in one multipart request, as the JS SDK does.
  static let multipartLimit: Int64 = 256 * 1024

  let source: Source
  let uploadMetadata: StorageMetadata
  let preconditions: Preconditions
  private let session = Mutex<String?>(nil)
  /// The chunk granularity the server asked for (X-Goog-Upload-Chunk-Granularity), else 256 KiB.
  private let granularity = Mutex<Int64>(Storage.chunkGranularity)

  /// Where the session is kept beyond this task, when the caller asked.
  let keptSession: UploadSession?

  init(
    reference: StorageReference, source: Source, metadata: StorageMetadata, preconditions: Preconditions = Preconditions(),
    session kept: UploadSession? = nil
  ) {
    self.source = source
    self.uploadMetadata = metadata
    self.preconditions = preconditions
    self.keptSession = kept
    super.init(reference: reference)
    if let url = kept?.url { session.withLock { $0 = url } }
    state.withLock {
      $0.total = source.size
      $0.metadata = metadata
    }
  }

  /// Stops for good and tells the server to drop the session.
  public func cancel() {
    guard !phase.isFinal else { return }
    stopDriver()
    if let url = session.withLock({ $0 }) {
      let request = reference.storage.wire.cancelUpload(sessionURL: url)
      reference.storage.client.start(request, onData: { _ in true }, onComplete: { _ in })
    }
    finish(.cancelled, error: .cancelled)
  }

  override func drive() async {
    do {
      guard let metadata = try await run() else { return }
      updateProgress(completed: source.size)
      finish(.succeeded, metadata: metadata)
    } catch {
      if !Task.isCancelled && phase == .running { finish(.failed, error: error) }
    }
  }

  private var contentType: String {
    if let type = uploadMetadata.contentType { return type }
    if case .file(let path, _) = source { return ContentType.infer(fromName: path) }
    return ContentType.fallback
  }

  /// Over the Firebase API a precondition is sent, but nothing says the server keeps it: the
  /// official emulator ignores `ifGenerationMatch` on v0 (firebase-tools
  /// `src/emulator/storage/apis/firebase.ts` reads no precondition), the JS SDK never sends one,
  /// and Google documents none for v0. So the object's generation is checked here, just before
  /// the upload, and a mismatch fails as the server's 412 would. What remains is the window
  /// between this check and the upload's commit (one round trip plus the upload's own time),
  /// in which another writer's change can still be overwritten; the GCS API closes it.
  private func checkOverFirebase() async throws(StorageError) {
    let current: (generation: Int64, metageneration: Int64)
    do {
      let m = try await reference.getMetadata()
      current = (m.generation, m.metageneration)
    } catch where error.code == .objectNotFound {
      current = (0, 0)
    }
    if let g = preconditions.ifGenerationMatch, g != current.generation {
      throw StorageError(
        code: .preconditionFailed, object: reference.description, httpStatus: 412,
        detail: "precondition failed (412): the object's generation is \(current.generation), not \(g) (checked before the upload: the Firebase API does not promise to)")
    }
    if let m = preconditions.ifMetagenerationMatch, m != current.metageneration {
      throw StorageError(
        code: .preconditionFailed, object: reference.description, httpStatus: 412,
        detail: "precondition failed (412): the object's metageneration is \(current.metageneration), not \(m) (checked before the upload: the Firebase API does not promise to)")
    }
  }

  /// Runs the upload; nil when it stopped for a pause.
  private func run() async throws(StorageError) -> StorageMetadata? {
    let metadata = uploadMetadata.copy()
    metadata.contentType = contentType
    let wire = reference.storage.wire
    let object = reference.description
    let runner = RequestRunner(storage: reference.storage, budget: reference.storage.maxUploadRetryTime, object: object)
    let json = metadata.writableJSON(name: reference.fullPath)
    if reference.storage.api == .firebase && preconditions != Preconditions() && session.withLock({ $0 }) == nil {
      try await checkOverFirebase()
    }

    if source.size <= Self.multipartLimit && session.withLock({ $0 }) == nil {
      let bytes: Data
      switch source {
      case .data(let d): bytes = d
      case .file(let path, _):
        guard let d = FileManager.default.contents(atPath: path) else {
          throw StorageError(code: .unknown, object: object, detail: "cannot read \(path)")
        }
        bytes = d
      }
      let response = try await runner.run(
        wire.multipartUpload(
          reference.path, metadataJSON: json, contentType: metadata.contentType!, bytes: bytes, preconditions: preconditions))
      return try StorageMetadata(data: response.body).through(reference)
    }

    var offset: Int64 = 0
    var url: String
    if let existing = session.withLock({ $0 }) {
      switch try await resumedOffset(existing, runner: runner) {
      case .received(let bytes):
        url = existing
        offset = bytes
      case .finished(let metadata): return metadata
      case .forgotten: url = try await startOver(metadataJSON: json, contentType: metadata.contentType!, runner: runner)
      }
    } else {
      url = try await openSession(metadataJSON: json, contentType: metadata.contentType!, runner: runner)
    }
    let (configuredChunk, timeouts, budget) = reference.storage.settings.withLock {
      ($0.uploadChunkSize, $0.timeouts, $0.maxUploadRetryTime)
    }
    // Every chunk but the last is a multiple of the granularity the server asked for.
    let chunkSize = Storage.roundedChunk(configuredChunk, granularity: granularity.withLock { $0 })
    let size = source.size
    // An attempt sends chunks from where the server has the bytes until the last one's answer
    // or a failure; the next one asks the session where it stands first.
    var failedBefore = false
    // A server that forgets every session it opens would otherwise be asked for ever.
    var restarts = 0
    do {
      return try await RetryBudget.run(reference.storage, seconds: budget, object: object) {
        () async throws(StorageError) -> Attempt<StorageMetadata?> in
        if Task.isCancelled || phase != .running { return .done(nil) }
        if failedBefore {
          switch try await resumedOffset(url, runner: runner) {
          case .received(let bytes): offset = bytes
          case .finished(let metadata): return .done(metadata)
          case .forgotten:
            // The server lost the session (restarted, or it expired): everything again.
            restarts += 1
            url = try await startOver(metadataJSON: json, contentType: metadata.contentType!, runner: runner)
            offset = 0
          }
          updateProgress(completed: offset)
        }
        failedBefore = true
        let attemptStart = offset
        while true {
          if Task.isCancelled || phase != .running { return .done(nil) }
          let end = min(size, offset + chunkSize)
          let last = end == size
          var request = wire.uploadChunk(sessionURL: url, offset: offset, total: size, body: source.body(offset..<end), finalize: last)
          // Progress while the bytes go out, not once per chunk.
          let chunkStart = offset
          let lastFired = ProgressMark(offset)
          request.onBodySent = { [self] sent in
            let done = chunkStart + sent
            updateProgress(completed: done)
            if lastFired.advance(to: done, step: 256 * 1024) { fire([.progress]) }
          }
          let (signed, token) = try await reference.storage.authorize(request)
          let response: HTTPResponse
          do throws(TransportError) {
            response = try await reference.storage.client.send(signed, timeouts: timeouts)
          } catch {
            if Task.isCancelled || phase != .running { return .done(nil) }
            return .broken(error, progressed: offset > attemptStart)
          }
          switch wire.chunkOutcome(response.head, finalize: last) {
          case .final:
            return .done(try StorageMetadata(data: response.body).through(reference))
          case .accepted:
            offset = end
            updateProgress(completed: offset)
            fire([.progress])
          case .failed where [404, 410].contains(response.head.status) && restarts < 3:
            restarts += 1
            // The session is gone (the server restarted or let it expire): everything again.
            url = try await startOver(metadataJSON: json, contentType: metadata.contentType!, runner: runner)
            offset = 0
            updateProgress(completed: 0)
          case .failed:
            return .answered(response.head, body: response.body, token: token, progressed: offset > attemptStart)
          }
        }
      }
    } catch where error.code == .cancelled && (Task.isCancelled || phase != .running) {
      return nil
    }
  }

  enum SessionState {
    case received(Int64)
    /// The upload finished (its last answer was lost, or a resume came after the end): the
    /// object is stored, and this is its metadata.
    case finished(StorageMetadata)
    /// The server no longer knows the session: it must start again.
    case forgotten
  }

  /// Opens a resumable session for the whole source (kept, when the caller keeps sessions).
  private func openSession(metadataJSON json: Data, contentType: String, runner: RequestRunner) async throws(StorageError) -> String {
    let wire = reference.storage.wire
    let start = try await runner.run(
      wire.startResumableUpload(
        reference.path, metadataJSON: json, contentType: contentType, length: source.size, preconditions: preconditions))
    guard let url = wire.sessionURL(start.head) else {
      throw StorageError(code: .unknown, object: runner.object, detail: "the server did not start an upload session")
    }
    if let granularity = start.head["x-goog-upload-chunk-granularity"].flatMap({ Int64($0) }), granularity > 0,
      granularity <= 1 << 30
    {
      self.granularity.withLock { $0 = granularity }
    }
    session.withLock { $0 = url }
    keptSession?.opened(url)
    return url
  }

  /// Where a session stands, or `.forgotten` when the server answers that it does not know it
  /// (404 and 410 on GCS; 400 from Firebase's emulator for an unknown upload id). Google's
  /// resumable-upload guide: a 404 or 410 means the upload must start over.
  private func resumedOffset(_ url: String, runner: RequestRunner) async throws(StorageError) -> SessionState {
    do throws(StorageError) {
      return try await queryOffset(url, runner: runner)
    } catch where [400, 404, 410].contains(error.httpStatus ?? 0) {
      return .forgotten
    }
  }

  /// A new session in place of one the server forgot; the old one is dropped first, also from
  /// where the caller keeps it, so that a failure to open the new one cannot leave it in use.
  private func startOver(metadataJSON json: Data, contentType: String, runner: RequestRunner) async throws(StorageError) -> String {
    session.withLock { $0 = nil }
    keptSession?.opened(nil)
    return try await openSession(metadataJSON: json, contentType: contentType, runner: runner)
  }

  /// Where the session stands. A session that says `final` is not sent another command (the
  /// official emulator answers 400, and GCS would too): its object's metadata is the result,
  /// from the query's answer when it carries them, else fetched, as the SDKs do.
  private func queryOffset(_ url: String, runner: RequestRunner) async throws(StorageError) -> SessionState {
    let wire = reference.storage.wire
    // The GCS protocol answers a query with 308, which is not a failure here.
    let response = try await runner.run(wire.queryUpload(sessionURL: url, total: source.size), accepting: 200..<400)
    guard let (received, final) = wire.receivedBytes(response.head, total: source.size) else {
      throw StorageError(code: .unknown, object: runner.object, detail: "the upload session did not report its offset")
    }
    guard final else { return .received(received) }
    if let metadata = try? StorageMetadata(data: response.body).through(reference), metadata.path == reference.fullPath {
      return .finished(metadata)
    }
    return .finished(try await reference.getMetadata())
  }
}

/// The byte count at which progress was last reported; touched by the transfer thread only.
final class ProgressMark: @unchecked Sendable {
  private var last: Int64
  init(_ start: Int64) { last = start }
  /// True (and remembered) when `done` is at least `step` past the last report.
  func advance(to done: Int64, step: Int64) -> Bool {
    guard done - last >= step else { return false }
    last = done
    return true
  }
}

extension StorageReference {
  /// Uploads `data`; the content type is `metadata.contentType` or `application/octet-stream`.
  @discardableResult
  public func putData(_ data: Data, metadata: StorageMetadata? = nil, preconditions: Preconditions = Preconditions())
    -> StorageUploadTask
  {
    // The task keeps a copy: the caller's object may change while the upload runs.
    let task = StorageUploadTask(
      reference: self, source: .data(data), metadata: metadata?.copy() ?? StorageMetadata(), preconditions: preconditions)
    task.start()
    return task
  }

  /// Uploads a local file; the content type is inferred from its extension when not given.
  @discardableResult
  public func putFile(
    from fileURL: URL, metadata: StorageMetadata? = nil, preconditions: Preconditions = Preconditions(), session: UploadSession? = nil
  ) -> StorageUploadTask {
    let size = (try? FileManager.default.attributesOfItem(atPath: fileURL.path)[.size] as? NSNumber)?.int64Value
    let task = StorageUploadTask(
      reference: self, source: .file(path: fileURL.path, size: size ?? 0), metadata: metadata?.copy() ?? StorageMetadata(),
      preconditions: preconditions, session: session)
    if size == nil {
      task.finish(.failed, error: StorageError(code: .unknown, object: fileURL.path, detail: "cannot read the file"))
    } else {
      task.start()
    }
    return task
  }
}

extension StorageReference {
  /// Async form: uploads and returns the server's metadata; `onProgress` hears each progress
  /// event (on the callback queue).
  public func putDataAsync(
    _ data: Data, metadata: StorageMetadata? = nil, preconditions: Preconditions = Preconditions(),
    onProgress: (@Sendable (Progress?) -> Void)? = nil
  ) async throws(StorageError) -> StorageMetadata {
    try await Self.metadata(of: putData(data, metadata: metadata, preconditions: preconditions), onProgress, description)
  }

  /// Async form of `putFile(from:metadata:)`.
  public func putFileAsync(
    from fileURL: URL, metadata: StorageMetadata? = nil, preconditions: Preconditions = Preconditions(),
    session: UploadSession? = nil, onProgress: (@Sendable (Progress?) -> Void)? = nil
  ) async throws(StorageError) -> StorageMetadata {
    try await Self.metadata(
      of: putFile(from: fileURL, metadata: metadata, preconditions: preconditions, session: session), onProgress, description)
  }

  private static func metadata(
    of task: StorageUploadTask, _ onProgress: (@Sendable (Progress?) -> Void)?, _ object: String
  ) async throws(StorageError) -> StorageMetadata {
    if let onProgress { task.observe(.progress) { onProgress($0.progress) } }
    guard let result = try await task.result() else {
      throw StorageError(code: .internalError, object: object, detail: "the upload returned no metadata")
    }
    return result
  }
}
