// The Firebase Storage REST API ("v0") over the object store, as the protocol reference describes
// what the Firebase SDKs send and expect.
internal import CZlib
import Foundation

struct FirebaseRoutes {
  let store: ObjectStore
  let uploads: UploadSessions
  let access: AccessCheck
  var ignoresPreconditions = false

  /// Splits `/v0/b/BUCKET/o[/OBJECT]`; nil when the path is not of that shape.
  static func parse(_ path: String) -> (bucket: String, object: String?)? {
    let segments = path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
    guard segments.count >= 4, segments[0].isEmpty, segments[1] == "v0", segments[2] == "b",
      !segments[3].isEmpty, let bucket = segments[3].exactPercentDecoded
    else { return nil }
    if segments.count == 4 { return (bucket, nil) }
    guard segments[4] == "o" else { return nil }
    if segments.count == 5 { return (bucket, nil) }
    let encoded = segments[5...].joined(separator: "/")
    guard let object = encoded.exactPercentDecoded else { return nil }
    return (bucket, object.isEmpty ? nil : object)
  }

  func handle(_ request: inout ServerRequest) -> ServerResponse {
    if request.rawPath == "/v0" || request.rawPath == "/v0/" {
      return .json(200, ["emulator": "storage"])
    }
    guard let (bucket, object) = Self.parse(request.rawPath) else {
      if request.rawPath.hasPrefix("/v0/") && request.rawPath.contains("%") {
        return .error(400, "bad percent-encoding in the object name")
      }
      return .error(404, "Not Found")
    }
    var method = request.method
    if let override = request.header("x-http-method-override") { method = override.uppercased() }

    if let id = request.query["upload_id"] {
      return uploadSession(id: id, request: &request)
    }
    let named = object.flatMap { store.get(bucket, $0) }
    if let denied = access.check(request, method: method, record: named, tokensAllowed: true) {
      return denied
    }
    switch (method, object) {
    case ("GET", nil):
      return list(bucket: bucket, query: request.query)
    case ("GET", let name?):
      guard let record = store.get(bucket, name) else { return .error(404, "Not Found") }
      if request.query["alt"] == "media" { return media(record, request: request, dialect: .firebase) }
      return .json(200, ensureToken(record).firebaseResource())
    case ("POST", _), ("PUT", _):
      guard let name = request.query["name"] ?? object, !name.isEmpty else {
        return .error(400, "an upload needs a name")
      }
      if let failed = preconditionFailure(bucket, name, request.query) { return failed }
      return upload(bucket: bucket, name: name, request: &request)
    case ("PATCH", let name?):
      if let failed = preconditionFailure(bucket, name, request.query) { return failed }
      return patch(bucket: bucket, name: name, request: &request)
    case ("DELETE", let name?):
      if let failed = preconditionFailure(bucket, name, request.query) { return failed }
      return store.delete(bucket, name) ? ServerResponse(status: 204) : .error(404, "Not Found")
    default:
      return .error(405, "method not allowed here")
    }
  }

  /// `ifGenerationMatch` and the like on v0: kept, or ignored as the official emulator ignores
  /// them (firebase-tools `src/emulator/storage/apis/firebase.ts` reads none).
  private func preconditionFailure(_ bucket: String, _ name: String, _ query: [String: String]) -> ServerResponse? {
    ignoresPreconditions ? nil : PreconditionCheck.failure(store.get(bucket, name), query)
  }

  /// The same check, for the store to make again under its lock as it makes the new generation.
  private func refuses(_ query: [String: String]) -> ((ObjectRecord?) -> Bool)? {
    ignoresPreconditions ? nil : PreconditionCheck.refuses(query)
  }

  /// The emulator gives a download token to any object read through v0 that has none.
  private func ensureToken(_ record: ObjectRecord) -> ObjectRecord {
    guard record.downloadTokens.isEmpty else { return record }
    var updated = record
    updated.downloadTokens = [UUID().uuidString.lowercased()]
    _ = try? store.save(updated)
    return updated
  }

