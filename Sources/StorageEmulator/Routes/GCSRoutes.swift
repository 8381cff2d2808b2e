// The Google Cloud Storage JSON API v1 subset over the same object store as the Firebase routes,
// so an object written through one API is visible through the other.
import Foundation

struct GCSRoutes {
  let store: ObjectStore
  let uploads: UploadSessions
  let access: AccessCheck
  let firebase: FirebaseRoutes
  let registry: BucketRegistry
  let folders: FolderStore
  let operations: Operations
  /// False: `moveTo` is an unknown route (404), as on servers without `objects.move`.
  var movesObjects = true

  static func error(_ status: Int, _ reason: String, _ message: String) -> ServerResponse {
    .json(status, ["error": ["code": status, "message": message, "errors": [["domain": "global", "reason": reason, "message": message]]]])
  }

  func handle(_ request: inout ServerRequest) -> ServerResponse {
    let answer = route(&request)
    // A partial response: only JSON answers that succeeded are cut down.
    guard let text = request.query["fields"], (200..<300).contains(answer.status), case .data(let data) = answer.body,
      answer.headers.contains(where: { $0.0 == "Content-Type" && $0.1.hasPrefix("application/json") })
    else { return answer }
    guard let selector = FieldSelector(text) else { return Self.error(400, "invalidParameter", "Invalid field selection \(text)") }
    guard let json = try? ExactText.jsonObject(with: data) else { return answer }
    var cut = answer
    cut.body = .data(JSONWriter.data(selector.apply(json)))
    return cut
  }

  private func route(_ request: inout ServerRequest) -> ServerResponse {
    guard let route = GCSRoute(path: request.rawPath, method: request.method) else {
      return Self.error(404, "notFound", "Not Found")
    }
    if case .objects(.upload, _) = route, let id = request.query["upload_id"] {
      return resumable(id: id, request: &request)
    }
    if let denied = access.check(request, method: request.method, record: nil, tokensAllowed: false) { return denied }
    switch route {
    case .buckets:
      return buckets(&request)
    case .bucket(let bucket):
      return self.bucket(bucket, request: &request)
    case .storageLayout(let bucket):
      return .json(200, [
        "kind": "storage#storageLayout", "bucket": bucket, "location": "US", "locationType": "multi-region",
        "hierarchicalNamespace": ["enabled": registry.isHierarchical(bucket)],
      ])
    case .managedFolders:
      guard request.method == "GET" else { return Self.error(405, "invalid", "managed folders are not kept here") }
      return .json(200, ["kind": "storage#managedFolders"])
    case .folders(let bucket):
      return folderCollection(bucket, request: &request)
    case .folder(let bucket, let name):
      return folder(bucket, name, request: &request)
    case .renameFolder(let bucket, let source, let target):
      return renameFolder(bucket, source, target, request: &request)
    case .operation(let bucket, let id):
      return operation(bucket, id, request: &request)
    case .move(let bucket, let source, let target):
      guard movesObjects else { return Self.error(404, "notFound", "Not Found") }
      return move(bucket: bucket, source: source, target: target, request: &request)
    case .objects(.upload, let bucket):
      guard request.method == "POST" else { return Self.error(405, "invalid", "uploads are POSTed") }
      return upload(bucket: bucket, request: &request)
    case .objects(_, let bucket):
      guard request.method == "GET" else { return Self.error(405, "invalid", "method not allowed") }
      return list(bucket: bucket, query: request.query, base: request.publicBase)
    case .copy(let copy):
      return self.copy(copy, request: &request)
    case .compose(let bucket, let name):
      return compose(bucket: bucket, name: name, request: &request)
    case .object(let service, let bucket, let name):
      return object(service: service, bucket: bucket, name: name, request: &request)
    }
  }

