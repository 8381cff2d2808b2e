import Foundation

/// POSTs a form to a token endpoint and reads the answer's token and lifetime. Failures become
/// errors a person can act on, without the request's secrets or the token in them.
struct TokenEndpoint {
  let url: String
  let client: HTTPClient
  static let timeouts = TransportTimeouts(connect: .seconds(5), stall: .seconds(10))

  static func formEncode(_ fields: [(String, String)]) -> Data {
    var allowed = CharacterSet.alphanumerics
    allowed.insert(charactersIn: "-._~")
    let text = fields.map { k, v in
      "\(k)=\(v.addingPercentEncoding(withAllowedCharacters: allowed) ?? v)"
    }.joined(separator: "&")
    return Data(text.utf8)
  }

  /// The JSON answer of a successful POST.
  func post(_ fields: [(String, String)], what: String) async throws(StorageError) -> [String: Any] {
    let request = HTTPRequest(
      method: "POST", url: url, headers: [("Content-Type", "application/x-www-form-urlencoded")],
      body: .data(Self.formEncode(fields)))
    return try await send(request, what: what)
  }

  func send(_ request: HTTPRequest, what: String) async throws(StorageError) -> [String: Any] {
    let response: HTTPResponse
    do {
      response = try await client.send(request, timeouts: Self.timeouts, maxBody: 1 << 20)
    } catch {
      if error.kind == .bodyTooLarge {
        throw StorageError(
          code: .unauthenticated, object: url,
          detail: "\(what): the token endpoint \(url) sent an answer larger than 1 MiB, which is no token")
      }
      let mapped = StorageError.from(transport: error, object: url)
      throw mapped.replacing(code: mapped.code, detail: "\(what): the token endpoint \(url) did not answer: \(error.message)")
    }
    let json = (try? JSONSerialization.jsonObject(with: response.body)) as? [String: Any]
    guard (200..<300).contains(response.status), let json else {
      // OAuth errors say `error` and `error_description`; Firebase's say `error.message`.
      let reason = (json?["error_description"] as? String) ?? (json?["error"] as? String)
        ?? ((json?["error"] as? [String: Any])?["message"] as? String) ?? "HTTP \(response.status)"
      let code: StorageErrorCode = (400..<500).contains(response.status) ? .unauthenticated : .serverUnreachable
      throw StorageError(
        code: code, object: url, httpStatus: response.status,
        detail: "\(what) was refused by the token endpoint (HTTP \(response.status)): \(reason)")
    }
    return json
  }

  /// `access_token` (or `id_token`) and `expires_in` of an answer.
  static func token(from json: [String: Any], key: String = "access_token", scheme: String, what: String, url: String)
    throws(StorageError) -> AccessToken
  {
    guard let value = json[key] as? String, !value.isEmpty else {
      throw StorageError(code: .unauthenticated, object: url, detail: "\(what): the token endpoint sent no \(key)")
    }
    // It becomes a header: a CR or LF in it would add headers of the endpoint's choosing.
    guard SecretFile.isToken(value) else {
      throw StorageError(
        code: .unauthenticated, object: url, detail: "\(what): the token endpoint sent a \(key) that is not a token")
    }
    let seconds: Double? = (json["expires_in"] as? NSNumber)?.doubleValue ?? (json["expires_in"] as? String).flatMap(Double.init)
    // Any lifetime from outside is kept between none and a day (a token past its stated
    // lifetime is refreshed; one refused earlier is refreshed after the 401).
    let lifetime = seconds.map { $0.isFinite ? min(max($0, 0), 86_400) : 0 }
    return AccessToken(value: value, expiry: lifetime.map { Date().addingTimeInterval($0) }, scheme: scheme)
  }
}
