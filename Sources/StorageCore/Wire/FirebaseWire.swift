import Foundation

/// Requests of the Firebase Storage REST API ("v0"), the protocol the Firebase SDKs speak.
struct FirebaseWire: Sendable {
  /// `scheme://host[:port]/v0`
  var base: String
  var token: String?

  private var authHeaders: [(String, String)] {
    token.map { [("Authorization", "Firebase \($0)")] } ?? []
  }

  func objectURL(_ path: StoragePath) -> String {
    "\(base)/b/\(PercentEncoding.encode(path.bucket))/o/\(PercentEncoding.encode(path.object))"
  }

  func bucketURL(_ bucket: String) -> String {
    "\(base)/b/\(PercentEncoding.encode(bucket))/o"
  }

  func getMetadata(_ path: StoragePath) -> HTTPRequest {
    HTTPRequest(method: "GET", url: objectURL(path), headers: authHeaders)
  }

  /// A media GET; `range` is inclusive-exclusive in bytes, `nil` for the whole object.
  func download(_ path: StoragePath, range: Range<Int64>? = nil, openEnded from: Int64? = nil) -> HTTPRequest {
    var headers = authHeaders
    if let range, !range.isEmpty {
      headers.append(("Range", "bytes=\(range.lowerBound)-\(range.upperBound - 1)"))
    } else if let from {
      headers.append(("Range", "bytes=\(from)-"))
    }
    return HTTPRequest(method: "GET", url: objectURL(path) + "?alt=media", headers: headers)
  }

  func list(bucket: String, prefix: String, delimiter: String?, pageToken: String?, maxResults: Int?)
    -> HTTPRequest
  {
    var query: [(String, String)] = [("prefix", prefix)]
    if let delimiter { query.append(("delimiter", delimiter)) }
    if let pageToken { query.append(("pageToken", pageToken)) }
    if let maxResults { query.append(("maxResults", String(maxResults))) }
    return HTTPRequest(
      method: "GET", url: bucketURL(bucket) + "?" + PercentEncoding.query(query), headers: authHeaders)
  }

  func updateMetadata(_ path: StoragePath, json: Data) -> HTTPRequest {
    HTTPRequest(
      method: "PATCH", url: objectURL(path),
      headers: authHeaders + [("Content-Type", "application/json; charset=utf-8")], body: .data(json))
  }

  func delete(_ path: StoragePath) -> HTTPRequest {
    HTTPRequest(method: "DELETE", url: objectURL(path), headers: authHeaders)
  }

  /// One-request upload: a JSON metadata part and the bytes, as the JS SDK's `uploadBytes` sends.
  func multipartUpload(_ path: StoragePath, metadataJSON: Data, contentType: String, bytes: Data)
    -> HTTPRequest
  {
    let boundary = "bucketfs" + String(UInt64.random(in: 0...UInt64.max), radix: 16)
    var body = Data()
    body.append(contentsOf: Array("--\(boundary)\r\nContent-Type: application/json; charset=utf-8\r\n\r\n".utf8))
    body.append(metadataJSON)
    body.append(contentsOf: Array("\r\n--\(boundary)\r\nContent-Type: \(contentType)\r\n\r\n".utf8))
    body.append(bytes)
    body.append(contentsOf: Array("\r\n--\(boundary)--".utf8))
    return HTTPRequest(
      method: "POST",
      url: bucketURL(path.bucket) + "?" + PercentEncoding.query([("name", path.object)]),
      headers: authHeaders + [
        ("X-Goog-Upload-Protocol", "multipart"),
        ("Content-Type", "multipart/related; boundary=\(boundary)"),
      ], body: .data(body))
  }

  func startResumableUpload(_ path: StoragePath, metadataJSON: Data, contentType: String, length: Int64)
    -> HTTPRequest
  {
    HTTPRequest(
      method: "POST",
      url: bucketURL(path.bucket) + "?" + PercentEncoding.query([("name", path.object)]),
      headers: authHeaders + [
        ("X-Goog-Upload-Protocol", "resumable"),
        ("X-Goog-Upload-Command", "start"),
        ("X-Goog-Upload-Header-Content-Type", contentType),
        ("X-Goog-Upload-Header-Content-Length", String(length)),
        ("Content-Type", "application/json; charset=utf-8"),
      ], body: .data(metadataJSON))
  }

  func uploadChunk(sessionURL: String, offset: Int64, body: HTTPRequest.Body, finalize: Bool) -> HTTPRequest {
    HTTPRequest(
      method: "POST", url: sessionURL,
      headers: authHeaders + [
        ("X-Goog-Upload-Protocol", "resumable"),
        ("X-Goog-Upload-Command", finalize ? "upload, finalize" : "upload"),
        ("X-Goog-Upload-Offset", String(offset)),
      ], body: body)
  }

  func queryUpload(sessionURL: String) -> HTTPRequest {
    HTTPRequest(
      method: "POST", url: sessionURL,
      headers: authHeaders + [("X-Goog-Upload-Protocol", "resumable"), ("X-Goog-Upload-Command", "query")])
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

/// One page of a list call, with object names exactly as the server sent them.
public struct ListPage: Sendable {
  public var prefixes: [String]
  public var items: [String]
  /// Full metadata per item when the protocol carries it (GCS JSON); empty for v0.
  public var metadata: [String: StorageMetadata]
  public var nextPageToken: String?

  public init(prefixes: [String], items: [String], metadata: [String: StorageMetadata] = [:], nextPageToken: String?) {
    self.prefixes = prefixes
    self.items = items
    self.metadata = metadata
    self.nextPageToken = nextPageToken
  }

  static func decode(_ data: Data) -> ListPage? {
    guard let json = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else { return nil }
    let prefixes = json["prefixes"] as? [String] ?? []
    var items: [String] = []
    var metadata: [String: StorageMetadata] = [:]
    for item in json["items"] as? [[String: Any]] ?? [] {
      guard let name = item["name"] as? String else { continue }
      items.append(name)
      if item["size"] != nil { metadata[name] = StorageMetadata(dictionary: item) }
    }
    let token = json["nextPageToken"] as? String
    return ListPage(
      prefixes: prefixes, items: items, metadata: metadata,
      nextPageToken: (token?.isEmpty ?? true) ? nil : token)
  }
}
