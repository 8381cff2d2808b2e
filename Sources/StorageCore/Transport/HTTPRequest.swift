import Foundation

/// One HTTP request as the transport sends it; the wire layers build these.
public struct HTTPRequest: Sendable {
  public enum Body: Sendable {
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

  public var method: String
  public var url: String
  public var headers: [(String, String)]
  public var body: Body
  /// Hears the body bytes handed to the connection so far, as they go (on the transfer thread:
  /// it must return at once).
  public var onBodySent: (@Sendable (Int64) -> Void)? = nil
  /// A PEM bundle of CA certificates to trust instead of the system's.
  public var caFile: String? = nil

  public init(method: String, url: String, headers: [(String, String)] = [], body: Body = .none) {
    self.method = method
    self.url = url
    self.headers = headers
    self.body = body
  }
}

/// The status line and headers of a response. Header names are lower-cased.
public struct HTTPResponseHead: Sendable {
  public var status: Int
  public var headers: [String: String]

  public init(status: Int, headers: [String: String]) {
    self.status = status
    self.headers = headers
  }

  public subscript(name: String) -> String? { headers[name.lowercased()] }

  /// The object's size from `Content-Range: bytes S-E/SIZE` (or `bytes */SIZE`).
  var contentRangeTotal: Int64? {
    guard let range = self["content-range"], let slash = range.lastIndex(of: "/") else { return nil }
    return Int64(range[range.index(after: slash)...].trimmingCharacters(in: .whitespaces))
  }
}

/// A complete response whose body was collected in memory.
public struct HTTPResponse: Sendable {
  public var head: HTTPResponseHead
  public var body: Data
  public var status: Int { head.status }
}

/// Timeouts that keep a stalled or absent server from hanging a caller.
public struct TransportTimeouts: Sendable {
  /// How long a TCP connect may take.
  public var connect: Duration
  /// A transfer that moves no byte for this long fails with `TransportError.timedOut`.
  public var stall: Duration

  public init(connect: Duration = .seconds(10), stall: Duration = .seconds(30)) {
    self.connect = connect
    self.stall = stall
  }
}
