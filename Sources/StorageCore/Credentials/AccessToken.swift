import Foundation

/// A bearer credential and when it stops working. Its text is never logged, printed or put in
/// an error message.
package struct AccessToken: Sendable, CustomStringConvertible {
  package var value: String
  /// Nil when unknown (a static token): it is then used until the server refuses it.
  package var expiry: Date?
  /// `Bearer` for OAuth access tokens, `Firebase` for Firebase Auth ID tokens.
  package var scheme: String

  package init(value: String, expiry: Date?, scheme: String = "Bearer") {
    self.value = value
    self.expiry = expiry
    self.scheme = scheme
  }

  /// The header value.
  var authorization: String { "\(scheme) \(value)" }

  package var description: String { "AccessToken(\(scheme), expires \(expiry.map { "\($0)" } ?? "unknown"))" }
}

/// Where tokens come from: a file, a key, the metadata server, a command, Firebase Auth, or
/// nowhere (anonymous requests).
package protocol CredentialSource: Sendable {
  /// The source, in words (`bucketfs auth` prints it): "service account key /path", …
  var source: String { get }
  /// Whose requests these are: a service account's email, "user", "metadata server", "anonymous".
  var identity: String { get }
  var scopes: [String] { get }
  /// A fresh token; nil for anonymous requests.
  func fetchToken() async throws(StorageError) -> AccessToken?
  /// True when the token may change without warning (a file rewritten by another program), so
  /// it is asked before every request rather than only when the token expires.
  var isVolatile: Bool { get }
}

extension CredentialSource {
  package var isVolatile: Bool { false }
}

/// The scopes a client asks a token for.
package enum StorageScope {
  package static let readOnly = "https://www.googleapis.com/auth/devstorage.read_only"
  package static let readWrite = "https://www.googleapis.com/auth/devstorage.read_write"
  package static let fullControl = "https://www.googleapis.com/auth/devstorage.full_control"
  package static let cloudPlatform = "https://www.googleapis.com/auth/cloud-platform"
}
