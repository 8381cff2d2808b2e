import Foundation

extension StorageReference {
  public func getMetadata() async throws(StorageError) -> StorageMetadata {
    try requireObject("getMetadata")
    let response = try await runnerForOperations.run(storage.wire.getMetadata(path))
    do {
      return try StorageMetadata(data: response.body)
    } catch {
      throw StorageError(code: .unknown, object: description, detail: error.detail)
    }
  }

  /// Applies the fields set in `metadata`; custom metadata entries are merged by the server.
  public func updateMetadata(_ metadata: StorageMetadata, preconditions: Preconditions = Preconditions()) async throws(StorageError)
    -> StorageMetadata
  {
    try requireObject("updateMetadata")
    let body = metadata.writableJSON(name: nil)
    let response = try await runnerForOperations.run(storage.wire.updateMetadata(path, json: body, preconditions: preconditions))
    return try StorageMetadata(data: response.body)
  }

  public func delete(preconditions: Preconditions = Preconditions()) async throws(StorageError) {
    try requireObject("delete")
    _ = try await runnerForOperations.run(storage.wire.delete(path, preconditions: preconditions))
  }

  /// The public download URL built from the object's first download token.
  public func downloadURL() async throws(StorageError) -> URL {
    let metadata = try await getMetadata()
    guard let token = metadata.downloadTokens?.split(separator: ",").first, !token.isEmpty,
      let url = URL(string: storage.wire.downloadURL(path, token: String(token)))
    else {
      throw StorageError(code: .unknown, object: description, detail: "the object has no download token")
    }
    return url
  }

  /// The whole object in memory; fails with `downloadSizeExceeded` as soon as it is known to be
  /// larger than `maxSize`, without reading far past the limit.
  public func data(maxSize: Int64) async throws(StorageError) -> Data {
    try requireObject("data(maxSize:)")
    let runner = RequestRunner(storage: storage, budget: storage.maxDownloadRetryTime, object: description)
    do {
      return try await runner.run(storage.wire.download(path, range: nil, from: nil, generation: nil), maxBody: Int(clamping: maxSize)).body
    } catch where error.code == .downloadSizeExceeded {
      throw StorageError(
        code: .downloadSizeExceeded, object: description,
        detail: "the object is larger than the \(maxSize)-byte limit")
    }
  }

  /// Bytes `range` of the object. With `generation`, a different generation on the server fails
  /// with `objectChanged` instead of returning bytes of another version.
  public func data(range: Range<Int64>, generation: Int64? = nil) async throws(StorageError) -> Data {
    try requireObject("data(range:)")
    if range.isEmpty { return Data() }
    let runner = RequestRunner(storage: storage, budget: storage.maxDownloadRetryTime, object: description)
    let response: HTTPResponse
    do {
      response = try await runner.run(
        storage.wire.download(path, range: range, from: nil, generation: generation), maxBody: Int(range.count) + (8 << 20))
    } catch where error.code == .objectNotFound && generation != nil {
      // Asked for a generation that is gone: the object was overwritten or deleted.
      throw StorageError(
        code: .objectChanged, object: description, httpStatus: 404,
        detail: "generation \(generation!) of the object is gone (overwritten or deleted)")
    }
    try checkGeneration(response.head, expected: generation)
    if response.status == 200 {
      // A server that ignores Range sends the whole object: cut out what was asked.
      let lower = Int(min(range.lowerBound, Int64(response.body.count)))
      let upper = Int(min(range.upperBound, Int64(response.body.count)))
      return response.body.subdata(in: lower..<upper)
    }
    return response.body
  }

  func checkGeneration(_ head: HTTPResponseHead, expected: Int64?) throws(StorageError) {
    guard let expected, let served = head["x-goog-generation"].flatMap({ Int64($0) }) else { return }
    if served != expected {
      throw StorageError(
        code: .objectChanged, object: description,
        detail: "the object changed on the server (generation \(expected) → \(served))")
    }
  }

