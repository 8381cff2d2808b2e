// The sources of tokens, in the order Application Default Credentials tries them, plus a token
// file, a token command and Firebase Auth refresh. Each reads what it needs when made (so a
// malformed key file fails at once, with its path and the reason) and fetches tokens on demand.
internal import CCrypto
internal import ChildProcess
import Foundation
import Synchronization

/// A token read from a file, read again whenever the file changes (an external refresher may
/// rotate it). The token is used until the server refuses it.
package final class TokenFileSource: CredentialSource {
  package let path: String
  package let scopes: [String] = []
  package var source: String { "token file \(path)" }
  package var identity: String { "the token's owner" }
  package var isVolatile: Bool { true }
  private let cache = Mutex<(stamp: [Int], token: String?)>(([], nil))

  package init(path: String) throws(StorageError) {
    self.path = path
    _ = try read()
  }

  private func stamp() -> [Int] {
    var st = stat()
    guard stat(path, &st) == 0 else { return [] }
    return [Int(st.st_ino), Int(st.st_size), Int(st.st_mtim.tv_sec), Int(st.st_mtim.tv_nsec)]
  }

  private func read() throws(StorageError) -> String {
    try SecretFile.token(path, what: "token file")
  }

  package func fetchToken() async throws(StorageError) -> AccessToken? {
    let now = stamp()
    if let cached = cache.withLock({ $0.stamp == now ? $0.token : nil }) { return AccessToken(value: cached, expiry: nil, scheme: "") }
    let token = try read()
    cache.withLock { $0 = (now, token) }
    return AccessToken(value: token, expiry: nil, scheme: "")
  }
}

