// The SDK's completion-handler and `Result` forms of every operation. Handlers run on the
// storage's callback queue; errors reach them as `NSError` instances bridged from `StorageError`
// (see there), so the documented `(error as? NSError)?.code` pattern works on Linux.
import Foundation

extension StorageReference {
  /// Runs `operation` and hands its outcome to `completion` on the callback queue.
  private func deliver<T: Sendable>(
    _ completion: @escaping @Sendable (T?, Error?) -> Void,
    _ operation: @escaping @Sendable () async throws(StorageError) -> T
  ) {
    let queue = storage.callbackQueue
    Task {
      let outcome: Result<T, StorageError>
      do throws(StorageError) {
        outcome = .success(try await operation())
      } catch {
        outcome = .failure(error)
      }
      queue.async {
        switch outcome {
        case .success(let value): completion(value, nil)
        case .failure(let error): completion(nil, error.asNSError)
        }
      }
    }
  }

  // MARK: downloads

  /// Downloads the object into memory, refusing one larger than `maxSize` bytes. The returned
  /// task can be observed, paused and cancelled.
  @discardableResult
  public func getData(maxSize: Int64, completion: @escaping @Sendable (Data?, Error?) -> Void) -> StorageDownloadTask {
    let scratch = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("bucketfs-getdata-\(UUID().uuidString)")
    let task = StorageDownloadTask(reference: self, destination: scratch, generation: nil, durable: false, maxSize: maxSize, inMemory: true)
    task.observe(.success) { [task] _ in completion(task.data ?? Data(), nil) }
    task.observe(.failure) { completion(nil, $0.error) }
    task.start()
    return task
  }

  @discardableResult
  public func getData(maxSize: Int64, completion: @escaping @Sendable (Result<Data, Error>) -> Void) -> StorageDownloadTask {
    getData(maxSize: maxSize, completion: Self.result(completion))
  }

  /// Downloads into `fileURL`; `completion` gets the file URL or the error.
  @discardableResult
  public func write(toFile fileURL: URL, completion: @escaping @Sendable (URL?, Error?) -> Void) -> StorageDownloadTask {
    let task = write(toFile: fileURL)
    task.observe(.success) { _ in completion(fileURL, nil) }
    task.observe(.failure) { completion(nil, $0.error) }
    return task
  }

  @discardableResult
  public func write(toFile fileURL: URL, completion: @escaping @Sendable (Result<URL, Error>) -> Void) -> StorageDownloadTask {
    write(toFile: fileURL, completion: Self.result(completion))
  }

  public func downloadURL(completion: @escaping @Sendable (URL?, Error?) -> Void) {
    deliver(completion) { () async throws(StorageError) -> URL in try await self.downloadURL() }
  }

  public func downloadURL(completion: @escaping @Sendable (Result<URL, Error>) -> Void) {
    downloadURL(completion: Self.result(completion))
  }

  // MARK: uploads

  @discardableResult
  public func putData(
    _ data: Data, metadata: StorageMetadata? = nil, completion: (@Sendable (StorageMetadata?, Error?) -> Void)?
  ) -> StorageUploadTask {
    Self.complete(putData(data, metadata: metadata), completion)
  }

  @discardableResult
  public func putData(
    _ data: Data, metadata: StorageMetadata? = nil, completion: @escaping @Sendable (Result<StorageMetadata, Error>) -> Void
  ) -> StorageUploadTask {
    putData(data, metadata: metadata, completion: Self.result(completion))
  }

  @discardableResult
  public func putFile(
    from fileURL: URL, metadata: StorageMetadata? = nil, completion: (@Sendable (StorageMetadata?, Error?) -> Void)?
  ) -> StorageUploadTask {
    Self.complete(putFile(from: fileURL, metadata: metadata), completion)
  }

