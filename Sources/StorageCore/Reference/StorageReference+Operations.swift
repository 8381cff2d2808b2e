import Foundation
import Synchronization

extension StorageReference {
  public func getMetadata() async throws(StorageError) -> StorageMetadata {
    try requireObject("getMetadata")
    let response = try await runnerForOperations.run(storage.wire.getMetadata(path))
    do {
      return try StorageMetadata(data: response.body).through(self)
    } catch {
      throw StorageError(code: .unknown, object: description, detail: error.detail)
    }
  }

  /// Applies the fields set in `metadata`; custom metadata entries are merged by the server.
  public func updateMetadata(_ metadata: StorageMetadata, preconditions: Preconditions = Preconditions()) async throws(StorageError)
    -> StorageMetadata
  {
    try requireObject("updateMetadata")
    let body = metadata.updateJSON()
    let response = try await runnerForOperations.run(storage.wire.updateMetadata(path, json: body, preconditions: preconditions))
    return try StorageMetadata(data: response.body).through(self)
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
      let response = try await runner.run(storage.wire.download(path, range: nil, from: nil, generation: nil), maxBody: Int(clamping: maxSize))
      return GzipDecoding.isGzip(response.head) ? try GzipDecoding.decode(response.body, object: description) : response.body
    } catch where error.code == .downloadSizeExceeded {
      throw .downloadSizeExceeded(total: -1, maxSize: maxSize)
    }
  }

  /// Bytes `range` of the object. With `generation`, a different generation on the server fails
  /// with `objectChanged` instead of returning bytes of another version. A broken or stalled
  /// response is resumed from the first byte not yet received (never fetched whole again), so
  /// every attempt makes progress; retries end at `maxDownloadRetryTime`.
  public func data(range: Range<Int64>, generation: Int64? = nil) async throws(StorageError) -> Data {
    let buffer = RangeBuffer(capacity: Int(range.count))
    let count = try await read(range: range, generation: generation) { bytes, _ in buffer.append(bytes) }
    return buffer.data.count == Int(count) ? buffer.data : buffer.data.prefix(Int(count))
  }

  /// Bytes `range` of the object, handed to `deliver` as they arrive together with their offset
  /// in the object, so that a caller can write them where they belong without holding them.
  /// Retries resume where the last attempt stopped: no byte is delivered twice. `deliver` runs on
  /// the transfer thread; returning false stops the read (it then fails as cancelled). Returns
  /// how many bytes were delivered: fewer than asked only when the object ends first.
  public func read(
    range: Range<Int64>, generation: Int64? = nil,
    into deliver: @escaping @Sendable (UnsafeRawBufferPointer, Int64) -> Bool
  ) async throws(StorageError) -> Int64 {
    try await read(range: range, generation: generation, valve: nil) { bytes, offset in deliver(bytes, offset) ? .accept : .stop }
  }

  /// `read(range:generation:into:)` for a consumer that may not take bytes at once: `deliver`
  /// answers `.pause` to leave them with the transfer (which then waits, alone) until `valve`
  /// is opened, when the same bytes are delivered again.
  package func read(
    range: Range<Int64>, generation: Int64? = nil, valve: DeliveryValve?,
    into deliver: @escaping @Sendable (UnsafeRawBufferPointer, Int64) -> HTTPTransfer.Flow
  ) async throws(StorageError) -> Int64 {
    try requireObject("read(range:)")
    if range.isEmpty { return 0 }
    let (timeouts, budget) = storage.settings.withLock { ($0.timeouts, $0.maxDownloadRetryTime) }
    let sink = ObjectSink(start: range.lowerBound, end: range.upperBound, deliver: deliver)
    return try await RetryBudget.run(storage, seconds: budget, object: description) { () async throws(StorageError) -> Attempt<Int64> in
      let from = sink.next
      // Later attempts serve the same generation as the bytes already received.
      let expected = generation ?? sink.generation
      let (request, token) = try await storage.authorize(
        storage.wire.download(path, range: from..<range.upperBound, from: nil, generation: expected))
      let outcome: Result<HTTPResponseHead, TransportError>
      do throws(TransportError) {
        outcome = .success(try await storage.client.stream(
          request, timeouts: timeouts,
          onHead: { head in sink.begin(head, expected: expected) },
          onFlow: { bytes in sink.take(bytes) },
          started: { transfer in valve?.attach(transfer) }))
      } catch {
        outcome = .failure(error)
      }
      if let served = sink.answer.changedTo {
        throw .objectChanged(description, from: expected, to: served)
      }
      // Complete, even if the transfer was stopped early because a server that ignores Range
      // went on past the end.
      if sink.answer.isSuccess, sink.isComplete { return .done(Int64(range.count)) }
      if sink.refused { throw StorageError(code: .cancelled, object: description, detail: "cancelled") }
      let progressed = sink.next > from
      switch outcome {
      case .success(let head) where (200..<300).contains(head.status):
        // Fewer bytes than asked: the object ends before the range does, or the body broke.
        if let total = sink.total, sink.next >= total { return .done(sink.received) }
        return .retry(.shortBody(description, received: sink.received, of: Int64(range.count)), progressed: progressed)
      case .success(let head) where head.status == 416 && head.contentRangeTotal.map({ from >= $0 }) == true:
        // The range starts at or past the end (GCS's answer; the official emulator sends the
        // whole object instead, handled above): the object ended first, as for a short read.
        return .done(sink.received)
      case .success(let head) where head.status == 404 && generation != nil:
        throw .generationGone(description, generation!)
      case .success(let head):
        return .answered(head, body: sink.answer.errorBody, token: token, progressed: progressed)
      case .failure(let error):
        return .broken(error, progressed: progressed)
      }
    }
  }

  /// One page of the folder at this reference, names as the server sent them.
  public func listPage(delimiter: String? = "/", pageToken: String? = nil, maxResults: Int? = nil)
    async throws(StorageError) -> ListPage
  {
    try await listPage(delimiter: delimiter, pageToken: pageToken, maxResults: maxResults, matchGlob: nil)
  }

  /// `matchGlob` (GCS API only; v0 has none, so it is not sent there) asks the server for the
  /// names matching a glob; a server may ignore it, so callers match the names again.
  /// `folderObjects` (GCS API only) asks for each prefix's own object (a folder placeholder,
  /// `a/`) among the items, with its metadata; the page says whether it was asked
  /// (`ListPage.holdsFolderObjects`). `foldersAsPrefixes` (GCS API, delimiter `/`) lists a
  /// hierarchical bucket's folders among the prefixes, empty ones too
  /// (`includeFoldersAsPrefixes`); asked only of such buckets, since on a flat one it would
  /// list managed folders as prefixes.
  package func listPage(
    delimiter: String?, pageToken: String?, maxResults: Int?, matchGlob: String?, folderObjects: Bool = false, foldersAsPrefixes: Bool = false
  ) async throws(StorageError) -> ListPage {
    let prefix = fullPath.isEmpty ? "" : fullPath + "/"
    let withFolders = folderObjects && delimiter != nil && storage.api == .gcs
    let request = storage.wire.list(
      bucket: bucket, prefix: prefix, delimiter: delimiter, pageToken: pageToken, maxResults: maxResults,
      matchGlob: storage.api == .gcs ? matchGlob : nil, includeTrailingDelimiter: withFolders,
      includeFoldersAsPrefixes: foldersAsPrefixes && delimiter == "/" && storage.api == .gcs)
    let response = try await runnerForOperations.run(request)
    guard var page = ListPage.decode(response.body) else {
      throw StorageError(code: .unknown, object: description, detail: "the server sent a list that is not JSON")
    }
    page.holdsFolderObjects = withFolders
    page.inNameOrder = storage.api == .gcs
    return page
  }

  /// The first page of at most `maxResults` (1…1000) items and prefixes.
  public func list(maxResults: Int64) async throws(StorageError) -> StorageListResult {
    try await list(maxResults: maxResults, pageToken: nil)
  }

  /// The page after `pageToken` (a previous result's `pageToken`).
  public func list(maxResults: Int64, pageToken: String?) async throws(StorageError) -> StorageListResult {
    guard (1...1000).contains(maxResults) else {
      throw StorageError(
        code: .invalidArgument, object: description, detail: "maxResults must be between 1 and 1000, not \(maxResults)")
    }
    return StorageListResult(page: try await listPage(pageToken: pageToken, maxResults: Int(maxResults)), root: root())
  }

  /// Every item and prefix under this reference, following page tokens.
  public func listAll() async throws(StorageError) -> StorageListResult {
    let all = try await ListPage.all { token async throws(StorageError) in try await listPage(pageToken: token) }
    return StorageListResult(page: all, root: root())
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
  /// memory. An attempt cut short resumes where the bytes handed on end, pinned to the
  /// generation the first answer served (another one fails as `objectChanged`), so no byte is
  /// handed on twice or from another version; the same retry rule as a download task's.
  /// `onData` runs in order on a thread of its own (a slow consumer, such as a pipe nobody
  /// reads, pauses this transfer only); returning false stops the stream.
  public func stream(
    range: Range<Int64>? = nil, onData: @escaping @Sendable (UnsafeRawBufferPointer) -> Bool
  ) async throws(StorageError) -> Int64 {
    try requireObject("stream")
    let (timeouts, budget) = storage.settings.withLock { ($0.timeouts, $0.maxDownloadRetryTime) }
    let handOff = Mutex<HandOff?>(nil)
    let sink = ObjectSink(start: range?.lowerBound ?? 0, end: range?.upperBound) { bytes, _ in
      handOff.withLock { $0 }?.offer(bytes) ?? .stop
    }
    return try await RetryBudget.run(storage, seconds: budget, object: description) { () async throws(StorageError) -> Attempt<Int64> in
      let from = sink.next
      let request = sink.received == 0
        ? storage.wire.download(path, range: range, from: nil, generation: nil)
        : storage.wire.download(path, range: range.map { from..<$0.upperBound }, from: range == nil ? from : nil, generation: sink.generation)
      let (signed, token) = try await storage.authorize(request)
      let attempt = HandOff(label: "bucketfs.stream") { bytes in onData(bytes) }
      handOff.withLock { $0 = attempt }
      let head: HTTPResponseHead
      do throws(TransportError) {
        head = try await storage.client.stream(
          signed, timeouts: timeouts,
          onHead: { head in sink.begin(head, expected: nil) },
          onFlow: { bytes in sink.take(bytes) },
          started: { attempt.attach($0) })
        await attempt.drain()
      } catch {
        await attempt.drain()
        if attempt.failed { throw StorageError(code: .cancelled, object: description, detail: "stopped by the receiver") }
        if let served = sink.answer.changedTo { throw .objectChanged(description, from: sink.generation, to: served) }
        // Stopped at the range's end, past which a server that ignored the range went on.
        if sink.answer.isSuccess, sink.isComplete { return .done(sink.received) }
        return .broken(error, progressed: sink.next > from)
      }
      if attempt.failed { throw StorageError(code: .cancelled, object: description, detail: "stopped by the receiver") }
      if let served = sink.answer.changedTo { throw .objectChanged(description, from: sink.generation, to: served) }
      if (200..<300).contains(head.status) { return .done(sink.received) }
      // A resumed attempt that starts at the end: everything was handed on before the break.
      if head.status == 416 && sink.received > 0 && head.contentRangeTotal.map({ from >= $0 }) == true { return .done(sink.received) }
      return .answered(head, body: sink.answer.errorBody, token: token, progressed: sink.next > from)
    }
  }
}

