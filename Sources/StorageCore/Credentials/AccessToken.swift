import Foundation

/// A bearer credential and when it stops working. Its text is never logged, printed or put in
/// an error message.
public struct AccessToken: Sendable, CustomStringConvertible {
  public var value: String
  /// Nil when unknown (a static token): it is then used until the server refuses it.
  public var expiry: Date?
  /// `Bearer` for OAuth access tokens, `Firebase` for Firebase Auth ID tokens.
  public var scheme: String

  public init(value: String, expiry: Date?, scheme: String = "Bearer") {
    self.value = value
    self.expiry = expiry
    self.scheme = scheme
  }

  /// The header value.
  var authorization: String { "\(scheme) \(value)" }

  public var description: String { "AccessToken(\(scheme), expires \(expiry.map { "\($0)" } ?? "unknown"))" }
}

/// Where tokens come from: a file, a key, the metadata server, a command, Firebase Auth, or
/// nowhere (anonymous requests).
public protocol CredentialSource: Sendable {
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
  public var isVolatile: Bool { false }
}

/// The scopes a client asks a token for.
public enum StorageScope {
  public static let readOnly = "https://www.googleapis.com/auth/devstorage.read_only"
  public static let readWrite = "https://www.googleapis.com/auth/devstorage.read_write"
  public static let fullControl = "https://www.googleapis.com/auth/devstorage.full_control"
  public static let cloudPlatform = "https://www.googleapis.com/auth/cloud-platform"
}