/// A service account's key file: tokens from the JWT bearer grant (RFC 7523), signed RS256.
package struct ServiceAccountSource: CredentialSource {
  package let path: String
  package let email: String
  let privateKey: String
  let keyID: String?
  package let tokenURI: String
  package let scopes: [String]
  let client: HTTPClient
  package var source: String { "service account key \(path)" }
  package var identity: String { email }

  init(path: String, json: [String: Any], scopes: [String], client: HTTPClient) throws(StorageError) {
    guard let email = json["client_email"] as? String, let key = json["private_key"] as? String else {
      throw StorageError(code: .unauthenticated, object: path, detail: "the key file has no client_email or private_key")
    }
    self.path = path
    self.email = email
    self.privateKey = key
    self.keyID = json["private_key_id"] as? String
    self.tokenURI = (json["token_uri"] as? String) ?? "https://oauth2.googleapis.com/token"
    self.scopes = scopes
    self.client = client
    // A key that cannot sign fails now, not at the first request.
    _ = try Self.sign(Data("probe".utf8), key: key, path: path)
  }

  static func sign(_ data: Data, key: String, path: String) throws(StorageError) -> Data {
    var signature = [UInt8](repeating: 0, count: 1024)
    var length = signature.count
    let status = key.withCString { pem in
      data.withUnsafeBytes { raw in CCrypto_rs256_sign(pem, strlen(pem), raw.baseAddress, raw.count, &signature, &length) }
    }
    switch status {
    case 0: return Data(signature[0..<length])
    case -2: throw StorageError(code: .unauthenticated, object: path, detail: "the key file's private_key is not an RSA key")
    case -1: throw StorageError(code: .unauthenticated, object: path, detail: "the key file's private_key is not a PEM private key")
    default: throw StorageError(code: .unauthenticated, object: path, detail: "signing with the key file's private_key failed")
    }
  }

  static func base64URL(_ data: Data) -> String {
    data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
      .replacingOccurrences(of: "=", with: "")
  }

  /// The signed assertion for a token request issued at `now`.
  func assertion(now: Date) throws(StorageError) -> String {
    var header: [String: Any] = ["alg": "RS256", "typ": "JWT"]
    if let keyID { header["kid"] = keyID }
    let iat = Int(now.timeIntervalSince1970)
    let claims: [String: Any] = [
      "iss": email, "scope": scopes.joined(separator: " "), "aud": tokenURI, "iat": iat, "exp": iat + 3600,
    ]
    let encode = { (object: [String: Any]) -> String in
      Self.base64URL((try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data())
    }
    let signed = encode(header) + "." + encode(claims)
    return signed + "." + Self.base64URL(try Self.sign(Data(signed.utf8), key: privateKey, path: path))
  }

  package func fetchToken() async throws(StorageError) -> AccessToken? {
    let jwt = try assertion(now: Date())
    let endpoint = TokenEndpoint(url: tokenURI, client: client)
    let json = try await endpoint.post(
      [("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"), ("assertion", jwt)], what: "the service account \(email)")
    return try TokenEndpoint.token(from: json, scheme: "Bearer", what: "the service account \(email)", url: tokenURI)
  }
}

/// A user's credentials (`gcloud auth application-default login`): the refresh-token grant.
package struct AuthorizedUserSource: CredentialSource {
  package let path: String
  let clientID: String
  let clientSecret: String
  let refreshToken: String
  let tokenURI: String
  package let scopes: [String]
  let client: HTTPClient
  package var source: String { "user credentials \(path)" }
  package var identity: String { "user" }

  init(path: String, json: [String: Any], scopes: [String], client: HTTPClient) throws(StorageError) {
    guard let id = json["client_id"] as? String, let secret = json["client_secret"] as? String,
      let refresh = json["refresh_token"] as? String
    else {
      throw StorageError(code: .unauthenticated, object: path, detail: "the credentials file needs client_id, client_secret and refresh_token")
    }
    self.path = path
    clientID = id
    clientSecret = secret
    refreshToken = refresh
    tokenURI = (json["token_uri"] as? String) ?? "https://oauth2.googleapis.com/token"
    self.scopes = scopes
    self.client = client
  }

  package func fetchToken() async throws(StorageError) -> AccessToken? {
    let endpoint = TokenEndpoint(url: tokenURI, client: client)
    let json = try await endpoint.post(
      [("grant_type", "refresh_token"), ("client_id", clientID), ("client_secret", clientSecret), ("refresh_token", refreshToken)],
      what: "the user credentials")
    return try TokenEndpoint.token(from: json, scheme: "Bearer", what: "the user credentials", url: tokenURI)
  }
}

/// The metadata server of a Google Cloud VM (GCE, GKE, Cloud Run).
package struct MetadataServerSource: CredentialSource {
  package let host: String
  package let scopes: [String]
  let client: HTTPClient
  package var source: String { "metadata server \(host)" }
  package var identity: String { "metadata server" }

  package init(host: String, scopes: [String], client: HTTPClient) {
    self.host = host
    self.scopes = scopes
    self.client = client
  }

  /// True when `host` answers as a metadata server, within a short timeout so that a machine
  /// without one does not wait.
  static func detect(host: String, client: HTTPClient) async -> Bool {
    let request = HTTPRequest(method: "GET", url: "http://\(host)/", headers: [("Metadata-Flavor", "Google")])
    guard let response = try? await client.send(
      request, timeouts: TransportTimeouts(connect: .milliseconds(500), stall: .seconds(1)), maxBody: 64 << 10)
    else { return false }
    return response.head["metadata-flavor"] == "Google"
  }

  package func fetchToken() async throws(StorageError) -> AccessToken? {
    let url = "http://\(host)/computeMetadata/v1/instance/service-accounts/default/token"
    let endpoint = TokenEndpoint(url: url, client: client)
    let json = try await endpoint.send(
      HTTPRequest(method: "GET", url: url, headers: [("Metadata-Flavor", "Google")]), what: "the metadata server")
    return try TokenEndpoint.token(from: json, scheme: "Bearer", what: "the metadata server", url: url)
  }
}

/// A command run without a shell whose standard output is the token, used for `lifetime`.
package struct TokenCommandSource: CredentialSource {
  package let command: [String]
  package let lifetime: TimeInterval
  package let scopes: [String] = []
  package var source: String { "token command \(command.first ?? "")" }
  package var identity: String { "the command's token" }
  /// A command that hangs must not hold a refresh for ever (the man page says so).
  static let timeout: Duration = .seconds(30)

  package init(command: [String], lifetime: TimeInterval) throws(StorageError) {
    guard let first = command.first, !first.isEmpty else {
      throw StorageError(code: .invalidArgument, object: "", detail: "--token-command needs a command")
    }
    self.command = command
    self.lifetime = lifetime
  }

  static func resolve(_ name: String) -> String? {
    if name.contains("/") { return name }
    for dir in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
      let candidate = "\(dir)/\(name)"
      if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
    }
    return nil
  }

  package func fetchToken() async throws(StorageError) -> AccessToken? {
    guard let path = Self.resolve(command[0]) else {
      throw StorageError(code: .unauthenticated, object: command[0], detail: "the token command is not found")
    }
    let command = command
    let finished: Result<ChildProcess.Output, ChildProcess.StartError> = await withCheckedContinuation { done in
      // Off the task pool: the command may take seconds, and the pool has a thread per core.
      DispatchQueue.global().async {
        done.resume(with: .success(Result { () throws(ChildProcess.StartError) in
          try ChildProcess.run(
            path, Array(command.dropFirst()), environment: ProcessInfo.processInfo.environment,
            errors: .null, timeout: Self.timeout)
        }))
      }
    }
    let output: ChildProcess.Output
    switch finished {
    case .success(let finished): output = finished
    case .failure(let error):
      throw StorageError(code: .unauthenticated, object: path, detail: "the token command did not start: \(String(cString: strerror(error.errno)))")
    }
    guard !output.timedOut else {
      throw StorageError(code: .unauthenticated, object: path, detail: "the token command did not finish within \(Self.timeout)")
    }
    guard output.termination == .exited(0) else {
      throw StorageError(code: .unauthenticated, object: path, detail: "the token command \(output.termination)")
    }
    let data = output.output
    let token = String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline).first
      .map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
    guard !token.isEmpty else {
      throw StorageError(code: .unauthenticated, object: path, detail: "the token command printed no token")
    }
    guard SecretFile.isToken(token) else {
      throw StorageError(code: .unauthenticated, object: path, detail: "the token command printed something that is not a token")
    }
    return AccessToken(value: token, expiry: Date().addingTimeInterval(lifetime), scheme: "")
  }
}

