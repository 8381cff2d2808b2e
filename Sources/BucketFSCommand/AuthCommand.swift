import Foundation
import StorageCore

/// `bucketfs auth`: which credentials the chain picks, whose they are, their scopes and how long
/// the current token lives — never the token. A broken source (a malformed key file, a revoked
/// refresh token, a token endpoint that refuses or does not answer) ends with one line and
/// status 4 or 5.
enum AuthCommand {
  static let usage = """
    usage: bucketfs auth [gs://BUCKET] [credential options]

    Prints the credentials the commands and the mount would use: the source (in the order
    --token-file, --key-file / GOOGLE_APPLICATION_CREDENTIALS, gcloud's application default
    credentials, the metadata server, none), the identity, the scopes and the time the current
    token has left. It fetches a token to prove the credentials work, and never prints it.
    """

  static func run(_ args: inout Arguments, _ client: ClientOptions) async throws(CommandError) -> Int32 {
    _ = try args.positionals()
    let credentials = try await client.resolveCredentials()
    let source = credentials.source
    let token: AccessToken?
    do {
      token = try await credentials.token()
    } catch {
      throw .storage(error)
    }
    var lines = [
      "source:   \(source.source)",
      "identity: \(source.identity)",
      "scopes:   \(source.scopes.isEmpty ? "(not applicable)" : source.scopes.joined(separator: " "))",
    ]
    if token == nil {
      lines.append("token:    none (anonymous requests)")
    } else if let expiry = token?.expiry {
      lines.append("token:    valid for \(max(0, Int(expiry.timeIntervalSinceNow))) s")
    } else {
      lines.append("token:    valid until the server refuses it (no expiry known)")
    }
    FileHandle.standardOutput.write(Data((lines.joined(separator: "\n") + "\n").utf8))
    return 0
  }
}