  @discardableResult
  public func putFile(
    from fileURL: URL, metadata: StorageMetadata? = nil,
    completion: @escaping @Sendable (Result<StorageMetadata, Error>) -> Void
  ) -> StorageUploadTask {
    putFile(from: fileURL, metadata: metadata, completion: Self.result(completion))
  }

  private static func complete(
    _ task: StorageUploadTask, _ completion: (@Sendable (StorageMetadata?, Error?) -> Void)?
  ) -> StorageUploadTask {
    if let completion {
      task.observe(.success) { completion($0.metadata, nil) }
      task.observe(.failure) { completion(nil, $0.error) }
    }
    return task
  }

  // MARK: metadata, delete, list

  public func getMetadata(completion: @escaping @Sendable (StorageMetadata?, Error?) -> Void) {
    deliver(completion) { () async throws(StorageError) -> StorageMetadata in try await self.getMetadata() }
  }

  public func getMetadata(completion: @escaping @Sendable (Result<StorageMetadata, Error>) -> Void) {
    getMetadata(completion: Self.result(completion))
  }

  public func updateMetadata(_ metadata: StorageMetadata, completion: (@Sendable (StorageMetadata?, Error?) -> Void)?) {
    deliver(completion ?? { _, _ in }) { () async throws(StorageError) -> StorageMetadata in
      try await self.updateMetadata(metadata)
    }
  }

  public func updateMetadata(
    _ metadata: StorageMetadata, completion: @escaping @Sendable (Result<StorageMetadata, Error>) -> Void
  ) {
    updateMetadata(metadata, completion: Self.result(completion))
  }

  public func delete(completion: (@Sendable (Error?) -> Void)?) {
    deliver({ (_: Bool?, error: Error?) in completion?(error) }) { () async throws(StorageError) -> Bool in
      try await self.delete()
      return true
    }
  }

  public func list(maxResults: Int64, completion: @escaping @Sendable (StorageListResult?, Error?) -> Void) {
    deliver(completion) { () async throws(StorageError) -> StorageListResult in try await self.list(maxResults: maxResults) }
  }

  public func list(maxResults: Int64, completion: @escaping @Sendable (Result<StorageListResult, Error>) -> Void) {
    list(maxResults: maxResults, completion: Self.result(completion))
  }

  public func list(
    maxResults: Int64, pageToken: String, completion: @escaping @Sendable (StorageListResult?, Error?) -> Void
  ) {
    deliver(completion) { () async throws(StorageError) -> StorageListResult in
      try await self.list(maxResults: maxResults, pageToken: pageToken)
    }
  }

  public func list(
    maxResults: Int64, pageToken: String, completion: @escaping @Sendable (Result<StorageListResult, Error>) -> Void
  ) {
    list(maxResults: maxResults, pageToken: pageToken, completion: Self.result(completion))
  }

  public func listAll(completion: @escaping @Sendable (StorageListResult?, Error?) -> Void) {
    deliver(completion) { () async throws(StorageError) -> StorageListResult in try await self.listAll() }
  }

  public func listAll(completion: @escaping @Sendable (Result<StorageListResult, Error>) -> Void) {
    listAll(completion: Self.result(completion))
  }

  /// A `Result` handler as an (value, error) handler, as the SDK's `getResultCallback`.
  private static func result<T>(_ completion: @escaping @Sendable (Result<T, Error>) -> Void) -> @Sendable (T?, Error?) -> Void {
    { value, error in
      if let value {
        completion(.success(value))
      } else {
        completion(.failure(error ?? StorageError.internalError(message: "no value and no error").asNSError))
      }
    }
  }
}

extension StorageReference {
  /// Async form of `write(toFile:)`: the file URL once the download completed.
  public func writeAsync(toFile fileURL: URL, onProgress: (@Sendable (Progress?) -> Void)? = nil) async throws(StorageError) -> URL {
    let task = write(toFile: fileURL)
    if let onProgress { task.observe(.progress) { onProgress($0.progress) } }
    try await task.result()
    return fileURL
  }
}
