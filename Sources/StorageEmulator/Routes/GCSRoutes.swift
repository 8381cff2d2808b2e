// The Google Cloud Storage JSON API v1 subset over the same object store as the Firebase routes,
// so an object written through one API is visible through the other.
import Foundation

struct GCSRoutes {
  let store: ObjectStore
  let uploads: UploadSessions
  let access: AccessCheck
  let firebase: FirebaseRoutes

  static func error(_ status: Int, _ reason: String, _ message: String) -> ServerResponse {
    .json(status, ["error": ["code": status, "message": message, "errors": [["domain": "global", "reason": reason, "message": message]]]])
  }

  /// `/{service}/v1/b[/BUCKET[/o[/OBJECT]]]` split into its parts.
  static func parse(_ path: String) -> (service: String, bucket: String?, hasObjects: Bool, object: String?)? {
    let segments = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst().map(String.init)
    var i = 0
    var service = "storage"
    if segments.first == "upload" || segments.first == "download" {
      service = segments[0]
      i = 1
    }
    guard segments.count > i + 2, segments[i] == "storage", segments[i + 1] == "v1", segments[i + 2] == "b" else { return nil }
    i += 3
    guard segments.count > i, !segments[i].isEmpty else { return (service, nil, false, nil) }
    guard let bucket = segments[i].removingPercentEncoding else { return nil }
    i += 1
    guard segments.count > i else { return (service, bucket, false, nil) }
    guard segments[i] == "o" else { return nil }
    i += 1
    guard segments.count > i else { return (service, bucket, true, nil) }
    guard let object = segments[i...].joined(separator: "/").removingPercentEncoding else { return nil }
    return (service, bucket, true, object.isEmpty ? nil : object)
  }

