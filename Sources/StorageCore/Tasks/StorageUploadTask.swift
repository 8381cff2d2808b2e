// An upload of bytes or a file as the SDK's task: observable, pausable, cancellable. The
// protocol itself is `ObjectUpload`'s.
import Foundation
import Synchronization

public final class StorageUploadTask: StorageTask, @unchecked Sendable {
  typealias Source = ObjectUpload.Source

  let source: Source
  let uploadMetadata: StorageMetadata
  let preconditions: Preconditions
  /// The session while there is one: the caller's, when it keeps sessions beyond this task.
  private let session: UploadSession

  init(
    reference: StorageReference, source: Source, metadata: StorageMetadata, preconditions: Preconditions = Preconditions(),
    session kept: UploadSession? = nil
  ) {
    self.source = source
    self.uploadMetadata = metadata
    self.preconditions = preconditions
    self.session = kept ?? UploadSession()
    super.init(reference: reference)
    state.withLock {
      $0.total = source.size
      $0.metadata = metadata
    }
  }

  /// Stops for good and tells the server to drop the session.
  public func cancel() {
    guard !phase.isFinal else { return }
    stopDriver()
    if let url = session.url {
      let request = reference.storage.wire.cancelUpload(sessionURL: url)
      reference.storage.client.start(request, onData: { _ in true }, onComplete: { _ in })
    }
    finish(.cancelled, error: .cancelled)
  }

  override func drive() async {
    // Each run (a resume is a new one) goes on from the session, when there is one.
    let upload = ObjectUpload(
      reference: reference, source: source, metadata: uploadMetadata, preconditions: preconditions, session: session,
      shouldStop: { [self] in Task.isCancelled || phase != .running },
      progressed: { [self] completed, event in
        updateProgress(completed: completed)
        if event { fire([.progress]) }
      })
    do {
      guard let metadata = try await upload.run() else { return }
      updateProgress(completed: source.size)
      finish(.succeeded, metadata: metadata)
    } catch {
      if !Task.isCancelled && phase == .running { finish(.failed, error: error) }
    }
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
    let size = Self.fileSize(fileURL.path)
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
  /// The size of the file at `path`, by stat(2): FileManager's attributes of a file look its
  /// owner and group up by name, which read /etc/passwd and /etc/group for every upload.
  static func fileSize(_ path: String) -> Int64? {
    var st = stat()
    guard stat(path, &st) == 0 else { return nil }
    return Int64(st.st_size)
  }

  /// Uploads the file at `path` with no task around it (no observers, no callback queue): the
  /// mount's write-back queue, which keeps `session` with its change across restarts.
  package func upload(
    file path: String, metadata: StorageMetadata, preconditions: Preconditions, session: UploadSession?
  ) async throws(StorageError) -> StorageMetadata {
    guard let size = Self.fileSize(path) else {
      throw StorageError(code: .unknown, object: path, detail: "cannot read the file", localFile: true)
    }
    let upload = ObjectUpload(
      reference: self, source: .file(path: path, size: size), metadata: metadata.copy(), preconditions: preconditions, session: session)
    guard let result = try await upload.run() else { throw .cancelled }
    return result
  }

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
