// Which credentials a command uses: an explicit option first, then Application Default
// Credentials in Google's order (GOOGLE_APPLICATION_CREDENTIALS, gcloud's file, the metadata
// server), then none. The emulator variables choose the endpoint, never the credentials, so the
// same chain runs against the emulator; only the metadata server's default host is not probed
// when an emulator is the endpoint (it exists on Google Cloud only, and the probe would leave
// the machine) — GCE_METADATA_HOST still points the chain at one.
import Foundation

package struct CredentialOptions: Sendable {
  package var tokenFile: String?
  package var keyFile: String?
  package var anonymous = false
  /// argv of a command whose standard output is a token (run without a shell).
  package var tokenCommand: [String]?
  /// How long a command's token is used.
  package var tokenLifetime: TimeInterval = 3000
  package var firebaseRefreshTokenFile: String?
  package var firebaseAPIKey: String?
  package var secureTokenURL = "https://securetoken.googleapis.com/v1/token"
  package var scopes: [String] = [StorageScope.readWrite]
  /// The endpoint is an emulator (see above).
  package var usingEmulator = false

  package init() {}
}

package enum CredentialChain {
  /// The source the options and the environment pick. `warn` hears warnings (key files other
  /// users can read).
  package static func resolve(
    _ options: CredentialOptions, environment: [String: String], home: String, client: HTTPClient = .shared,
    warn: (String) -> Void = { _ in }
  ) async throws(StorageError) -> any CredentialSource {
    if options.anonymous { return AnonymousSource() }
    if let command = options.tokenCommand { return try TokenCommandSource(command: command, lifetime: options.tokenLifetime) }
    let firebaseFile = options.firebaseRefreshTokenFile ?? environment["BUCKETFS_FIREBASE_REFRESH_TOKEN_FILE"]
    if let firebaseFile {
      guard let key = options.firebaseAPIKey ?? environment["BUCKETFS_FIREBASE_API_KEY"] ?? environment["FIREBASE_API_KEY"] else {
        throw StorageError(
          code: .invalidArgument, object: firebaseFile,
          detail: "a Firebase refresh token needs the project's Web API key: --firebase-api-key or FIREBASE_API_KEY")
      }
      checkPrivate(firebaseFile, warn)
      return try FirebaseUserSource(
        refreshTokenFile: firebaseFile, apiKey: key,
        endpointURL: environment["BUCKETFS_SECURE_TOKEN_URL"] ?? options.secureTokenURL, client: client)
    }
    if let tokenFile = options.tokenFile ?? environment["BUCKETFS_TOKEN_FILE"] {
      checkPrivate(tokenFile, warn)
      return try TokenFileSource(path: tokenFile)
    }
    if let keyFile = options.keyFile ?? environment["GOOGLE_APPLICATION_CREDENTIALS"] {
      checkPrivate(keyFile, warn)
      return try keyFileSource(keyFile, scopes: options.scopes, client: client)
    }
    let adc = (home as NSString).appendingPathComponent(".config/gcloud/application_default_credentials.json")
    if FileManager.default.fileExists(atPath: adc) {
      checkPrivate(adc, warn)
      return try keyFileSource(adc, scopes: options.scopes, client: client)
    }
    let metadataHost = environment["GCE_METADATA_HOST"] ?? (options.usingEmulator ? nil : "metadata.google.internal")
    if let metadataHost, await MetadataServerSource.detect(host: metadataHost, client: client) {
      return MetadataServerSource(host: metadataHost, scopes: options.scopes, client: client)
    }
    return AnonymousSource()
  }

  /// A key file's source, by its `type`.
  package static func keyFileSource(_ path: String, scopes: [String], client: HTTPClient = .shared) throws(StorageError)
    -> any CredentialSource
  {
    let data = try SecretFile.read(path, what: "key file")
    guard let json = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else {
      throw StorageError(code: .unauthenticated, object: path, detail: "the key file is not JSON")
    }
    switch json["type"] as? String {
    case "service_account": return try ServiceAccountSource(path: path, json: json, scopes: scopes, client: client)
    case "authorized_user": return try AuthorizedUserSource(path: path, json: json, scopes: scopes, client: client)
    case let other?:
      throw StorageError(
        code: .unauthenticated, object: path,
        detail: "credentials of type \(other) are not supported (service_account and authorized_user are)")
    case nil:
      throw StorageError(code: .unauthenticated, object: path, detail: "the key file has no type")
    }
  }

  private static func checkPrivate(_ path: String, _ warn: (String) -> Void) {
    if let warning = PrivateFile.exposure(path) { warn(warning) }
  }
}
