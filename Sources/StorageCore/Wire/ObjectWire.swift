import Foundation

/// Which REST API a `Storage` speaks.
public enum StorageAPI: String, Sendable {
  /// Firebase Storage REST ("v0"), as the Firebase SDKs use it.
  case firebase
  /// The Google Cloud Storage JSON API v1.
  case gcs
}

/// Conditions on the object's current generation or metageneration; a mismatch fails with
/// `preconditionFailed` (HTTP 412) and changes nothing.
public struct Preconditions: Sendable, Equatable {
  /// 0 means "only if the object does not exist".
  public var ifGenerationMatch: Int64?
  public var ifMetagenerationMatch: Int64?

  public init(ifGenerationMatch: Int64? = nil, ifMetagenerationMatch: Int64? = nil) {
    self.ifGenerationMatch = ifGenerationMatch
    self.ifMetagenerationMatch = ifMetagenerationMatch
  }

  var query: [(String, String)] {
    var q: [(String, String)] = []
    if let g = ifGenerationMatch { q.append(("ifGenerationMatch", String(g))) }
    if let m = ifMetagenerationMatch { q.append(("ifMetagenerationMatch", String(m))) }
    return q
  }
}

/// What a resumable-upload chunk's answer means.
enum ChunkOutcome {
  /// The upload is complete; the body is the object's metadata.
  case final
  /// The chunk was taken; more are expected.
  case accepted
  case failed
}

/// The requests of one wire protocol and how to read the answers that differ between them.
protocol ObjectWire: Sendable {
  /// The object's own URL (its metadata).
  func objectURL(_ path: StoragePath) -> String
  /// The URL of a bucket's objects (its listings).
  func bucketURL(_ bucket: String) -> String
  /// The credentials as this protocol sends them; none without a token.
  var authHeaders: [(String, String)] { get }
  /// A media GET of `range` (or from `from` to the end); with `generation`, of that generation only
  /// where the protocol can ask for it.
  func download(_ path: StoragePath, range: Range<Int64>?, from: Int64?, generation: Int64?) -> HTTPRequest
  func updateMetadata(_ path: StoragePath, json: Data, preconditions: Preconditions) -> HTTPRequest
  func delete(_ path: StoragePath, preconditions: Preconditions) -> HTTPRequest
  /// A server-side copy of generation `generation` of `source` to `target` (one step of a
  /// rewrite, continued with `rewriteToken`); nil where the protocol has none (v0).
  func copy(_ source: StoragePath, generation: Int64?, to target: StoragePath, preconditions: Preconditions, rewriteToken: String?)
    -> HTTPRequest?
  /// `objects.move` of `source` to `target` in its bucket, in one step on the server, while the
  /// source is generation `ifSourceGenerationMatch` and the target meets `preconditions`; nil
  /// where the protocol has none (v0).
  func move(_ source: StoragePath, to target: StoragePath, ifSourceGenerationMatch: Int64?, preconditions: Preconditions) -> HTTPRequest?
  func multipartUpload(_ path: StoragePath, metadataJSON: Data, contentType: String, bytes: Data, preconditions: Preconditions)
    -> HTTPRequest
  func startResumableUpload(
    _ path: StoragePath, metadataJSON: Data, contentType: String, length: Int64, preconditions: Preconditions
  ) -> HTTPRequest
  func sessionURL(_ head: HTTPResponseHead) -> String?
  func uploadChunk(sessionURL: String, offset: Int64, total: Int64, body: HTTPRequest.Body, finalize: Bool) -> HTTPRequest
  func chunkOutcome(_ head: HTTPResponseHead, finalize: Bool) -> ChunkOutcome
  func queryUpload(sessionURL: String, total: Int64) -> HTTPRequest
  /// Bytes the server holds after a query, and whether the upload is already complete.
  func receivedBytes(_ head: HTTPResponseHead, total: Int64) -> (received: Int64, final: Bool)?
  func cancelUpload(sessionURL: String) -> HTTPRequest
  func downloadURL(_ path: StoragePath, token: String) -> String
}

extension ObjectWire {
  func getMetadata(_ path: StoragePath) -> HTTPRequest {
    HTTPRequest(method: "GET", url: objectURL(path), headers: authHeaders)
  }

  func list(
    bucket: String, prefix: String, delimiter: String?, pageToken: String?, maxResults: Int?, matchGlob: String? = nil,
    includeTrailingDelimiter: Bool = false, includeFoldersAsPrefixes: Bool = false
  ) -> HTTPRequest {
    var query: [(String, String)] = [("prefix", prefix)]
    if let delimiter { query.append(("delimiter", delimiter)) }
    if includeTrailingDelimiter { query.append(("includeTrailingDelimiter", "true")) }
    if includeFoldersAsPrefixes { query.append(("includeFoldersAsPrefixes", "true")) }
    if let matchGlob { query.append(("matchGlob", matchGlob)) }
    if let pageToken { query.append(("pageToken", pageToken)) }
    if let maxResults { query.append(("maxResults", String(maxResults))) }
    return HTTPRequest(method: "GET", url: bucketURL(bucket) + "?" + PercentEncoding.query(query), headers: authHeaders)
  }

  static func multipartBody(metadataJSON: Data, contentType: String, bytes: Data) -> (Data, String) {
    let boundary = "bucketfs" + String(UInt64.random(in: 0...UInt64.max), radix: 16)
    var body = Data()
    body.append(contentsOf: Array("--\(boundary)\r\nContent-Type: application/json; charset=utf-8\r\n\r\n".utf8))
    body.append(metadataJSON)
    body.append(contentsOf: Array("\r\n--\(boundary)\r\nContent-Type: \(contentType)\r\n\r\n".utf8))
    body.append(bytes)
    body.append(contentsOf: Array("\r\n--\(boundary)--".utf8))
    return (body, "multipart/related; boundary=\(boundary)")
  }
}