  func handle(_ request: inout ServerRequest) -> ServerResponse {
    guard let route = Self.parse(request.rawPath) else {
      return Self.error(400, "invalid", "bad path or percent-encoding")
    }
    if route.service == "upload", let id = request.query["upload_id"] {
      return resumable(id: id, request: &request)
    }
    if let denied = access.check(request, method: request.method, record: nil, tokensAllowed: false) { return denied }
    guard let bucket = route.bucket else {
      if request.method == "POST" {
        // Bucket creation: buckets exist once named, so this only echoes the name.
        let body = (try? request.body.readAll(limit: 1 << 20)) ?? Data()
        let json = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any]
        let name = json?["name"] as? String ?? request.query["name"] ?? "bucket"
        return .json(200, ["kind": "storage#bucket", "name": name, "id": name])
      }
      return .json(200, ["kind": "storage#buckets", "items": [] as [Any]])
    }
    if !route.hasObjects {
      return .json(200, ["kind": "storage#bucket", "name": bucket, "id": bucket, "location": "US", "storageClass": "STANDARD"])
    }
    if route.service == "upload" {
      guard request.method == "POST" else { return Self.error(405, "invalid", "uploads are POSTed") }
      return upload(bucket: bucket, request: &request)
    }
    if request.method == "POST", let copy = Self.parseCopy(request.rawPath) {
      return self.copy(copy, request: &request)
    }
    guard let name = route.object else {
      guard request.method == "GET" else { return Self.error(405, "invalid", "method not allowed") }
      return list(bucket: bucket, query: request.query, base: request.publicBase)
    }
    let record = store.get(bucket, name)
    switch request.method {
    case "GET":
      guard let record, generationMatches(record, request.query) else {
        if request.query["alt"] == "media" || route.service == "download" {
          return ServerResponse(status: 404, headers: [("Content-Type", "text/plain")], body: .data(Data("No such object: \(bucket)/\(name)".utf8)))
        }
        return Self.error(404, "notFound", "No such object: \(bucket)/\(name)")
      }
      if let failed = preconditionFailure(record, request.query) { return failed }
      if request.query["alt"] == "media" || route.service == "download" {
        return firebase.media(record, request: request, dialect: .gcs)
      }
      return .json(200, record.gcsResource(base: request.publicBase))
    case "PATCH", "PUT":
      guard var record else { return Self.error(404, "notFound", "No such object: \(bucket)/\(name)") }
      if let failed = preconditionFailure(record, request.query) { return failed }
      guard let body = try? request.body.readAll(limit: 1 << 20),
        let json = (body.isEmpty ? [:] : try? JSONSerialization.jsonObject(with: body)) as? [String: Any]
      else { return Self.error(400, "invalid", "the body must be a JSON object") }
      record.apply(json)
      record.metageneration += 1
      record.updated = Int64(Date().timeIntervalSince1970 * 1000)
      guard (try? store.save(record)) != nil else { return Self.error(500, "internalError", "cannot save") }
      return .json(200, record.gcsResource(base: request.publicBase))
    case "DELETE":
      guard let record else { return Self.error(404, "notFound", "No such object: \(bucket)/\(name)") }
      if let failed = preconditionFailure(record, request.query) { return failed }
      return store.delete(bucket, name) ? ServerResponse(status: 204) : Self.error(404, "notFound", "No such object")
    default:
      return Self.error(405, "invalid", "method not allowed")
    }
  }

  /// A server-side copy's route: `/storage/v1/b/B/o/SOURCE/{rewriteTo,copyTo}/b/B2/o/TARGET`.
  struct CopyRoute {
    var bucket: String
    var source: String
    var targetBucket: String
    var target: String
    /// `rewriteTo` answers a rewrite response around the object; `copyTo` the object.
    var rewrite: Bool
  }

  static func parseCopy(_ path: String) -> CopyRoute? {
    let segments = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst().map(String.init)
    guard segments.count >= 10, segments[0] == "storage", segments[1] == "v1", segments[2] == "b", segments[4] == "o" else { return nil }
    // Object names in these paths have their slashes encoded, so the verb is one segment.
    guard let verb = segments.indices.dropFirst(5).first(where: { segments[$0] == "rewriteTo" || segments[$0] == "copyTo" }),
      segments.count > verb + 4, segments[verb + 1] == "b", segments[verb + 3] == "o",
      let bucket = segments[3].removingPercentEncoding,
      let source = segments[5..<verb].joined(separator: "/").removingPercentEncoding,
      let targetBucket = segments[verb + 2].removingPercentEncoding,
      let target = segments[(verb + 4)...].joined(separator: "/").removingPercentEncoding,
      !source.isEmpty, !target.isEmpty
    else { return nil }
    return CopyRoute(bucket: bucket, source: source, targetBucket: targetBucket, target: target, rewrite: segments[verb] == "rewriteTo")
  }

  /// A server-side copy, done in one call (`done: true`): `sourceGeneration` names the version
  /// to copy (only the live one is kept here), `ifSourceGeneration*` are checked against it,
  /// the other preconditions against the target; the JSON body overrides the copied metadata.
  private func copy(_ route: CopyRoute, request: inout ServerRequest) -> ServerResponse {
    guard let source = store.get(route.bucket, route.source), request.query["sourceGeneration"].map({ Int64($0) == source.generation }) ?? true
    else { return Self.error(404, "notFound", "No such object: \(route.bucket)/\(route.source)") }
    var sourceQuery: [String: String] = [:]
    for (key, value) in request.query where key.hasPrefix("ifSource") {
      sourceQuery["if" + key.dropFirst("ifSource".count)] = value
    }
    if let failed = preconditionFailure(source, sourceQuery) { return failed }
    if let failed = preconditionFailure(store.get(route.targetBucket, route.target), request.query) { return failed }
    guard let body = try? request.body.readAll(limit: 1 << 20),
      let json = (body.isEmpty ? [:] : try? JSONSerialization.jsonObject(with: body)) as? [String: Any]
    else { return Self.error(400, "invalid", "the body must be a JSON object") }
    let record: ObjectRecord
    do {
      record = try store.copy(source, bucket: route.targetBucket, name: route.target, metadata: json)
    } catch ObjectStore.Refusal.invalidName(let why) {
      return Self.error(400, "invalid", why)
    } catch {
      return Self.error(500, "internalError", "cannot store the copy")
    }
    let resource = record.gcsResource(base: request.publicBase)
    guard route.rewrite else { return .json(200, resource) }
    return .json(200, [
      "kind": "storage#rewriteResponse", "totalBytesRewritten": String(record.size), "objectSize": String(record.size), "done": true,
      "resource": resource,
    ])
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
      bucket: bucket, prefix: query["prefix"] ?? "", delimiter: delimiter, pageToken: query["pageToken"], maxResults: maxResults)
    var body: [String: Any] = ["kind": "storage#objects"]
    if !result.items.isEmpty { body["items"] = result.items.map { $0.gcsResource(base: base) } }
    if !result.prefixes.isEmpty { body["prefixes"] = result.prefixes }
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
      guard let json = try? JSONSerialization.jsonObject(with: upload.metadata) as? [String: Any] else {
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
      guard let record = try? store.commit(
        bucket: bucket, name: name, temporaryPath: upload.temporaryPath, size: upload.size, hashes: upload.hashes,
        metadata: metadata)
      else {
        unlink(upload.temporaryPath)
        return Self.error(500, "internalError", "cannot store the object")
      }
      return .json(200, record.gcsResource(base: request.publicBase))
    case "resumable":
      let body = (try? request.body.readAll(limit: 1 << 20)) ?? Data()
      var metadata = (body.isEmpty ? [:] : (try? JSONSerialization.jsonObject(with: body)) as? [String: Any]) ?? [:]
      guard let name = (metadata["name"] as? String) ?? request.query["name"], !name.isEmpty else {
        return Self.error(400, "required", "name is required")
      }
      if let problem = ObjectStore.nameProblem(name) { return Self.error(400, "invalid", problem) }
      if metadata["contentType"] == nil, let t = request.header("x-upload-content-type") { metadata["contentType"] = t }
      let session = uploads.create(bucket: bucket, name: name, metadata: metadata, store: store)
      guard session.fd >= 0 else { return Self.error(500, "internalError", "cannot create an upload file") }
      session.preconditions = request.query.filter { $0.key.hasPrefix("if") }
      let location = "\(request.publicBase)/upload/storage/v1/b/\(FirebaseRoutes.encode(bucket))/o?uploadType=resumable&name=\(FirebaseRoutes.encode(name))&upload_id=\(session.id)"
      return ServerResponse(status: 200, headers: [("Location", location), ("X-GUploader-UploadID", session.id)])
    default:
      return Self.error(400, "invalid", "unknown uploadType \(type)")
    }
  }

  private func storeBody(bucket: String, name: String, metadata: [String: Any], request: inout ServerRequest) -> ServerResponse {
    do {
      return .json(200, try store.store(bucket: bucket, name: name, body: request.body, metadata: metadata).gcsResource(base: request.publicBase))
    } catch {
      return error == .incompleteBody
        ? Self.error(400, "invalid", "the upload body was incomplete") : Self.error(500, "internalError", "cannot store the object")
    }
  }

  /// Chunks of a resumable upload: `Content-Range: bytes S-E/TOTAL` (TOTAL may be `*`) appends;
  /// `bytes */TOTAL` with no body asks how much arrived (308 + Range) or completes.
  private func resumable(id: String, request: inout ServerRequest) -> ServerResponse {
    guard let session = uploads.get(id) else { return Self.error(404, "notFound", "no such upload session") }
    session.lock.lock()
    defer { session.lock.unlock() }
    if request.method == "DELETE" {
      if session.status == "active" {
        session.status = "cancelled"
        close(session.fd)
        unlink(session.temporaryPath)
      }
      return ServerResponse(status: 499)
    }
    if let record = session.final { return .json(200, record.gcsResource(base: request.publicBase)) }
    guard session.status == "active" else { return Self.error(410, "gone", "the upload was cancelled") }
    var start: Int64? = nil
    var total: Int64? = nil
    if let header = request.header("content-range") {
      // "bytes S-E/T", "bytes S-E/*", "bytes */T"
      let spec = header.replacingOccurrences(of: "bytes", with: "").trimmingCharacters(in: .whitespaces)
      let halves = spec.split(separator: "/", maxSplits: 1).map(String.init)
      guard halves.count == 2 else { return Self.error(400, "invalid", "bad Content-Range") }
      if halves[1] != "*" {
        guard let t = Int64(halves[1]) else { return Self.error(400, "invalid", "bad Content-Range total") }
        total = t
      }
      if halves[0] != "*" {
        guard let s = Int64(halves[0].split(separator: "-").first ?? "") else {
          return Self.error(400, "invalid", "bad Content-Range")
        }
        start = s
      }
    }
    if let start {
      guard start == session.received else {
        return ServerResponse(status: 308, headers: receivedRange(session))
      }
      lseek(session.fd, off_t(session.received), SEEK_SET)
      do {
        while true {
          let chunk = try request.body.read(max: 1 << 20)
          if chunk.isEmpty { break }
          let ok = chunk.withUnsafeBytes { raw -> Bool in
            session.hashes.update(raw)
            return write(session.fd, raw.baseAddress!, raw.count) == raw.count
          }
          guard ok else { return Self.error(500, "internalError", "cannot write the upload") }
          session.received += Int64(chunk.count)
        }
      } catch {
        return Self.error(400, "invalid", "incomplete chunk")
      }
    } else if request.header("content-range") == nil {
      // No Content-Range: the whole object in one request.
      do {
        while true {
          let chunk = try request.body.read(max: 1 << 20)
          if chunk.isEmpty { break }
          chunk.withUnsafeBytes { raw in
            session.hashes.update(raw)
            _ = write(session.fd, raw.baseAddress!, raw.count)
          }
          session.received += Int64(chunk.count)
        }
      } catch {
        return Self.error(400, "invalid", "incomplete body")
      }
      total = session.received
    }
    guard let total, total == session.received else {
      return ServerResponse(status: 308, headers: receivedRange(session))
    }
    if let failed = preconditionFailure(store.get(session.bucket, session.name), session.preconditions) {
      return failed
    }
    close(session.fd)
    guard let record = try? store.commit(
      bucket: session.bucket, name: session.name, temporaryPath: session.temporaryPath, size: session.received,
      hashes: session.hashes, metadata: session.metadata)
    else { return Self.error(500, "internalError", "cannot store the object") }
    session.status = "final"
    session.final = record
    return .json(200, record.gcsResource(base: request.publicBase))
  }

  private func receivedRange(_ session: UploadSessions.Session) -> [(String, String)] {
    session.received > 0 ? [("Range", "bytes=0-\(session.received - 1)")] : []
  }
}