  /// One page of the folder at this reference, names as the server sent them.
  public func listPage(delimiter: String? = "/", pageToken: String? = nil, maxResults: Int? = nil)
    async throws(StorageError) -> ListPage
  {
    let prefix = fullPath.isEmpty ? "" : fullPath + "/"
    let request = storage.wire.list(
      bucket: bucket, prefix: prefix, delimiter: delimiter, pageToken: pageToken, maxResults: maxResults)
    let response = try await runnerForOperations.run(request)
    guard let page = ListPage.decode(response.body) else {
      throw StorageError(code: .unknown, object: description, detail: "the server sent a list that is not JSON")
    }
    return page
  }

  public func list(maxResults: Int) async throws(StorageError) -> StorageListResult {
    try await list(maxResults: maxResults, pageToken: nil)
  }

  public func list(maxResults: Int, pageToken: String?) async throws(StorageError) -> StorageListResult {
    guard (1...1000).contains(maxResults) else {
      throw StorageError(code: .invalidArgument, object: description, detail: "maxResults must be 1…1000")
    }
    return StorageListResult(page: try await listPage(pageToken: pageToken, maxResults: maxResults), root: root())
  }

  /// Every item and prefix under this reference, following page tokens.
  public func listAll() async throws(StorageError) -> StorageListResult {
    var result = StorageListResult(prefixes: [], items: [], pageToken: nil)
    var token: String? = nil
    repeat {
      let page = StorageListResult(page: try await listPage(pageToken: token), root: root())
      result.items += page.items
      for p in page.prefixes where !result.prefixes.contains(p) { result.prefixes.append(p) }
      token = page.pageToken
    } while token != nil
    return result
  }
}

/// The result of a list call, as the SDK shapes it: references to prefixes and items.
public struct StorageListResult: Sendable {
  public var prefixes: [StorageReference]
  public var items: [StorageReference]
  public var pageToken: String?

  init(prefixes: [StorageReference], items: [StorageReference], pageToken: String?) {
    self.prefixes = prefixes
    self.items = items
    self.pageToken = pageToken
  }

  init(page: ListPage, root: StorageReference) {
    prefixes = page.prefixes.map { root.child($0) }
    items = page.items.map { root.child($0) }
    pageToken = page.nextPageToken
  }
}

extension StorageReference {
  /// Streams the object's bytes (or `range` of them) through `onData` without holding them in
  /// memory. Retries only while nothing has been delivered, so bytes are never repeated.
  public func stream(
    range: Range<Int64>? = nil, onData: @escaping @Sendable (UnsafeRawBufferPointer) -> Bool
  ) async throws(StorageError) -> Int64 {
    try requireObject("stream")
    let (timeouts, initialDelay, budget) = storage.settings.withLock {
      ($0.timeouts, $0.retryInitialDelay, $0.maxDownloadRetryTime)
    }
    var retries = RetryBudget(seconds: budget, initialDelay: initialDelay)
    let counter = StreamCounter()
    while true {
      let request = storage.wire.download(path, range: range, from: nil, generation: nil)
      var failure: StorageError
      var retryAfter: TimeInterval?
      do {
        let head = try await storage.client.stream(
          request, timeouts: timeouts,
          onHead: { head in counter.status = head.status; return true },
          onData: { bytes in
            guard (200..<300).contains(counter.status) else {
              counter.errorBody.append(contentsOf: bytes.prefix(4096))
              return true
            }
            counter.delivered += Int64(bytes.count)
            return onData(bytes)
          })
        if (200..<300).contains(head.status) { return counter.delivered }
        failure = StorageError.from(status: head.status, object: description, body: counter.errorBody)
        guard Backoff.isRetryable(status: head.status) else { throw failure }
        retryAfter = Backoff.retryAfter(head)
        counter.errorBody = Data()
      } catch let error as TransportError {
        failure = StorageError.from(transport: error, object: description)
        guard counter.delivered == 0, Backoff.isRetryable(error) else { throw failure }
      } catch let error as StorageError {
        throw error
      } catch {
        throw StorageError(code: .unknown, object: description, detail: "\(error)")
      }
      try await retries.wait(after: failure, retryAfter: retryAfter)
    }
  }
}

final class StreamCounter: @unchecked Sendable {
  var status = 0
  var delivered: Int64 = 0
  var errorBody = Data()
}
