import Foundation
import StorageCore
import Synchronization

/// How object commands reach the bucket: `--emulator HOST:PORT` or FIREBASE_STORAGE_EMULATOR_HOST
/// (Firebase v0), STORAGE_EMULATOR_HOST=http://HOST:PORT (GCS JSON, as Google's client libraries
/// read it), `--api firebase|gcs`, and credentials from the chain in `CredentialChain` (options
/// name files or commands, never a token itself: argv is visible to every user).
struct ClientOptions {
  var emulator: String?
  /// `--endpoint https://HOST:PORT`: another server speaking the API, over TLS or not.
  var endpoint: URL?
  var api: StorageAPI?
  var timeout: Int?
  var credentials = CredentialOptions()
  var caFile: String?
  var scopesGiven = false
  var environment: [String: String] = [:]
  /// Resolved once per process: every reference of a command shares one token cache.
  private let resolved = CredentialsBox()

  static let tokenOptions = """
      --token-file FILE      a token, read again when the file changes (or BUCKETFS_TOKEN_FILE)
      --key-file FILE        a service account key or user credentials file (or
                             GOOGLE_APPLICATION_CREDENTIALS); then gcloud's application default
                             credentials, then the metadata server (GCE_METADATA_HOST), then none
      --anonymous            send no credentials
      --token-command CMD    run CMD (split on spaces, no shell) for a token, kept --token-lifetime S
      --firebase-refresh-token-file FILE --firebase-api-key KEY
                             a Firebase user: ID tokens from the refresh token in FILE
      --scopes read-only|read-write|full-control|URL,...   the token's scopes
      --endpoint URL         another server speaking the API (https://HOST:PORT); proxies come
                             from https_proxy / no_proxy as libcurl reads them
      --ca-file FILE         trust the CA certificates in FILE (or SSL_CERT_FILE)
    """

  static func parse(_ args: inout Arguments, environment: [String: String]) throws(CommandError) -> ClientOptions {
    var options = ClientOptions()
    if let api = try args.value("--api") {
      guard let parsed = StorageAPI(rawValue: api) else { throw .usage("--api takes firebase or gcs, not \(api)") }
      options.api = parsed
    }
    options.emulator = try args.value("--emulator")
    if let endpoint = try args.value("--endpoint") {
      guard let url = URL(string: endpoint), url.scheme == "https" || url.scheme == "http", url.host != nil else {
        throw .usage("--endpoint takes https://HOST[:PORT], not \(endpoint)")
      }
      options.endpoint = url
    }
    if options.emulator == nil && options.endpoint == nil {
      if let firebase = environment["FIREBASE_STORAGE_EMULATOR_HOST"], !firebase.isEmpty {
        options.emulator = firebase
      } else if let gcs = environment["STORAGE_EMULATOR_HOST"], !gcs.isEmpty {
        options.emulator = gcs
        options.api = options.api ?? .gcs
      }
    }
    options.timeout = try args.int("--timeout", in: 1...604_800)
    options.environment = environment
    var c = CredentialOptions()
    c.tokenFile = try args.value("--token-file")
    c.keyFile = try args.value("--key-file")
    c.anonymous = args.flag("--anonymous")
    if let command = try args.value("--token-command") {
      c.tokenCommand = command.split(separator: " ").map(String.init)
    }
    if let seconds = try args.seconds("--token-lifetime") { c.tokenLifetime = seconds }
    c.firebaseRefreshTokenFile = try args.value("--firebase-refresh-token-file")
    c.firebaseAPIKey = try args.value("--firebase-api-key")
    if let scopes = try args.value("--scopes") {
      c.scopes = try Self.scopes(scopes)
      options.scopesGiven = true
    }
    c.usingEmulator = options.emulator != nil || options.endpoint?.host.map { $0.hasPrefix("127.") || $0 == "localhost" || $0 == "::1" } == true
    options.credentials = c
    options.caFile = try args.value("--ca-file") ?? environment["SSL_CERT_FILE"]
    return options
  }

  static func scopes(_ text: String) throws(CommandError) -> [String] {
    try text.split(separator: ",").map { item throws(CommandError) -> String in
      switch item {
      case "read-only", "read_only": return StorageScope.readOnly
      case "read-write", "read_write": return StorageScope.readWrite
      case "full-control", "full_control": return StorageScope.fullControl
      case "cloud-platform": return StorageScope.cloudPlatform
      case let url where url.hasPrefix("https://"): return String(url)
      default: throw .usage("--scopes takes read-only, read-write, full-control, cloud-platform or scope URLs")
      }
    }
  }

  /// The credentials of this command, resolved once; a broken source fails here with status 4
  /// (or 5 when its endpoint cannot be reached).
  func resolveCredentials(warn: (String) -> Void = Self.warn) async throws(CommandError) -> Credentials {
    if let existing = resolved.value { return existing }
    let home = environment["HOME"] ?? NSHomeDirectory()
    do {
      let source = try await CredentialChain.resolve(credentials, environment: environment, home: home, warn: warn)
      let made = Credentials(source: source)
      resolved.value = made
      return made
    } catch {
      throw .storage(error)
    }
  }

  static func warn(_ line: String) {
    FileHandle.standardError.write(Data("bucketfs: \(line)\n".utf8))
  }

  /// A configured `Storage` for `bucket`.
  func storage(bucket: String, api urlAPI: StorageAPI? = nil) async throws(CommandError) -> Storage {
    let storage = Storage(bucket: bucket)
    storage.api = api ?? urlAPI ?? .firebase
    // A command fails at once when nothing listens at the address (the SDK would retry for the
    // whole operation's retry time); broken connections and stalls are still retried.
    storage.unreachableRetryTime = 0
    if let emulator {
      guard let (host, port) = Storage.hostAndPort(emulator) else {
        throw .usage("the emulator address must be HOST:PORT, not \(emulator)")
      }
      storage.useEmulator(host: host, port: port)
    }
    if let endpoint {
      do {
        try storage.useEndpoint(endpoint)
      } catch {
        throw .usage(error.detail)
      }
    }
    storage.credentials = try await resolveCredentials()
    if let caFile { storage.caFile = caFile }
    if let timeout {
      storage.timeouts = TransportTimeouts(connect: .seconds(timeout), stall: .seconds(timeout))
      storage.maxOperationRetryTime = TimeInterval(timeout)
      storage.maxDownloadRetryTime = TimeInterval(timeout)
      storage.maxUploadRetryTime = TimeInterval(timeout)
    }
    return storage
  }

  /// A reference for a `gs://` or v0 `https://` URL.
  func reference(_ url: String) async throws(CommandError) -> StorageReference {
    let path: StoragePath
    do {
      path = try StoragePath.parse(url: url, exactNames: true)
    } catch {
      throw .usage("\(url): \(error.detail)")
    }
    // A Cloud Storage URL asks for the GCS API unless --api says otherwise.
    let gcsURL = url.hasPrefix("https://storage.googleapis.com/") || url.hasPrefix("https://storage.cloud.google.com/")
      || url.contains("/storage/v1/b/")
    let storage = try await self.storage(bucket: path.bucket, api: gcsURL ? .gcs : nil)
    return storage.reference().object(named: path.object)
  }
}

/// Holds the resolved credentials of a command.
final class CredentialsBox: Sendable {
  private let stored = Mutex<Credentials?>(nil)
  var value: Credentials? {
    get { stored.withLock { $0 } }
    set { stored.withLock { $0 = newValue } }
  }
}