  private func object(service: GCSRoute.Service, bucket: String, name: String, request: inout ServerRequest) -> ServerResponse {
    let record = store.get(bucket, name)
    switch request.method {
    case "GET":
      guard let record, generationMatches(record, request.query) else {
        if request.query["alt"] == "media" || service == .download {
          return ServerResponse(status: 404, headers: [("Content-Type", "text/plain")], body: .data(Data("No such object: \(bucket)/\(name)".utf8)))
        }
        return Self.error(404, "notFound", "No such object: \(bucket)/\(name)")
      }
      if let failed = preconditionFailure(record, request.query) { return failed }
      if request.query["alt"] == "media" || service == .download {
        return firebase.media(record, request: request, dialect: .gcs)
      }
      return .json(200, record.gcsResource(base: request.publicBase))
    case "PATCH", "PUT":
      guard let record else { return Self.error(404, "notFound", "No such object: \(bucket)/\(name)") }
      if let failed = preconditionFailure(record, request.query) { return failed }
      guard let json = request.jsonObjectBody() else { return Self.error(400, "invalid", "the body must be a JSON object") }
      // PUT (update) replaces the writable fields; PATCH changes those it names.
      guard let updated = store.updateMetadata(record, with: json, replacing: request.method == "PUT") else {
        return Self.error(500, "internalError", "cannot save")
      }
      return .json(200, updated.gcsResource(base: request.publicBase))
    case "DELETE":
      guard let record, generationMatches(record, request.query) else {
        return Self.error(404, "notFound", "No such object: \(bucket)/\(name)")
      }
      if let failed = preconditionFailure(record, request.query) { return failed }
      return store.delete(bucket, name) ? ServerResponse(status: 204) : Self.error(404, "notFound", "No such object: \(bucket)/\(name)")
    default:
      return Self.error(405, "invalid", "method not allowed")
    }
  }

  private func generationMatches(_ record: ObjectRecord, _ query: [String: String]) -> Bool {
    guard let text = query["generation"] else { return true }
    return Int64(text) == record.generation
  }

  func preconditionFailure(_ record: ObjectRecord?, _ query: [String: String]) -> ServerResponse? {
    PreconditionCheck.failure(record, query)
  }

  private func list(bucket: String, query: [String: String], base: String) -> ServerResponse {
    var maxResults = 1000
    if let text = query["maxResults"] {
      guard let n = Int(text), n > 0 else { return Self.error(400, "invalid", "maxResults must be a positive integer") }
      maxResults = min(n, 1000)
    }
    let delimiter = query["delimiter"].flatMap { $0.isEmpty ? nil : $0 }
    let result = store.list(
      bucket: bucket, prefix: query["prefix"] ?? "", delimiter: delimiter, pageToken: query["pageToken"], maxResults: maxResults,
      includeTrailingDelimiter: delimiter != nil && query["includeTrailingDelimiter"] == "true")
    var items = result.items
    var prefixes = result.prefixes
    if delimiter == "/", query["includeFoldersAsPrefixes"]?.lowercased() == "true", registry.isHierarchical(bucket) {
      // An HNS bucket's folders, empty ones too, as prefixes within this page's range of names.
      let prefix = query["prefix"] ?? ""
      let found = folders.list(bucket, prefix: prefix, oneLevel: true, start: query["pageToken"], end: result.nextPageToken)
      prefixes = Set(prefixes + found.map(\.name).filter { $0 != prefix }).sorted { ObjectStore.Key($0) < ObjectStore.Key($1) }
    }
    if let text = query["matchGlob"] {
      guard let glob = MatchGlob(text) else { return Self.error(400, "invalid", "Invalid matchGlob: \(text)") }
      // A page may come back short: the glob filters the page the prefix gave (GCS pages so too).
      items = items.filter { glob.matches($0.name) }
    }
    var body: [String: Any] = ["kind": "storage#objects"]
    if !items.isEmpty { body["items"] = items.map { $0.gcsResource(base: base) } }
    if !prefixes.isEmpty { body["prefixes"] = prefixes }
    if let token = result.nextPageToken { body["nextPageToken"] = token }
    return .json(200, body)
  }

