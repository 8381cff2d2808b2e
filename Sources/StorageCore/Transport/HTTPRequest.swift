import Foundation

/// One HTTP request as the transport sends it; the wire layers build these.
package struct HTTPRequest: Sendable {
  package enum Body: Sendable {
    case none
    case data(Data)
    /// A slice of a local file, read as it is sent so that large uploads are never held in memory.
    case file(path: String, offset: Int64, length: Int64)

    var length: Int64 {
      switch self {
      case .none: return 0
      case .data(let d): return Int64(d.count)
      case .file(_, _, let length): return length
      }
    }
  }

  package var method: String
  package var url: String
  package var headers: [(String, String)]
  package var body: Body
  /// Hears the body bytes handed to the connection so far, as they go (on the transfer thread:
  /// it must return at once).
  package var onBodySent: (@Sendable (Int64) -> Void)? = nil
  /// A PEM bundle of CA certificates to trust instead of the system's.
  package var caFile: String? = nil

  package init(method: String, url: String, headers: [(String, String)] = [], body: Body = .none) {
    self.method = method
    self.url = url
    self.headers = headers
    self.body = body
  }
}

/// The status line and headers of a response. Header names are lower-cased.
package struct HTTPResponseHead: Sendable {
  package var status: Int
  package var headers: [String: String]

  package init(status: Int, headers: [String: String]) {
    self.status = status
    self.headers = headers
  }

  package subscript(name: String) -> String? { headers[name.lowercased()] }

  /// The object's size from `Content-Range: bytes S-E/SIZE` (or `bytes */SIZE`).
  var contentRangeTotal: Int64? {
    guard let range = self["content-range"], let slash = range.lastIndex(of: "/") else { return nil }
    return Int64(range[range.index(after: slash)...].trimmingCharacters(in: .whitespaces)).flatMap { $0 >= 0 ? $0 : nil }
  }

  /// The object's size: from Content-Range when the answer has one, else its Content-Length
  /// (a whole object's answer).
  var objectSize: Int64? {
    self["content-range"] != nil ? contentRangeTotal : self["content-length"].flatMap { Int64($0) }.flatMap { $0 >= 0 ? $0 : nil }
  }

  /// The generation of the object whose bytes these are (`x-goog-generation`).
  var generation: Int64? { self["x-goog-generation"].flatMap { Int64($0) } }
}

/// A complete response whose body was collected in memory.
package struct HTTPResponse: Sendable {
  package var head: HTTPResponseHead
  package var body: Data
  package var status: Int { head.status }
}

/// Timeouts that keep a stalled or absent server from hanging a caller.
package struct TransportTimeouts: Sendable {
  /// How long a TCP connect may take.
  package var connect: Duration
  /// A transfer that moves no byte for this long fails with `TransportError.timedOut`.
  package var stall: Duration

  package init(connect: Duration = .seconds(10), stall: Duration = .seconds(30)) {
    self.connect = connect
    self.stall = stall
  }
}