  private func list(bucket: String, query: [String: String]) -> ServerResponse {
    let prefix = query["prefix"] ?? ""
    // By the last byte, not `hasSuffix` (characters): "p\u{600}/" ends in one character, the
    // prepend mark and the slash together, and was refused.
    if !prefix.isEmpty && prefix.utf8.last != UInt8(ascii: "/") {
      return .error(400, "The prefix parameter is required to be empty or ends with a single / character.")
    }
    var maxResults = 1000
    if let text = query["maxResults"] {
      guard let n = Int(text), n > 0 else { return .error(400, "maxResults must be a positive integer") }
      maxResults = min(n, 1000)
    }
    let delimiter = query["delimiter"].flatMap { $0.isEmpty ? nil : $0 }
    let result = store.listFirebase(
      bucket: bucket, prefix: prefix, delimiter: delimiter, pageToken: query["pageToken"], maxResults: maxResults)
    var body: [String: Any] = [
      "prefixes": result.prefixes,
      "items": result.items.map { ["name": $0.name, "bucket": $0.bucket] },
    ]
    if let token = result.nextPageToken { body["nextPageToken"] = token }
    return .json(200, body)
  }

  /// Where the two APIs' media answers differ: GCS sends `x-goog-hash` twice and answers a Range
  /// that starts at or past the end with 416; the official Firebase emulator sends one
  /// comma-joined `x-goog-hash` and answers such a Range with the whole object, 200
  /// (firebase-tools `src/emulator/storage/apis/shared.ts`, `sendFileBytes`: Express's
  /// `req.range` finds it unsatisfiable and the body is sent whole).
  enum MediaDialect { case firebase, gcs }