/// The bytes of `data(range:)`, collected on the transfer thread.
final class RangeBuffer: @unchecked Sendable {
  var data: Data
  init(capacity: Int) { data = Data(capacity: capacity) }
  func append(_ bytes: UnsafeRawBufferPointer) -> Bool {
    data.append(contentsOf: bytes)
    return true
  }
}

extension StorageReference {
  /// Copies generation `generation` of this object (nil: the live one) to `target` on the server,
  /// with `preconditions` on the target; a large object may take several rewrite calls, each
  /// continuing where the last stopped. Fails with `invalidArgument` where the protocol has no copy.
  package func copy(to target: StorageReference, generation: Int64?, preconditions: Preconditions) async throws(StorageError)
    -> StorageMetadata
  {
    try requireObject("copy")
    var token: String?
    while true {
      guard let request = storage.wire.copy(path, generation: generation, to: target.path, preconditions: preconditions, rewriteToken: token)
      else { throw StorageError(code: .invalidArgument, object: description, detail: "this API has no server-side copy") }
      let response = try await runnerForOperations.run(request)
      guard let json = (try? ExactText.jsonObject(with: response.body)) as? [String: Any] else {
        throw StorageError(code: .unknown, object: description, detail: "the copy's answer is not JSON")
      }
      // copyTo answers the object; rewriteTo a progress report holding it once done.
      if json["kind"] as? String != "storage#rewriteResponse" || json["done"] as? Bool == true {
        let resource = json["resource"] as? [String: Any] ?? json
        return StorageMetadata(dictionary: resource).through(target)
      }
      guard let next = json["rewriteToken"] as? String, !next.isEmpty else {
        throw StorageError(code: .unknown, object: description, detail: "the rewrite is not done and gave no token to go on")
      }
      token = next
    }
  }
}

