import Foundation

/// Token rules. With a required token, a request must carry `Authorization: Firebase <token>` or
/// `Bearer <token>`. The one exception is Firebase's download token: it lets its holder GET that
/// one object's bytes or metadata, and nothing else — no other method (an
/// `X-HTTP-Method-Override` counts as the method), no other object, no upload or list route.
struct AccessCheck: Sendable {
  let requiredToken: String?
  /// With App Check enforced, every request must also carry `X-Firebase-AppCheck` with this token.
  var requiredAppCheckToken: String? = nil
  /// With OAuth required, tokens issued by the emulator's token endpoints (and unexpired) pass;
  /// expired and unknown ones get 401, as a real endpoint answers an expired token.
  var authority: TokenAuthority? = nil

  /// Nil when the request may go ahead, else the 401/403 answer. `method` is the effective method;
  /// `record` is the object the path names (nil for lists, uploads and other routes), and
  /// `tokensAllowed` is false on routes where download tokens mean nothing (the GCS API).
  func check(_ request: ServerRequest, method: String, record: ObjectRecord?, tokensAllowed: Bool) -> ServerResponse? {
    if let requiredAppCheckToken, request.header("x-firebase-appcheck") != requiredAppCheckToken {
      return .error(401, "App Check token missing or invalid.")
    }
    guard requiredToken != nil || authority != nil else { return nil }
    if let header = request.header("authorization") {
      let parts = header.split(separator: " ", maxSplits: 1)
      if parts.count == 2, parts[0] == "Firebase" || parts[0] == "Bearer" {
        let token = String(parts[1])
        if token == requiredToken { return nil }
        if let authority {
          return authority.isValid(token) ? nil : .error(401, "Invalid or expired credentials.")
        }
      }
      return .error(403, "Permission denied.")
    }
    guard let token = request.query["token"] else { return .error(401, "Unauthenticated.") }
    if tokensAllowed, method == "GET", let record, record.downloadTokens.contains(token) {
      return nil
    }
    return .error(403, "Permission denied: a download token only allows reading its own object.")
  }
}