  /// The object's bytes, as GCS and the official emulator serve them (`sendFileBytes`): an object
  /// stored with `Content-Encoding: gzip` goes out decompressed to a client that does not accept
  /// gzip, chunked, with the Range ignored and `x-goog-hash` still of the stored bytes.
  func media(_ record: ObjectRecord, request: ServerRequest, dialect: MediaDialect) -> ServerResponse {
    let current = record
    let range = request.header("range")
    let fd = open(store.dataPath(current), O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else {
      // Overwritten between the lookup and the open: serve the newest generation.
      if let newer = store.get(record.bucket, record.name), newer.generation != record.generation {
        return media(newer, request: request, dialect: dialect)
      }
      return .error(404, "Not Found")
    }
    var headers: [(String, String)] = [
      ("Accept-Ranges", "bytes"), ("Content-Type", current.contentType), ("ETag", current.etag),
      ("x-goog-generation", String(current.generation)),
      ("x-goog-metageneration", String(current.metageneration)),
      ("x-goog-stored-content-length", String(current.size)),
      ("Last-Modified", httpDate(current.updated)),
    ]
    switch dialect {
    case .firebase:
      headers.append(("x-goog-hash", current.md5Hash.isEmpty ? "crc32c=\(current.crc32c)" : "crc32c=\(current.crc32c),md5=\(current.md5Hash)"))
    case .gcs:
      headers.append(("x-goog-hash", "crc32c=\(current.crc32c)"))
      if !current.md5Hash.isEmpty { headers.append(("x-goog-hash", "md5=\(current.md5Hash)")) }
    }
    if let cc = current.cacheControl { headers.append(("Cache-Control", cc)) }
    let encoding = current.contentEncoding?.lowercased()
    if encoding == "gzip", !(request.header("accept-encoding")?.lowercased().contains("gzip") ?? false),
      let stored = readAll(fd), let plain = Self.gunzip(stored)
    {
      close(fd)
      headers += [("X-Goog-Stored-Content-Encoding", "gzip"), ("Warning", "214 UploadServer gunzipped")]
      return ServerResponse(status: 200, headers: headers, body: .chunked(plain))
    }
    if let ce = current.contentEncoding, ce != "identity" { headers.append(("Content-Encoding", ce)) }
    switch RangeHeader.resolve(range, size: current.size) {
    case .whole:
      return ServerResponse(status: 200, headers: headers, body: .file(fd: fd, offset: 0, length: current.size))
    case .partial(let start, let end):
      headers.append(("Content-Range", "bytes \(start)-\(end)/\(current.size)"))
      return ServerResponse(status: 206, headers: headers, body: .file(fd: fd, offset: start, length: end - start + 1))
    case .unsatisfiable where dialect == .firebase:
      return ServerResponse(status: 200, headers: headers, body: .file(fd: fd, offset: 0, length: current.size))
    case .unsatisfiable:
      close(fd)
      return ServerResponse(status: 416, headers: [("Content-Range", "bytes */\(current.size)")])
    case .malformed:
      close(fd)
      return .error(400, "malformed Range header")
    }
  }

  /// The whole file behind `fd` (the generation opened, even if overwritten since).
  private func readAll(_ fd: Int32) -> Data? {
    guard lseek(fd, 0, SEEK_SET) == 0 else { return nil }
    return try? FileHandle(fileDescriptor: fd, closeOnDealloc: false).readToEnd() ?? Data()
  }

  /// Stored bytes that are not gzip after all are served as stored (with their encoding).
  static func gunzip(_ data: Data) -> Data? {
    data.withUnsafeBytes { raw -> Data? in
      var out: UnsafeMutablePointer<UInt8>? = nil
      var length = 0
      guard CZlib_gunzip(raw.bindMemory(to: UInt8.self).baseAddress, raw.count, &out, &length) == 0, let out else { return nil }
      defer { free(out) }
      return Data(bytes: out, count: length)
    }
  }

  private func httpDate(_ ms: Int64) -> String {
    let formatter = DateFormatter()
    formatter.locale = Locale(identifier: "en_US_POSIX")
    formatter.timeZone = TimeZone(identifier: "GMT")
    formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
    return formatter.string(from: Date(timeIntervalSince1970: Double(ms) / 1000))
  }

  private func patch(bucket: String, name: String, request: inout ServerRequest) -> ServerResponse {
    guard let record = store.get(bucket, name) else { return .error(404, "Not Found") }
    guard let json = request.jsonObjectBody() else { return .error(400, "the body must be a JSON object") }
    guard let updated = store.updateMetadata(record, with: json) else { return .error(500, "cannot save metadata") }
    return .json(200, updated.firebaseResource())
  }

  // MARK: uploads

  private func upload(bucket: String, name: String, request: inout ServerRequest) -> ServerResponse {
    if let problem = ObjectStore.nameProblem(name) { return .error(400, problem) }
    let protocolName = request.header("x-goog-upload-protocol")?.lowercased()
    let command = request.header("x-goog-upload-command")?.lowercased()
    if protocolName == "resumable" || command != nil {
      guard command?.contains("start") ?? false else { return .error(400, "expected X-Goog-Upload-Command: start") }
      guard let body = try? request.body.readAll(limit: 1 << 20) else { return .error(400, "bad metadata body") }
      var metadata: [String: Any] = [:]
      if !body.isEmpty {
        guard let json = try? ExactText.jsonObject(with: body) as? [String: Any] else {
          return .error(400, "the metadata must be a JSON object")
        }
        metadata = json
      }
      let session = uploads.create(
        bucket: bucket, name: name, metadata: metadata, preconditions: ignoresPreconditions ? [:] : request.query.filter { $0.key.hasPrefix("if") },
        store: store)
      guard session.isOpen else { return .error(500, "cannot create an upload file") }
      let url = "\(request.publicBase)/v0/b/\(Self.encode(bucket))/o?name=\(Self.encode(name))&upload_id=\(session.id)&upload_protocol=resumable"
      return ServerResponse(status: 200, headers: [
        ("X-Goog-Upload-Status", "active"), ("X-Goog-Upload-URL", url),
        ("X-Goog-Upload-Chunk-Granularity", "262144"), ("X-GUploader-UploadID", session.id),
      ])
    }
    if protocolName == "multipart" {
      return multipart(bucket: bucket, name: name, request: &request)
    }
    // A raw body with its Content-Type.
    var metadata: [String: Any] = [:]
    if let type = request.header("content-type") { metadata["contentType"] = type }
    do {
      return .json(
        200, try store.store(bucket: bucket, name: name, body: request.body, downloadToken: true, metadata: metadata, unless: refuses(request.query)).firebaseResource())
    } catch .preconditionFailed {
      return preconditionFailure(bucket, name, request.query) ?? PreconditionCheck.failed("ifGenerationMatch")
    } catch {
      return error == .incompleteBody ? .error(400, "the upload body was incomplete") : .error(500, "cannot store the object")
    }
  }

  private func multipart(bucket: String, name: String, request: inout ServerRequest) -> ServerResponse {
    guard let boundary = MultipartUpload.boundary(of: request.header("content-type")) else {
      return .error(400, "multipart upload without a boundary")
    }
    let upload: MultipartUpload
    do {
      upload = try MultipartUpload.receive(request.body, boundary: boundary, store: store)
    } catch {
      if case .malformed(let why) = error { return .error(400, why) }
      return .error(400, "bad multipart body")
    }
    guard let json = try? ExactText.jsonObject(with: upload.metadata) as? [String: Any] else {
      unlink(upload.temporaryPath)
      return .error(400, "a multipart upload needs a JSON part and a media part")
    }
    var metadata = json
    if metadata["contentType"] == nil, let partType = upload.mediaType { metadata["contentType"] = partType }
    let name = (json["name"] as? String).flatMap { $0.isEmpty ? nil : $0 } ?? name
    if let problem = ObjectStore.nameProblem(name) {
      unlink(upload.temporaryPath)
      return .error(400, problem)
    }
    let record: ObjectRecord
    do {
      record = try store.commit(
        bucket: bucket, name: name, temporaryPath: upload.temporaryPath, size: upload.size, hashes: upload.hashes, metadata: metadata,
        unless: refuses(request.query))
    } catch ObjectStore.Refusal.preconditionFailed {
      return preconditionFailure(bucket, name, request.query) ?? PreconditionCheck.failed("ifGenerationMatch")
    } catch {
      unlink(upload.temporaryPath)
      return .error(500, "cannot store the object")
    }
    return .json(200, record.firebaseResource())
  }

  private func uploadSession(id: String, request: inout ServerRequest) -> ServerResponse {
    guard let session = uploads.get(id) else { return .error(404, "no such upload session") }
    let command = request.header("x-goog-upload-command")?.lowercased() ?? ""
    func status(_ extra: [(String, String)] = []) -> [(String, String)] {
      let name =
        switch session.phase {
        case .active: "active"
        case .final: "final"
        case .cancelled: "cancelled"
        }
      return [("X-Goog-Upload-Status", name), ("X-Goog-Upload-Size-Received", String(session.received))] + extra
    }
    if command.contains("query") {
      if case .final(let record) = session.phase { return .json(200, record.firebaseResource(), headers: status()) }
      return ServerResponse(status: 200, headers: status())
    }
    if command.contains("cancel") {
      guard session.cancel() else { return .error(400, "the upload is already final") }
      return ServerResponse(status: 200, headers: status())
    }
    // As the official emulator: a command other than query on a finished session is a 400
    // (a client whose last answer was lost must query, see `final`, and fetch the metadata).
    switch session.phase {
    case .final: return ServerResponse(status: 400, headers: status(), body: .data(Data("the upload is already final".utf8)))
    case .cancelled: return .error(400, "the upload was cancelled")
    case .active: break
    }
    if command.contains("upload") {
      var offset: Int64? = nil
      if let offsetText = request.header("x-goog-upload-offset") {
        guard let given = Int64(offsetText) else { return .error(400, "bad X-Goog-Upload-Offset") }
        offset = given
      }
      switch session.append(request.body, at: offset) {
      case .success: break
      case .failure(.offset):
        return ServerResponse(status: 400, headers: status(), body: .data(Data("offset does not match the bytes received".utf8)))
      case .failure(let refusal):
        // Bytes that arrived before a break are kept: the client queries and continues.
        return answer(refusal, status())
      }
    }
    if command.contains("finalize") {
      let finished = session.finish(unless: { preconditionFailure(session.bucket, session.name, session.preconditions) }) { size, hashes in
        try store.commit(
          bucket: session.bucket, name: session.name, temporaryPath: session.temporaryPath, size: size, hashes: hashes, metadata: session.metadata,
          unless: refuses(session.preconditions))
      }
      switch finished {
      case .success(let record): return .json(200, record.firebaseResource(), headers: status())
      case .failure(let refusal): return answer(refusal, status())
      }
    }
    return ServerResponse(status: 200, headers: status())
  }

  private func answer(_ refusal: UploadSessions.Session.Refusal, _ status: [(String, String)]) -> ServerResponse {
    switch refusal {
    case .offset: return ServerResponse(status: 400, headers: status, body: .data(Data("offset does not match the bytes received".utf8)))
    case .notActive(.final): return ServerResponse(status: 400, headers: status, body: .data(Data("the upload is already final".utf8)))
    case .notActive: return .error(400, "the upload was cancelled")
    case .busy: return .error(503, "another request is still writing to this upload")
    case .body: return ServerResponse(status: 400, headers: status, body: .data(Data("incomplete chunk".utf8)))
    case .refused(let response): return response
    case .cannotStore: return .error(500, "cannot store the object")
    }
  }

  /// Every byte but ASCII letters, digits and `-_.~` as %XX. By hand: a list page encodes two
  /// links per item, and building a CharacterSet for each was a tenth of the page's cost.
  static func encode(_ text: String) -> String {
    let digits = Array("0123456789ABCDEF".utf8)
    var out = [UInt8]()
    out.reserveCapacity(text.utf8.count * 3)
    for b in text.utf8 {
      switch b {
      case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
        UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "~"):
        out.append(b)
      default:
        out += [UInt8(ascii: "%"), digits[Int(b >> 4)], digits[Int(b & 0x0F)]]
      }
    }
    return String(decoding: out, as: UTF8.self)
  }
}