extension StorageReference {
  /// The HTTP status a move that the server does not know fails with (`moveUnsupported`).
  package static let moveUnsupportedStatus = 501

  /// Moves this object to `target` in the same bucket in one step on the server (`objects.move`:
  /// no copy of the bytes, never both names or neither), only while this object is generation
  /// `ifSourceGenerationMatch` and `target` meets `preconditions` (412 otherwise). Where the
  /// server does not know the call (the Firebase API; a server that answers 405 or 501, or 404
  /// while this object is there) it fails with HTTP status `moveUnsupportedStatus` (code
  /// `unknown`, which keeps the status), and nothing changed: the caller copies, then deletes.
  package func move(to target: StorageReference, ifSourceGenerationMatch: Int64?, preconditions: Preconditions) async throws(StorageError)
    -> StorageMetadata
  {
    try requireObject("move")
    try target.requireObject("move")
    let unsupported = StorageError(
      code: .unknown, object: description, httpStatus: Self.moveUnsupportedStatus, detail: "the server cannot move objects (objects.move)")
    guard target.path.bucket == path.bucket,
      let request = storage.wire.move(path, to: target.path, ifSourceGenerationMatch: ifSourceGenerationMatch, preconditions: preconditions)
    else { throw unsupported }
    let response: HTTPResponse
    do throws(StorageError) {
      response = try await runnerForOperations.run(request)
    } catch where error.httpStatus == 405 || error.httpStatus == 501 {
      throw unsupported
    } catch where error.code == .objectNotFound {
      // A missing source, or a route the server does not have: the source says which.
      if let here = try? await getMetadata(), ifSourceGenerationMatch.map({ $0 == here.generation }) ?? true { throw unsupported }
      throw error
    }
    guard let json = (try? ExactText.jsonObject(with: response.body)) as? [String: Any] else {
      throw StorageError(code: .unknown, object: description, detail: "the move's answer is not JSON")
    }
    return StorageMetadata(dictionary: json).through(target)
  }
}
