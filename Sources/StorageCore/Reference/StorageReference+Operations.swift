import Foundation

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
    let sink = RangeSink(start: range.lowerBound, limit: Int(range.count), deliver: deliver)
    var pinned = generation
    return try await RetryBudget.run(storage, seconds: budget, object: description) { () async throws(StorageError) -> Attempt<Int64> in
      let from = range.lowerBound + Int64(sink.received)
      let before = sink.received
      let (request, token) = try await storage.authorize(
        storage.wire.download(path, range: from..<range.upperBound, from: nil, generation: pinned))
      let expected = pinned
      let outcome: Result<HTTPResponseHead, TransportError>
      do throws(TransportError) {
        outcome = .success(try await storage.client.stream(
          request, timeouts: timeouts,
          onHead: { head in sink.begin(head, wantedFrom: from, expected: expected) },
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
      if sink.answer.isSuccess, sink.received >= Int(range.count) { return .done(Int64(range.count)) }
      if sink.refused { throw StorageError(code: .cancelled, object: description, detail: "cancelled") }
      // Later attempts must serve the same generation as the bytes already received.
      if pinned == nil { pinned = sink.generation }
      let progressed = sink.received > before
      switch outcome {
      case .success(let head) where (200..<300).contains(head.status):
        // Fewer bytes than asked: the object ends before the range does, or the body broke.
        if let total = sink.total, from + Int64(sink.received - before) >= total { return .done(Int64(sink.received)) }
        return .retry(.shortBody(description, received: Int64(sink.received), of: Int64(range.count)), progressed: progressed)
      case .success(let head) where head.status == 416 && head.contentRangeTotal.map({ from >= $0 }) == true:
        // The range starts at or past the end (GCS's answer; the official emulator sends the
        // whole object instead, handled above): the object ended first, as for a short read.
        return .done(Int64(sink.received))
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
  /// (`ListPage.holdsFolderObjects`).
  package func listPage(delimiter: String?, pageToken: String?, maxResults: Int?, matchGlob: String?, folderObjects: Bool = false)
    async throws(StorageError) -> ListPage
  {
    let prefix = fullPath.isEmpty ? "" : fullPath + "/"
    let withFolders = folderObjects && delimiter != nil && storage.api == .gcs
    let request = storage.wire.list(
      bucket: bucket, prefix: prefix, delimiter: delimiter, pageToken: pageToken, maxResults: maxResults,
      matchGlob: storage.api == .gcs ? matchGlob : nil, includeTrailingDelimiter: withFolders)
    let response = try await runnerForOperations.run(request)
    guard var page = ListPage.decode(response.body) else {
      throw StorageError(code: .unknown, object: description, detail: "the server sent a list that is not JSON")
    }
    page.holdsFolderObjects = withFolders
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
    let counter = StreamCounter()
    return try await RetryBudget.run(storage, seconds: budget, object: description) { () async throws(StorageError) -> Attempt<Int64> in
      let before = counter.delivered
      let from = (range?.lowerBound ?? 0) + before
      let request = before == 0
        ? storage.wire.download(path, range: range, from: nil, generation: nil)
        : storage.wire.download(path, range: range.map { from..<$0.upperBound }, from: range == nil ? from : nil, generation: counter.generation)
      let (signed, token) = try await storage.authorize(request)
      counter.skip = 0
      let handOff = HandOff(label: "bucketfs.stream") { bytes in onData(bytes) }
      let head: HTTPResponseHead
      do throws(TransportError) {
        head = try await storage.client.stream(
          signed, timeouts: timeouts,
          onHead: { head in
            guard counter.answer.begin(head, expected: counter.generation) else { return false }
            guard counter.answer.isSuccess else { return true }
            if counter.generation == nil { counter.generation = counter.answer.served }
            // A server that ignored a resumed attempt's Range sends the object from its start.
            if before > 0 && head.status == 200 { counter.skip = from }
            return true
          },
          onFlow: { bytes in
            if counter.answer.keepIfError(bytes) { return .accept }
            let skipped = Int(min(Int64(bytes.count), counter.skip))
            let rest = UnsafeRawBufferPointer(rebasing: bytes[skipped...])
            let flow = rest.isEmpty ? .accept : handOff.offer(rest)
            // A paused delivery comes again whole: only what was taken counts.
            if flow == .accept {
              counter.skip -= Int64(skipped)
              counter.delivered += Int64(rest.count)
            }
            return flow
          },
          started: { handOff.attach($0) })
        await handOff.drain()
      } catch {
        await handOff.drain()
        if handOff.failed { throw StorageError(code: .cancelled, object: description, detail: "stopped by the receiver") }
        if let served = counter.answer.changedTo { throw .objectChanged(description, from: counter.generation, to: served) }
        return .broken(error, progressed: counter.delivered > before)
      }
      if handOff.failed { throw StorageError(code: .cancelled, object: description, detail: "stopped by the receiver") }
      if let served = counter.answer.changedTo { throw .objectChanged(description, from: counter.generation, to: served) }
      if (200..<300).contains(head.status) { return .done(counter.delivered) }
      // A resumed attempt that starts at the end: everything was handed on before the break.
      if head.status == 416 && before > 0 && head.contentRangeTotal.map({ from >= $0 }) == true { return .done(counter.delivered) }
      return .answered(head, body: counter.answer.errorBody, token: token, progressed: counter.delivered > before)
    }
  }
}

/// A ranged read's progress across resumed attempts: hands each byte on once, with its offset;
/// touched by the transfer thread during a request and by the caller between requests.
final class RangeSink: @unchecked Sendable {
  private let start: Int64
  private let limit: Int
  private let deliver: @Sendable (UnsafeRawBufferPointer, Int64) -> HTTPTransfer.Flow
  private(set) var received = 0
  /// Set when `deliver` asked to stop.
  private(set) var refused = false
  private(set) var answer = ObjectAnswer()
  /// The generation the first answer served; later attempts ask for it.
  private(set) var generation: Int64?
  /// The object's size, from Content-Range.
  var total: Int64?
  /// Bytes of a 200 answer (the server ignored Range) to skip before the wanted ones.
  private var skip: Int64 = 0

  init(start: Int64, limit: Int, deliver: @escaping @Sendable (UnsafeRawBufferPointer, Int64) -> HTTPTransfer.Flow) {
    self.start = start
    self.limit = limit
    self.deliver = deliver
  }

  func begin(_ head: HTTPResponseHead, wantedFrom: Int64, expected: Int64?) -> Bool {
    guard answer.begin(head, expected: expected) else { return false }
    guard answer.isSuccess else { return true }
    if generation == nil { generation = answer.served }
    if head["content-range"] != nil || head.status == 200 { total = head.objectSize }
    skip = head.status == 200 ? wantedFrom : 0
    return true
  }

  func take(_ bytes: UnsafeRawBufferPointer) -> HTTPTransfer.Flow {
    if answer.keepIfError(bytes) { return .accept }
    // Nothing is counted until the bytes are taken: a paused chunk comes again, whole.
    let skipped = Int(min(skip, Int64(bytes.count)))
    let chunk = UnsafeRawBufferPointer(rebasing: bytes[skipped...])
    let wanted = min(chunk.count, limit - received)
    if wanted > 0 {
      switch deliver(UnsafeRawBufferPointer(rebasing: chunk[..<wanted]), start + Int64(received)) {
      case .accept:
        received += wanted
      case .pause:
        return .pause
      case .stop:
        refused = true
        return .stop
      }
    }
    skip -= Int64(skipped)
    // A server that ignores Range sends past the end: stop there. The range's own last bytes
    // are taken, so that the response ends normally and its connection is kept for the next.
    return chunk.count > wanted ? .stop : .accept
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

/// A stream's progress across its attempts; touched by the transfer thread during a request and
/// by the caller between requests.
final class StreamCounter: @unchecked Sendable {
  var answer = ObjectAnswer()
  var delivered: Int64 = 0
  /// The generation the first answer served; later attempts ask for it.
  var generation: Int64?
  /// Bytes of a resumed attempt's 200 answer already handed on.
  var skip: Int64 = 0
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
      guard let json = (try? JSONSerialization.jsonObject(with: response.body)) as? [String: Any] else {
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
