/// A failure below HTTP: libcurl's code and text, classified for retry decisions.
package struct TransportError: Error, Sendable, CustomStringConvertible {
  package enum Kind: Sendable {
    /// Nothing listens at the address, or the name does not resolve: retrying will not help soon.
    case unreachable
    /// No byte moved for the stall timeout, or the connect timed out.
    case timedOut
    /// The connection broke mid-request (reset, truncated body, empty reply).
    case connectionLost
    /// TLS failed: the server's certificate was not trusted (or the CA file could not be used).
    case certificate
    /// The caller cancelled the transfer.
    case cancelled
    /// The local side failed (a file could not be read or written).
    case local
    /// The response body was larger than the caller allowed.
    case bodyTooLarge
    case other
  }

  package var kind: Kind
  package var curlCode: Int
  package var message: String

  package init(kind: Kind, curlCode: Int = 0, message: String) {
    self.kind = kind
    self.curlCode = curlCode
    self.message = message
  }

  package var description: String { message }
}
