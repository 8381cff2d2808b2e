import Foundation

/// Requests of the Firebase Storage REST API ("v0"), the protocol the Firebase SDKs speak.
struct FirebaseWire: ObjectWire {
  /// `scheme://host[:port]/v0`
  var base: String
  var token: String?

  var authHeaders: [(String, String)] {
    token.map { [("Authorization", "Firebase \($0)")] } ?? []
  }

  func objectURL(_ path: StoragePath) -> String {
    "\(base)/b/\(PercentEncoding.encode(path.bucket))/o/\(PercentEncoding.encode(path.object))"
  }

  func bucketURL(_ bucket: String) -> String {
    "\(base)/b/\(PercentEncoding.encode(bucket))/o"
  }

  private func withQuery(_ url: String, _ query: [(String, String)]) -> String {
    query.isEmpty ? url : url + (url.contains("?") ? "&" : "?") + PercentEncoding.query(query)
  }

  /// v0 cannot ask for a generation: the caller checks `x-goog-generation` in the answer.
  func download(_ path: StoragePath, range: Range<Int64>?, from: Int64?, generation: Int64?) -> HTTPRequest {
    HTTPRequest(method: "GET", url: objectURL(path) + "?alt=media", headers: authHeaders + mediaHeaders(range, from))
  }

  func updateMetadata(_ path: StoragePath, json: Data, preconditions: Preconditions) -> HTTPRequest {
    HTTPRequest(
      method: "PATCH", url: withQuery(objectURL(path), preconditions.query),
      headers: authHeaders + [("Content-Type", "application/json; charset=utf-8")], body: .data(json))
  }

  func delete(_ path: StoragePath, preconditions: Preconditions) -> HTTPRequest {
    HTTPRequest(method: "DELETE", url: withQuery(objectURL(path), preconditions.query), headers: authHeaders)
  }

  /// One-request upload: a JSON metadata part and the bytes, as the JS SDK's `uploadBytes` sends.
  /// Firebase Storage REST has no copy: the bytes go through the client.
  func copy(_ source: StoragePath, generation: Int64?, to target: StoragePath, preconditions: Preconditions, rewriteToken: String?)
    -> HTTPRequest?
  {
    nil
  }

  /// Nor a move.
  func move(_ source: StoragePath, to target: StoragePath, ifSourceGenerationMatch: Int64?, preconditions: Preconditions) -> HTTPRequest? {
    nil
  }

  func multipartUpload(_ path: StoragePath, metadataJSON: Data, contentType: String, bytes: Data, preconditions: Preconditions)
    -> HTTPRequest
  {
    let (body, type) = Self.multipartBody(metadataJSON: metadataJSON, contentType: contentType, bytes: bytes)
    return HTTPRequest(
      method: "POST", url: withQuery(bucketURL(path.bucket), [("name", path.object)] + preconditions.query),
      headers: authHeaders + [("X-Goog-Upload-Protocol", "multipart"), ("Content-Type", type)], body: .data(body))
  }

  func startResumableUpload(
    _ path: StoragePath, metadataJSON: Data, contentType: String, length: Int64, preconditions: Preconditions
  ) -> HTTPRequest {
    HTTPRequest(
      method: "POST", url: withQuery(bucketURL(path.bucket), [("name", path.object)] + preconditions.query),
      headers: authHeaders + [
        ("X-Goog-Upload-Protocol", "resumable"),
        ("X-Goog-Upload-Command", "start"),
        ("X-Goog-Upload-Header-Content-Type", contentType),
        ("X-Goog-Upload-Header-Content-Length", String(length)),
        ("Content-Type", "application/json; charset=utf-8"),
      ], body: .data(metadataJSON))
  }

  func sessionURL(_ head: HTTPResponseHead) -> String? { head["x-goog-upload-url"] }

  func uploadChunk(sessionURL: String, offset: Int64, total: Int64, body: HTTPRequest.Body, finalize: Bool) -> HTTPRequest {
    HTTPRequest(
      method: "POST", url: sessionURL,
      headers: authHeaders + [
        ("X-Goog-Upload-Protocol", "resumable"),
        ("X-Goog-Upload-Command", finalize ? "upload, finalize" : "upload"),
        ("X-Goog-Upload-Offset", String(offset)),
      ], body: body)
  }

  func chunkOutcome(_ head: HTTPResponseHead, finalize: Bool) -> ChunkOutcome {
    guard (200..<300).contains(head.status) else { return .failed }
    return finalize || head["x-goog-upload-status"] == "final" ? .final : .accepted
  }

  func queryUpload(sessionURL: String, total: Int64) -> HTTPRequest {
    HTTPRequest(
      method: "POST", url: sessionURL,
      headers: authHeaders + [("X-Goog-Upload-Protocol", "resumable"), ("X-Goog-Upload-Command", "query")])
  }

  func receivedBytes(_ head: HTTPResponseHead, total: Int64) -> (received: Int64, final: Bool)? {
    guard (200..<300).contains(head.status), let received = head["x-goog-upload-size-received"].flatMap({ Int64($0) }) else {
      return nil
    }
    return (received, head["x-goog-upload-status"] == "final")
  }

  func cancelUpload(sessionURL: String) -> HTTPRequest {
    HTTPRequest(
      method: "POST", url: sessionURL,
      headers: authHeaders + [("X-Goog-Upload-Protocol", "resumable"), ("X-Goog-Upload-Command", "cancel")])
  }

  /// The download URL the SDKs build from the first download token.
  func downloadURL(_ path: StoragePath, token: String) -> String {
    objectURL(path) + "?alt=media&token=" + PercentEncoding.encode(token)
  }
}

/// The headers of a media GET. `Accept-Encoding: gzip` asks for the stored bytes of an object
/// stored gzip-compressed: without it Google (and the official emulator, firebase-tools
/// `apis/shared.ts`) serve it decompressed, with no Content-Length, the Range ignored and an
/// `x-goog-hash` of the stored bytes, so sizes, ranges and hashes would not fit. libcurl is not
/// asked to decode (no CURLOPT_ACCEPT_ENCODING): the caller decides (`GzipDecoding`).
func mediaHeaders(_ range: Range<Int64>?, _ from: Int64?) -> [(String, String)] {
  var headers = [("Accept-Encoding", "gzip")]
  if let range, !range.isEmpty { headers.append(("Range", "bytes=\(range.lowerBound)-\(range.upperBound - 1)")) }
  if let from { headers.append(("Range", "bytes=\(from)-")) }
  return headers
}