  private func upload(bucket: String, request: inout ServerRequest) -> ServerResponse {
    let type = request.query["uploadType"] ?? "media"
    switch type {
    case "media":
      guard let name = request.query["name"], !name.isEmpty else { return Self.error(400, "required", "name is required") }
      if let problem = ObjectStore.nameProblem(name) { return Self.error(400, "invalid", problem) }
      if let failed = preconditionFailure(store.get(bucket, name), request.query) { return failed }
      var metadata: [String: Any] = [:]
      if let contentType = request.header("content-type") { metadata["contentType"] = contentType }
      return storeBody(bucket: bucket, name: name, metadata: metadata, request: &request)
    case "multipart":
      guard let boundary = MultipartUpload.boundary(of: request.header("content-type")) else {
        return Self.error(400, "invalid", "multipart upload without a boundary")
      }
      let upload: MultipartUpload
      do {
        upload = try MultipartUpload.receive(request.body, boundary: boundary, store: store)
      } catch {
        if case .malformed(let why) = error { return Self.error(400, "invalid", why) }
        return Self.error(400, "invalid", "bad body")
      }
      guard let json = try? ExactText.jsonObject(with: upload.metadata) as? [String: Any] else {
        unlink(upload.temporaryPath)
        return Self.error(400, "invalid", "a multipart upload needs a JSON part and a media part")
      }
      guard let name = (json["name"] as? String) ?? request.query["name"], !name.isEmpty else {
        unlink(upload.temporaryPath)
        return Self.error(400, "required", "name is required")
      }
      if let problem = ObjectStore.nameProblem(name) {
        unlink(upload.temporaryPath)
        return Self.error(400, "invalid", problem)
      }
      if let failed = preconditionFailure(store.get(bucket, name), request.query) {
        unlink(upload.temporaryPath)
        return failed
      }
      var metadata = json
      if metadata["contentType"] == nil, let partType = upload.mediaType { metadata["contentType"] = partType }
      let record: ObjectRecord
      do {
        record = try store.commit(
          bucket: bucket, name: name, temporaryPath: upload.temporaryPath, size: upload.size, hashes: upload.hashes,
          downloadToken: false, metadata: metadata, unless: PreconditionCheck.refuses(request.query))
      } catch ObjectStore.Refusal.preconditionFailed {
        return preconditionFailure(store.get(bucket, name), request.query) ?? PreconditionCheck.failed("ifGenerationMatch")
      } catch {
        unlink(upload.temporaryPath)
        return Self.error(500, "internalError", "cannot store the object")
      }
      return .json(200, record.gcsResource(base: request.publicBase))
    case "resumable":
      let body = (try? request.body.readAll(limit: 1 << 20)) ?? Data()
      var metadata = (body.isEmpty ? [:] : (try? ExactText.jsonObject(with: body)) as? [String: Any]) ?? [:]
      guard let name = (metadata["name"] as? String) ?? request.query["name"], !name.isEmpty else {
        return Self.error(400, "required", "name is required")
      }
      if let problem = ObjectStore.nameProblem(name) { return Self.error(400, "invalid", problem) }
      if metadata["contentType"] == nil, let t = request.header("x-upload-content-type") { metadata["contentType"] = t }
      let session = uploads.create(bucket: bucket, name: name, metadata: metadata, preconditions: request.query.filter { $0.key.hasPrefix("if") }, store: store)
      guard session.isOpen else { return Self.error(500, "internalError", "cannot create an upload file") }
      let location = "\(request.publicBase)/upload/storage/v1/b/\(FirebaseRoutes.encode(bucket))/o?uploadType=resumable&name=\(FirebaseRoutes.encode(name))&upload_id=\(session.id)"
      return ServerResponse(status: 200, headers: [("Location", location), ("X-GUploader-UploadID", session.id)])
    default:
      return Self.error(400, "invalid", "unknown uploadType \(type)")
    }
  }

  private func storeBody(bucket: String, name: String, metadata: [String: Any], request: inout ServerRequest) -> ServerResponse {
    do {
      return .json(
        200,
        try store.store(
          bucket: bucket, name: name, body: request.body, downloadToken: false, metadata: metadata, unless: PreconditionCheck.refuses(request.query)
        ).gcsResource(base: request.publicBase))
    } catch .preconditionFailed {
      return preconditionFailure(store.get(bucket, name), request.query) ?? PreconditionCheck.failed("ifGenerationMatch")
    } catch {
      return error == .incompleteBody
        ? Self.error(400, "invalid", "the upload body was incomplete") : Self.error(500, "internalError", "cannot store the object")
    }
  }

