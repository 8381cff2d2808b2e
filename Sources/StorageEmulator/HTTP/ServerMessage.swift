import Foundation

/// A parsed request line and headers; the body is read through `body`.
struct ServerRequest {
  var method: String
  /// The path, still percent-encoded, without the query.
  var rawPath: String
  var query: [String: String]
  /// Header names lower-cased.
  var headers: [String: String]
  var body: RequestBody
  /// `http://host:port` as the client reached us (set by the routes box): links in answers
  /// (media links, upload session URLs) point back the way the request came, through a proxy too.
  var publicBase = ""

  func header(_ name: String) -> String? { headers[name.lowercased()] }

  /// The body as a JSON object (an empty body is an empty one); nil when it is not one.
  func jsonObjectBody() -> [String: Any]? {
    guard let data = try? body.readAll(limit: 1 << 20) else { return nil }
    if data.isEmpty { return [:] }
    return (try? ExactText.jsonObject(with: data)) as? [String: Any]
  }
}

/// What a route answers; the connection writes it and applies faults.
struct ServerResponse {
  enum Body {
    case none
    case data(Data)
    /// Bytes sent chunked, with no Content-Length (what GCS does for a transcoded object).
    case chunked(Data)
    /// Bytes of an open file, which the connection closes after sending.
    case file(fd: Int32, offset: Int64, length: Int64)
  }

  var status: Int
  var headers: [(String, String)]
  var body: Body

  init(status: Int, headers: [(String, String)] = [], body: Body = .none) {
    self.status = status
    self.headers = headers
    self.body = body
  }

  static func json(_ status: Int, _ object: Any, headers: [(String, String)] = []) -> ServerResponse {
    let data = JSONWriter.data(object)
    return ServerResponse(
      status: status, headers: headers + [("Content-Type", "application/json; charset=utf-8")], body: .data(data))
  }

  static func error(_ status: Int, _ message: String) -> ServerResponse {
    json(status, ["error": ["code": status, "message": message]])
  }

  static func reason(_ status: Int) -> String {
    switch status {
    case 200: return "OK"
    case 204: return "No Content"
    case 206: return "Partial Content"
    case 308: return "Permanent Redirect"
    case 400: return "Bad Request"
    case 401: return "Unauthorized"
    case 403: return "Forbidden"
    case 404: return "Not Found"
    case 405: return "Method Not Allowed"
    case 408: return "Request Timeout"
    case 411: return "Length Required"
    case 412: return "Precondition Failed"
    case 413: return "Payload Too Large"
    case 416: return "Range Not Satisfiable"
    case 429: return "Too Many Requests"
    case 431: return "Request Header Fields Too Large"
    case 500: return "Internal Server Error"
    case 503: return "Service Unavailable"
    default: return "Status"
    }
  }
}
