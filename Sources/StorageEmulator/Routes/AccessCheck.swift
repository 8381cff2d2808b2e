import Foundation

/// Token rules: with a required token, a request must carry `Authorization: Firebase <token>` or
/// `Bearer <token>`, except media reads that present one of the object's download tokens.
struct AccessCheck: Sendable {
  let requiredToken: String?

  func check(_ request: ServerRequest, record: ObjectRecord?) -> ServerResponse? {
    guard let requiredToken else { return nil }
    if let header = request.header("authorization") {
      let parts = header.split(separator: " ", maxSplits: 1)
      if parts.count == 2, parts[0] == "Firebase" || parts[0] == "Bearer", parts[1] == requiredToken {
        return nil
      }
      return .error(403, "Permission denied.")
    }
    if request.query["alt"] == "media", let token = request.query["token"], let record,
      record.downloadTokens.contains(token)
    {
      return nil
    }
    return .error(401, "Unauthenticated.")
  }
}
