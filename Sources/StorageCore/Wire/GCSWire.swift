import Foundation

/// Requests of the Google Cloud Storage JSON API v1: full metadata in listings, generation-pinned
/// media reads, and the Content-Range resumable protocol (308 until complete).
struct GCSWire: ObjectWire {
  /// `scheme://host[:port]`
  var root: String
  var token: String?
  /// Where Firebase download URLs point (v0 on the same emulator, or the Firebase host).
  var firebaseBase: String

  var authHeaders: [(String, String)] {
    token.map { [("Authorization", "Bearer \($0)")] } ?? []
  }

  func objectURL(_ path: StoragePath) -> String { objectURL(path, query: []) }

  private func objectURL(_ path: StoragePath, query: [(String, String)], service: String = "storage") -> String {
    let url = "\(root)/\(service)/v1/b/\(PercentEncoding.encode(path.bucket))/o/\(PercentEncoding.encode(path.object))"
    return query.isEmpty ? url : url + "?" + PercentEncoding.query(query)
  }

  func bucketURL(_ bucket: String) -> String { bucketURL(bucket, service: "storage") }

  private func bucketURL(_ bucket: String, service: String) -> String {
    "\(root)/\(service)/v1/b/\(PercentEncoding.encode(bucket))/o"
  }

  func download(_ path: StoragePath, range: Range<Int64>?, from: Int64?, generation: Int64?) -> HTTPRequest {
    var query = [("alt", "media")]
    if let generation { query.append(("generation", String(generation))) }
    return HTTPRequest(method: "GET", url: objectURL(path, query: query), headers: authHeaders + mediaHeaders(range, from))
  }

  func updateMetadata(_ path: StoragePath, json: Data, preconditions: Preconditions) -> HTTPRequest {
    HTTPRequest(
      method: "PATCH", url: objectURL(path, query: preconditions.query),
      headers: authHeaders + [("Content-Type", "application/json; charset=utf-8")], body: .data(json))
  }

  func delete(_ path: StoragePath, preconditions: Preconditions) -> HTTPRequest {
    HTTPRequest(method: "DELETE", url: objectURL(path, query: preconditions.query), headers: authHeaders)
  }

  func copy(_ source: StoragePath, generation: Int64?, to target: StoragePath, preconditions: Preconditions, rewriteToken: String?)
    -> HTTPRequest?
  {
    var query = preconditions.query
    if let generation { query.append(("sourceGeneration", String(generation))) }
    if let rewriteToken { query.append(("rewriteToken", rewriteToken)) }
    let url = objectURL(source) + "/rewriteTo/b/\(PercentEncoding.encode(target.bucket))/o/\(PercentEncoding.encode(target.object))"
    return HTTPRequest(
      method: "POST", url: query.isEmpty ? url : url + "?" + PercentEncoding.query(query),
      headers: authHeaders + [("Content-Type", "application/json; charset=utf-8")], body: .data(Data("{}".utf8)))
  }

  func move(_ source: StoragePath, to target: StoragePath, ifSourceGenerationMatch: Int64?, preconditions: Preconditions) -> HTTPRequest? {
    var query = preconditions.query
    if let g = ifSourceGenerationMatch { query.append(("ifSourceGenerationMatch", String(g))) }
    let url = objectURL(source) + "/moveTo/o/\(PercentEncoding.encode(target.object))"
    return HTTPRequest(method: "POST", url: query.isEmpty ? url : url + "?" + PercentEncoding.query(query), headers: authHeaders)
  }

  func multipartUpload(_ path: StoragePath, metadataJSON: Data, contentType: String, bytes: Data, preconditions: Preconditions)
    -> HTTPRequest
  {
    let (body, type) = Self.multipartBody(metadataJSON: metadataJSON, contentType: contentType, bytes: bytes)
    let query = [("uploadType", "multipart"), ("name", path.object)] + preconditions.query
    return HTTPRequest(
      method: "POST", url: bucketURL(path.bucket, service: "upload/storage") + "?" + PercentEncoding.query(query),
      headers: authHeaders + [("Content-Type", type)], body: .data(body))
  }

  func startResumableUpload(
    _ path: StoragePath, metadataJSON: Data, contentType: String, length: Int64, preconditions: Preconditions
  ) -> HTTPRequest {
    let query = [("uploadType", "resumable"), ("name", path.object)] + preconditions.query
    return HTTPRequest(
      method: "POST", url: bucketURL(path.bucket, service: "upload/storage") + "?" + PercentEncoding.query(query),
      headers: authHeaders + [
        ("Content-Type", "application/json; charset=utf-8"), ("X-Upload-Content-Type", contentType),
        ("X-Upload-Content-Length", String(length)),
      ], body: .data(metadataJSON))
  }

  func sessionURL(_ head: HTTPResponseHead) -> String? { head["location"] }

  func uploadChunk(sessionURL: String, offset: Int64, total: Int64, body: HTTPRequest.Body, finalize: Bool) -> HTTPRequest {
    let length = body.length
    let range = length == 0 ? "bytes */\(total)" : "bytes \(offset)-\(offset + length - 1)/\(total)"
    return HTTPRequest(method: "PUT", url: sessionURL, headers: authHeaders + [("Content-Range", range)], body: body)
  }

  func chunkOutcome(_ head: HTTPResponseHead, finalize: Bool) -> ChunkOutcome {
    if head.status == 308 { return .accepted }
    return (200..<300).contains(head.status) ? .final : .failed
  }

  func queryUpload(sessionURL: String, total: Int64) -> HTTPRequest {
    HTTPRequest(method: "PUT", url: sessionURL, headers: authHeaders + [("Content-Range", "bytes */\(total)")])
  }

  func receivedBytes(_ head: HTTPResponseHead, total: Int64) -> (received: Int64, final: Bool)? {
    if (200..<300).contains(head.status) { return (total, true) }
    guard head.status == 308 else { return nil }
    // "Range: bytes=0-N" means N+1 bytes are held; no Range header means none.
    guard let range = head["range"], let dash = range.lastIndex(of: "-"), let last = Int64(range[range.index(after: dash)...])
    else { return (0, false) }
    return (last + 1, false)
  }

  func cancelUpload(sessionURL: String) -> HTTPRequest {
    HTTPRequest(method: "DELETE", url: sessionURL, headers: authHeaders)
  }

  func downloadURL(_ path: StoragePath, token: String) -> String {
    FirebaseWire(base: firebaseBase, token: nil).downloadURL(path, token: token)
  }
}