/// A Firebase user: ID tokens from the secure-token endpoint with the user's refresh token,
/// which the endpoint replaces on every refresh (the file is rewritten atomically, mode 0600).
package final class FirebaseUserSource: CredentialSource {
  package let refreshTokenFile: String
  let apiKey: String
  package let endpointURL: String
  let client: HTTPClient
  private let user = Mutex<String?>(nil)
  package let scopes: [String] = []
  package var source: String { "Firebase refresh token \(refreshTokenFile)" }
  package var identity: String { "user" + (user.withLock { $0 }.map { " \($0)" } ?? "") }

  package init(refreshTokenFile: String, apiKey: String, endpointURL: String, client: HTTPClient) throws(StorageError) {
    self.refreshTokenFile = refreshTokenFile
    self.apiKey = apiKey
    self.endpointURL = endpointURL
    self.client = client
    _ = try readRefreshToken()
  }

  func readRefreshToken() throws(StorageError) -> String {
    try SecretFile.token(refreshTokenFile, what: "refresh token file")
  }

  package func fetchToken() async throws(StorageError) -> AccessToken? {
    let refresh = try readRefreshToken()
    let separator = endpointURL.contains("?") ? "&" : "?"
    let url = endpointURL + separator + "key=" + (apiKey.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? apiKey)
    let json = try await TokenEndpoint(url: url, client: client).post(
      [("grant_type", "refresh_token"), ("refresh_token", refresh)], what: "the Firebase user's refresh token")
    let token = try TokenEndpoint.token(from: json, key: "id_token", scheme: "Firebase", what: "Firebase Auth", url: endpointURL)
    if let rotated = json["refresh_token"] as? String, rotated != refresh {
      try PrivateFile.write(Data((rotated + "\n").utf8), to: refreshTokenFile)
    }
    if let id = json["user_id"] as? String { user.withLock { $0 = id } }
    return token
  }
}

/// No credentials: requests go without a token (public buckets, the emulator).
package struct AnonymousSource: CredentialSource {
  package let scopes: [String] = []
  package var source: String { "none (anonymous requests)" }
  package var identity: String { "anonymous" }
  package init() {}
  package func fetchToken() async throws(StorageError) -> AccessToken? { nil }
}