  /// Chunks of a resumable upload: `Content-Range: bytes S-E/TOTAL` (TOTAL may be `*`) appends;
  /// `bytes */TOTAL` with no body asks how much arrived (308 + Range) or completes; no
  /// Content-Range is the whole object in one request.
  private func resumable(id: String, request: inout ServerRequest) -> ServerResponse {
    guard let session = uploads.get(id) else { return Self.error(404, "notFound", "no such upload session") }
    if request.method == "DELETE" {
      _ = session.cancel()
      return ServerResponse(status: 499)
    }
    switch session.phase {
    case .final(let record): return .json(200, record.gcsResource(base: request.publicBase))
    case .cancelled: return Self.error(410, "gone", "the upload was cancelled")
    case .active: break
    }
    var start: Int64? = nil
    var total: Int64? = nil
    let range = request.header("content-range")
    let length = request.header("content-length").flatMap { Int64($0) }
    if let range {
      // "bytes S-E/T", "bytes S-E/*", "bytes */T"
      let spec = range.replacingOccurrences(of: "bytes", with: "").trimmingCharacters(in: .whitespaces)
      let halves = spec.split(separator: "/", maxSplits: 1).map(String.init)
      guard halves.count == 2 else { return Self.error(400, "invalid", "bad Content-Range") }
      if halves[1] != "*" {
        guard let t = Int64(halves[1]), t >= 0, t <= RequestBody.largestBody else { return Self.error(400, "invalid", "bad Content-Range total") }
        total = t
      }
      if halves[0] != "*" {
        // "S-E": 0 <= S <= E, E below the total when it is known, and E - S + 1 bytes sent.
        let ends = halves[0].split(separator: "-", omittingEmptySubsequences: false).map { Int64($0.trimmingCharacters(in: .whitespaces)) }
        guard ends.count == 2, let s = ends[0], let e = ends[1], s >= 0, e >= s, e < (total ?? RequestBody.largestBody) else {
          return Self.error(400, "invalid", "bad Content-Range \(range)")
        }
        if let length, length != e - s + 1 {
          return Self.error(400, "invalid", "Content-Range \(range) names \(e - s + 1) bytes and the request sends \(length)")
        }
        start = s
      } else if let length, length > 0 {
        return Self.error(400, "invalid", "Content-Range \(range) sends no bytes and the request has a body")
      }
    }
    if start != nil || range == nil {
      switch session.append(request.body, at: start) {
      case .success(let received): if range == nil { total = received }
      case .failure(.offset): return incomplete(session, request)
      case .failure(let refusal): return answer(refusal, request)
      }
    }
    guard let total, total == session.received else {
      return incomplete(session, request)
    }
    let finished = session.finish(unless: { preconditionFailure(store.get(session.bucket, session.name), session.preconditions) }) { size, hashes in
      try store.commit(
        bucket: session.bucket, name: session.name, temporaryPath: session.temporaryPath, size: size, hashes: hashes, downloadToken: false,
        metadata: session.metadata, unless: PreconditionCheck.refuses(session.preconditions))
    }
    switch finished {
    case .success(let record): return .json(200, record.gcsResource(base: request.publicBase))
    case .failure(let refusal): return answer(refusal, request)
    }
  }

  private func answer(_ refusal: UploadSessions.Session.Refusal, _ request: ServerRequest) -> ServerResponse {
    switch refusal {
    case .offset: return Self.error(400, "invalid", "the chunk does not start where the bytes received end")
    case .notActive(.final(let record)): return .json(200, record.gcsResource(base: request.publicBase))
    case .notActive: return Self.error(410, "gone", "the upload was cancelled")
    case .busy: return Self.error(503, "backendError", "another request is still writing to this upload")
    case .body(let why): return Self.error(400, "invalid", why)
    case .refused(let response): return response
    case .cannotStore: return Self.error(500, "internalError", "cannot store the object")
    }
  }

  /// "Resume incomplete": 308 with the bytes received, or, to a client that asks for no 308
  /// (`X-GUploader-No-308: yes`, Google's Go client, which rclone uses: its HTTP stack takes 308
  /// for a redirect), 200 with `X-Http-Status-Code-Override: 308`, as Google answers it.
  private func incomplete(_ session: UploadSessions.Session, _ request: ServerRequest) -> ServerResponse {
    guard request.header("x-guploader-no-308")?.lowercased() == "yes" else {
      return ServerResponse(status: 308, headers: receivedRange(session))
    }
    return ServerResponse(status: 200, headers: [("X-Http-Status-Code-Override", "308")] + receivedRange(session))
  }

  private func receivedRange(_ session: UploadSessions.Session) -> [(String, String)] {
    session.received > 0 ? [("Range", "bytes=0-\(session.received - 1)")] : []
  }
}
