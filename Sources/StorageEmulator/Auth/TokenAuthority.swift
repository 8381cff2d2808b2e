// The emulator's stand-in for Google's token endpoints, so that every credential flow a client
// has can be tested offline: the OAuth token endpoint (`POST /token`: the JWT bearer grant of a
// service account, checked against its public key, and the refresh-token grant of a user), the
// Firebase secure-token endpoint (`POST /v1/token?key=`), and the metadata server's token route.
// Every token it issues lives `tokenLifetime`; data routes refuse expired and unknown tokens
// with 401. It shares no code with the client beyond the C crypto shim.
internal import CCrypto
import Foundation
import Synchronization

public final class TokenAuthority: Sendable {
  public struct Configuration: Sendable {
    /// PEM of the service accounts' key (a key file's `private_key`, or a public key): JWTs
    /// signed by it are accepted.
    public var publicKeyPEM: String?
    /// How long an issued token is valid.
    public var tokenLifetime: Duration = .seconds(3600)
    /// Refresh tokens accepted by the refresh-token grant and the secure-token endpoint.
    public var refreshTokens: Set<String> = []
    /// The Firebase Web API key the secure-token endpoint wants (nil: any).
    public var firebaseAPIKey: String?
    /// Answer as the metadata server of a Google Cloud VM.
    public var metadataServer = false

    public init() {}
  }

  struct State {
    var issued: [String: ContinuousClock.Instant] = [:]
    var refreshTokens: Set<String>
    var grants = 0
  }

  let configuration: Configuration
  private let state: Mutex<State>

  public init(_ configuration: Configuration) {
    self.configuration = configuration
    state = Mutex(State(refreshTokens: configuration.refreshTokens))
  }

  /// Tokens handed out so far, by every grant.
  public var grants: Int { state.withLock { $0.grants } }

  /// True when `token` was issued here and has not expired.
  func isValid(_ token: String) -> Bool {
    state.withLock { s in
      guard let expiry = s.issued[token] else { return false }
      if expiry < .now {
        s.issued.removeValue(forKey: token)
        return false
      }
      return true
    }
  }

  private func issue() -> (String, Int) {
    let token = "emu-" + UUID().uuidString.lowercased() + UUID().uuidString.lowercased().prefix(8)
    state.withLock { s in
      s.grants += 1
      s.issued[token] = .now + configuration.tokenLifetime
      // Forget long-expired tokens so the table stays small.
      if s.issued.count > 10_000 { s.issued = s.issued.filter { $0.value > .now } }
    }
    return (token, max(1, Int(configuration.tokenLifetime.components.seconds)))
  }

  private static func oauthError(_ status: Int, _ error: String, _ description: String) -> ServerResponse {
    .json(status, ["error": error, "error_description": description])
  }

  /// Routes of the token endpoints; nil for any other path.
  func handle(_ request: inout ServerRequest, publicBase: String) -> ServerResponse? {
    switch (request.method, request.rawPath) {
    case ("POST", "/token"):
      return oauthToken(&request, audience: publicBase + "/token")
    case ("POST", "/v1/token"):
      return secureToken(&request)
    case ("GET", "/computeMetadata/v1/instance/service-accounts/default/token") where configuration.metadataServer:
      guard request.header("metadata-flavor") == "Google" else {
        return .error(403, "Missing Metadata-Flavor:Google header.")
      }
      let (token, lifetime) = issue()
      var response = ServerResponse.json(200, ["access_token": token, "expires_in": lifetime, "token_type": "Bearer"])
      response.headers.append(("Metadata-Flavor", "Google"))
      return response
    case ("GET", "/computeMetadata/v1/instance/service-accounts/default/email") where configuration.metadataServer:
      return ServerResponse(
        status: 200, headers: [("Metadata-Flavor", "Google"), ("Content-Type", "text/plain")],
        body: .data(Data("vm-default@emulator.iam.gserviceaccount.com".utf8)))
    case ("GET", "/"), ("GET", "/computeMetadata/v1/"):
      guard configuration.metadataServer else { return nil }
      return ServerResponse(status: 200, headers: [("Metadata-Flavor", "Google")], body: .data(Data("ok".utf8)))
    default:
      return nil
    }
  }

  private func form(_ request: inout ServerRequest) -> [String: String]? {
    guard let body = try? request.body.readAll(limit: 64 << 10) else { return nil }
    var out: [String: String] = [:]
    for pair in String(decoding: body, as: UTF8.self).split(separator: "&") {
      let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
      let key = String(kv[0]).replacingOccurrences(of: "+", with: " ").exactPercentDecoded ?? ""
      let value = kv.count > 1 ? (String(kv[1]).replacingOccurrences(of: "+", with: " ").exactPercentDecoded ?? "") : ""
      out[key] = value
    }
    return out
  }

