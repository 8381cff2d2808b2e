// One upload of bytes or a file, as the protocol runs it: small sources go in one multipart
// request; larger ones use the resumable protocol in chunks, and an interrupted chunk continues
// from the offset the server reports (`X-Goog-Upload-Size-Received`), so a reset costs one chunk
// at most. `StorageUploadTask` (the SDK's observable task, with pause and resume) runs one, and so
// does the mount's write-back queue (`StorageReference.upload`), which wants no task around it.
import Foundation
import Synchronization

final class ObjectUpload: Sendable {
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

  let reference: StorageReference
  let source: Source
  let uploadMetadata: StorageMetadata
  let preconditions: Preconditions
  /// The resumable session while there is one (the caller's, when it keeps sessions).
  let session: UploadSession
  /// The chunk granularity the server asked for (X-Goog-Upload-Chunk-Granularity), else 256 KiB.
  private let granularity = Mutex<Int64>(Storage.chunkGranularity)
  /// Whether to stop now (a pause or a cancel of the task running it).
  private let shouldStop: @Sendable () -> Bool
  /// Bytes the server has or is being sent, and whether that is a step worth an event.
  private let progressed: @Sendable (_ completed: Int64, _ event: Bool) -> Void

  init(
    reference: StorageReference, source: Source, metadata: StorageMetadata, preconditions: Preconditions, session: UploadSession?,
    shouldStop: @escaping @Sendable () -> Bool = { Task.isCancelled }, progressed: @escaping @Sendable (Int64, Bool) -> Void = { _, _ in }
  ) {
    self.reference = reference
    self.source = source
    self.uploadMetadata = metadata
    self.preconditions = preconditions
    self.session = session ?? UploadSession()
    self.shouldStop = shouldStop
    self.progressed = progressed
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

  /// Runs the upload; nil when it stopped (`shouldStop`).
  func run() async throws(StorageError) -> StorageMetadata? {
    let metadata = uploadMetadata.copy()
    metadata.contentType = contentType
    let wire = reference.storage.wire
    let object = reference.description
    let runner = RequestRunner(storage: reference.storage, budget: reference.storage.maxUploadRetryTime, object: object)
    let json = metadata.writableJSON(name: reference.fullPath)
    if reference.storage.api == .firebase && preconditions != Preconditions() && session.url == nil {
      try await checkOverFirebase()
    }

    if source.size <= Self.multipartLimit && session.url == nil {
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
    if let existing = session.url {
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
        if shouldStop() { return .done(nil) }
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
          progressed(offset, false)
        }
        failedBefore = true
        let attemptStart = offset
        while true {
          if shouldStop() { return .done(nil) }
          let end = min(size, offset + chunkSize)
          let last = end == size
          var request = wire.uploadChunk(sessionURL: url, offset: offset, total: size, body: source.body(offset..<end), finalize: last)
          // Progress while the bytes go out, not once per chunk.
          let chunkStart = offset
          let lastFired = ProgressMark(offset)
          request.onBodySent = { [progressed] sent in
            let done = chunkStart + sent
            progressed(done, lastFired.advance(to: done, step: 256 * 1024))
          }
          let (signed, token) = try await reference.storage.authorize(request)
          let response: HTTPResponse
          do throws(TransportError) {
            response = try await reference.storage.client.send(signed, timeouts: timeouts)
          } catch {
            if shouldStop() { return .done(nil) }
            return .broken(error, progressed: offset > attemptStart)
          }
          switch wire.chunkOutcome(response.head, finalize: last) {
          case .final:
            return .done(try StorageMetadata(data: response.body).through(reference))
          case .accepted:
            offset = end
            progressed(offset, true)
          case .failed where [404, 410].contains(response.head.status) && restarts < 3:
            restarts += 1
            // The session is gone (the server restarted or let it expire): everything again.
            url = try await startOver(metadataJSON: json, contentType: metadata.contentType!, runner: runner)
            offset = 0
            progressed(0, false)
          case .failed:
            return .answered(response.head, body: response.body, token: token, progressed: offset > attemptStart)
          }
        }
      }
    } catch where error.code == .cancelled && shouldStop() {
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
    session.opened(url)
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
    session.opened(nil)
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