  private func oauthToken(_ request: inout ServerRequest, audience: String) -> ServerResponse {
    guard let form = form(&request) else { return Self.oauthError(400, "invalid_request", "unreadable body") }
    switch form["grant_type"] {
    case "urn:ietf:params:oauth:grant-type:jwt-bearer":
      guard let assertion = form["assertion"] else { return Self.oauthError(400, "invalid_request", "no assertion") }
      if let problem = checkJWT(assertion, audience: audience) { return Self.oauthError(400, "invalid_grant", problem) }
    case "refresh_token":
      guard let refresh = form["refresh_token"], state.withLock({ $0.refreshTokens.contains(refresh) }) else {
        return Self.oauthError(400, "invalid_grant", "Token has been expired or revoked.")
      }
    default:
      return Self.oauthError(400, "unsupported_grant_type", "Invalid grant_type: \(form["grant_type"] ?? "")")
    }
    let (token, lifetime) = issue()
    return .json(200, ["access_token": token, "expires_in": lifetime, "token_type": "Bearer"])
  }

  /// Firebase's secure-token refresh: a new ID token and a new refresh token that replaces the old.
  private func secureToken(_ request: inout ServerRequest) -> ServerResponse {
    if let wanted = configuration.firebaseAPIKey, request.query["key"] != wanted {
      return .json(400, ["error": ["code": 400, "message": "API key not valid. Please pass a valid API key."]])
    }
    guard let form = form(&request), form["grant_type"] == "refresh_token", let refresh = form["refresh_token"] else {
      return .json(400, ["error": ["code": 400, "message": "INVALID_GRANT_TYPE"]])
    }
    let rotated = "rt-" + UUID().uuidString.lowercased()
    let known = state.withLock { s -> Bool in
      guard s.refreshTokens.remove(refresh) != nil else { return false }
      s.refreshTokens.insert(rotated)
      return true
    }
    guard known else { return .json(400, ["error": ["code": 400, "message": "INVALID_REFRESH_TOKEN"]]) }
    let (token, lifetime) = issue()
    return .json(200, [
      "id_token": token, "access_token": token, "refresh_token": rotated, "expires_in": String(lifetime),
      "token_type": "Bearer", "user_id": "emulated-user", "project_id": "emulator",
    ])
  }

  /// Nil when `jwt` is a valid RS256 assertion for `audience`; else why not.
  func checkJWT(_ jwt: String, audience: String) -> String? {
    let parts = jwt.split(separator: ".", omittingEmptySubsequences: false)
    guard parts.count == 3, let headerData = Self.base64URL(parts[0]), let claimsData = Self.base64URL(parts[1]),
      let signature = Self.base64URL(parts[2]),
      let header = (try? JSONSerialization.jsonObject(with: headerData)) as? [String: Any],
      let claims = (try? JSONSerialization.jsonObject(with: claimsData)) as? [String: Any]
    else { return "Invalid JWT: not three base64url JSON parts" }
    guard header["alg"] as? String == "RS256" else { return "Invalid JWT: alg must be RS256" }
    guard let pem = configuration.publicKeyPEM else { return "no service account key is configured" }
    let signed = Data("\(parts[0]).\(parts[1])".utf8)
    let verified = pem.withCString { key in
      signed.withUnsafeBytes { data in
        signature.withUnsafeBytes { sig in
          CCrypto_rs256_verify(
            key, strlen(key), data.baseAddress, data.count, sig.bindMemory(to: UInt8.self).baseAddress, sig.count)
        }
      }
    }
    guard verified == 0 else { return "Invalid JWT Signature." }
    // Google's endpoint takes its own URL as the audience (google-auth always sends it); a
    // client that sends the token_uri it posts to is right too.
    let aud = claims["aud"] as? String
    guard aud == audience || aud == "https://oauth2.googleapis.com/token" else {
      return "Invalid JWT: aud must be \(audience)"
    }
    guard claims["iss"] is String, claims["scope"] is String else { return "Invalid JWT: iss and scope are required" }
    let now = Date().timeIntervalSince1970
    guard let iat = (claims["iat"] as? NSNumber)?.doubleValue, let exp = (claims["exp"] as? NSNumber)?.doubleValue,
      iat <= now + 60, exp > now, exp - iat <= 3600
    else {
      return "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim."
    }
    return nil
  }

  static func base64URL(_ text: Substring) -> Data? {
    var s = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    while s.count % 4 != 0 { s += "=" }
    return Data(base64Encoded: s)
  }
}
