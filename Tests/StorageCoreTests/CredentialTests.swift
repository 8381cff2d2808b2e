import Foundation
import TestSupport
import StorageEmulator
import Synchronization
import Testing

@testable import StorageCore

/// A throwaway RSA (or other) key made at test time with the openssl command; none is committed.
func makeKey(_ folder: URL, algorithm: String = "RSA") async throws -> String {
  let path = folder.appendingPathComponent("key-\(UUID().uuidString.prefix(6)).pem").path
  return try await makePrivateKey(at: path, algorithm: algorithm)
}

/// Writes a service account key file whose token_uri is `tokenURI`.
func writeServiceAccount(_ folder: URL, key: String, tokenURI: String, email: String = "sa@test.iam.gserviceaccount.com") throws -> String {
  let path = folder.appendingPathComponent("sa-\(UUID().uuidString.prefix(6)).json").path
  let json: [String: Any] = [
    "type": "service_account", "project_id": "p", "private_key_id": "k1", "private_key": key, "client_email": email,
    "token_uri": tokenURI,
  ]
  try JSONSerialization.data(withJSONObject: json).write(to: URL(fileURLWithPath: path))
  chmod(path, 0o600)
  return path
}

/// An emulator with token endpoints, and a folder for key files.
final class AuthFixture: @unchecked Sendable {
  let root: URL
  let emulator: StorageEmulator
  let key: String
  var tokenURI: String { "http://127.0.0.1:\(emulator.port)/token" }

  init(lifetime: Duration = .seconds(3600), refreshTokens: Set<String> = [], metadata: Bool = false, faults: Faults = Faults())
    async throws
  {
    root = FileManager.default.temporaryDirectory.appendingPathComponent("bucketfs-auth-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
    key = try await sharedRSAKey()
    var config = StorageEmulator.Configuration(root: root.appendingPathComponent("server"))
    config.port = 0
    var tokens = TokenAuthority.Configuration()
    tokens.publicKeyPEM = key
    tokens.tokenLifetime = lifetime
    tokens.refreshTokens = refreshTokens
    tokens.metadataServer = metadata
    config.tokens = tokens
    config.requireOAuth = true
    config.faults = faults
    emulator = try StorageEmulator(config)
  }

  func storage(_ credentials: Credentials) -> Storage {
    let storage = Storage(bucket: "auth-bucket")
    storage.useEmulator(withHost: "127.0.0.1", port: emulator.port)
    storage.retryInitialDelay = 0.02
    storage.credentials = credentials
    return storage
  }

  deinit {
    emulator.stop()
    try? FileManager.default.removeItem(at: root)
  }
}

/// A source that counts its fetches and hands out the tokens it is given, in order.
final class ScriptedSource: CredentialSource, @unchecked Sendable {
  let tokens: [String]
  let lifetime: TimeInterval?
  let delay: Duration
  let clock: @Sendable () -> Date
  private let count = Mutex(0)
  var fetches: Int { count.withLock { $0 } }
  var source: String { "scripted" }
  var identity: String { "test" }
  var scopes: [String] { [] }

  init(_ tokens: [String], lifetime: TimeInterval? = 3600, delay: Duration = .zero, clock: @escaping @Sendable () -> Date = { Date() }) {
    self.tokens = tokens
    self.lifetime = lifetime
    self.delay = delay
    self.clock = clock
  }

  func fetchToken() async throws(StorageError) -> AccessToken? {
    let n = count.withLock { c -> Int in
      c += 1
      return c
    }
    if delay > .zero { try? await Task.sleep(for: delay) }
    return AccessToken(value: tokens[min(n, tokens.count) - 1], expiry: lifetime.map { clock().addingTimeInterval($0) }, scheme: "Bearer")
  }
}

@Suite struct CredentialTests {
  @Test func refreshTimesFollowTheLifetime() {
    let now = Date(timeIntervalSince1970: 1_000_000)
    let hour = AccessToken(value: "x", expiry: now.addingTimeInterval(3600))
    #expect(Credentials.refreshTime(hour, fetchedAt: now) == now.addingTimeInterval(3300))
    let short = AccessToken(value: "x", expiry: now.addingTimeInterval(3))
    #expect(Credentials.refreshTime(short, fetchedAt: now) == now.addingTimeInterval(1.5))
    #expect(Credentials.refreshTime(AccessToken(value: "x", expiry: nil), fetchedAt: now) == nil)
  }

  @Test func oneRefreshInFlightForManyWaiters() async throws {
    let source = ScriptedSource(["t1"], delay: .milliseconds(200))
    let credentials = Credentials(source: source)
    try await withThrowingTaskGroup(of: String?.self) { group in
      for _ in 0..<50 { group.addTask { try await credentials.token()?.value } }
      for try await value in group { #expect(value == "t1") }
    }
    #expect(source.fetches == 1)
    // Still fresh: no fetch.
    _ = try await credentials.token()
    #expect(source.fetches == 1)
  }

  @Test func shortLivedTokensAreRefreshedAtHalfTheirLife() async throws {
    var clock = Date()
    let now = Mutex(clock)
    let source = ScriptedSource(["a", "b", "c"], lifetime: 4, clock: { now.withLock { $0 } })
    let credentials = Credentials(source: source, clock: { now.withLock { $0 } })
    #expect(try await credentials.token()?.value == "a")
    clock.addTimeInterval(1.5)
    now.withLock { $0 = clock }
    #expect(try await credentials.token()?.value == "a")
    clock.addTimeInterval(1)
    now.withLock { $0 = clock }
    #expect(try await credentials.token()?.value == "b")
  }

  /// A 401 drops the token; the request is sent once more with a fresh one, and only once.
  @Test func unauthenticatedRefreshesOnceAndRetriesOnce() async throws {
    let fx = try await AuthFixture()
    let path = try writeServiceAccount(fx.root, key: fx.key, tokenURI: fx.tokenURI)
    let real = try CredentialChain.keyFileSource(path, scopes: [StorageScope.readWrite], client: .shared)
    let good = try #require(try await real.fetchToken()).value
    let stale = ScriptedSource(["revoked-token", good])
    let storage = fx.storage(Credentials(source: stale))
    _ = try await storage.reference(withPath: "a.txt").putDataAsync(Data("a".utf8))
    #expect(stale.fetches == 2)
    let hopeless = ScriptedSource(["bad-1", "bad-2", "bad-3"])
    let refused = fx.storage(Credentials(source: hopeless))
    let error = await #expect(throws: StorageError.self) { try await refused.reference(withPath: "a.txt").getMetadata() }
    #expect(error?.code == .unauthenticated)
    #expect(hopeless.fetches == 2)
  }

  /// Service account tokens that live 3 seconds keep a client working across many refreshes,
  /// with one grant per half-lifetime, not one per request.
  @Test func serviceAccountTokensAreRefreshedAheadOfExpiry() async throws {
    let fx = try await AuthFixture(lifetime: .seconds(3))
    let path = try writeServiceAccount(fx.root, key: fx.key, tokenURI: fx.tokenURI)
    let credentials = Credentials(source: try CredentialChain.keyFileSource(path, scopes: [StorageScope.readWrite], client: .shared))
    let storage = fx.storage(credentials)
    let ref = storage.reference(withPath: "loop.txt")
    _ = try await ref.putDataAsync(Data("loop".utf8))
    let started = Date()
    var requests = 0
    while Date().timeIntervalSince(started) < 7 {
      #expect(try await ref.data(maxSize: 100) == Data("loop".utf8))
      requests += 1
      try await Task.sleep(for: .milliseconds(20))
    }
    let grants = fx.emulator.tokenGrants
    #expect(grants >= 3 && grants <= 9, "\(grants) grants for \(requests) requests in 7 s of 3-second tokens")
  }

  @Test func theChainPicksSourcesInTheDocumentedOrder() async throws {
    let fx = try await AuthFixture(refreshTokens: ["user-refresh"], metadata: true)
    let home = fx.root.appendingPathComponent("home")
    let gcloud = home.appendingPathComponent(".config/gcloud")
    try FileManager.default.createDirectory(at: gcloud, withIntermediateDirectories: true)
    let tokenFile = fx.root.appendingPathComponent("token").path
    try "static-token\n".write(toFile: tokenFile, atomically: true, encoding: .utf8)
    chmod(tokenFile, 0o600)
    let keyFile = try writeServiceAccount(fx.root, key: fx.key, tokenURI: fx.tokenURI, email: "explicit@test")
    let envKey = try writeServiceAccount(fx.root, key: fx.key, tokenURI: fx.tokenURI, email: "from-env@test")
    let adc: [String: Any] = [
      "type": "authorized_user", "client_id": "c", "client_secret": "s", "refresh_token": "user-refresh", "token_uri": fx.tokenURI,
    ]
    try JSONSerialization.data(withJSONObject: adc).write(to: gcloud.appendingPathComponent("application_default_credentials.json"))
    let metadataHost = "127.0.0.1:\(fx.emulator.port)"
    func pick(_ options: CredentialOptions, _ env: [String: String], home: URL) async throws -> any CredentialSource {
      try await CredentialChain.resolve(options, environment: env, home: home.path)
    }
    var explicit = CredentialOptions()
    explicit.tokenFile = tokenFile
    explicit.keyFile = keyFile
    let everything = ["GOOGLE_APPLICATION_CREDENTIALS": envKey, "GCE_METADATA_HOST": metadataHost, "BUCKETFS_TOKEN_FILE": tokenFile]
    #expect(try await pick(explicit, everything, home: home) is TokenFileSource)
    explicit.tokenFile = nil
    #expect(try await pick(explicit, ["GOOGLE_APPLICATION_CREDENTIALS": envKey], home: home).identity == "explicit@test")
    #expect(try await pick(CredentialOptions(), everything, home: home) is TokenFileSource)
    #expect(try await pick(CredentialOptions(), ["GOOGLE_APPLICATION_CREDENTIALS": envKey], home: home).identity == "from-env@test")
    let userSource = try await pick(CredentialOptions(), ["GCE_METADATA_HOST": metadataHost], home: home)
    #expect(userSource is AuthorizedUserSource)
    #expect(try await userSource.fetchToken() != nil)
    let emptyHome = fx.root.appendingPathComponent("empty-home")
    let metadata = try await pick(CredentialOptions(), ["GCE_METADATA_HOST": metadataHost], home: emptyHome)
    #expect(metadata is MetadataServerSource)
    #expect(try await metadata.fetchToken() != nil)
    var emulated = CredentialOptions()
    emulated.usingEmulator = true
    #expect(try await pick(emulated, [:], home: emptyHome) is AnonymousSource)
    // Nothing answers as a metadata server on a closed port: anonymous, at once.
    #expect(try await pick(CredentialOptions(), ["GCE_METADATA_HOST": "127.0.0.1:1"], home: emptyHome) is AnonymousSource)
    var anonymous = CredentialOptions()
    anonymous.anonymous = true
    #expect(try await pick(anonymous, everything, home: home) is AnonymousSource)
    var command = CredentialOptions()
    command.tokenCommand = ["/bin/echo", "from-a-command"]
    command.tokenLifetime = 60
    let commandSource = try await pick(command, everything, home: home)
    #expect(try await commandSource.fetchToken()?.value == "from-a-command")
  }

  @Test func brokenCredentialsFailWithOneClearLine() async throws {
    let fx = try await AuthFixture(refreshTokens: ["valid"])
    let notJSON = fx.root.appendingPathComponent("not-json.json").path
    try "{ this is not json".write(toFile: notJSON, atomically: true, encoding: .utf8)
    #expect(throws: StorageError.self) { try CredentialChain.keyFileSource(notJSON, scopes: [], client: .shared) }
    let ecKey = try await makeKey(fx.root, algorithm: "EC")
    let ecFile = try writeServiceAccount(fx.root, key: ecKey, tokenURI: fx.tokenURI)
    let notRSA = #expect(throws: StorageError.self) { try CredentialChain.keyFileSource(ecFile, scopes: [], client: .shared) }
    #expect(notRSA?.detail.contains("not an RSA key") == true)
    // A revoked refresh token.
    let user: [String: Any] = ["type": "authorized_user", "client_id": "c", "client_secret": "s", "refresh_token": "revoked", "token_uri": fx.tokenURI]
    let userFile = fx.root.appendingPathComponent("user.json").path
    try JSONSerialization.data(withJSONObject: user).write(to: URL(fileURLWithPath: userFile))
    let revoked = try CredentialChain.keyFileSource(userFile, scopes: [], client: .shared)
    let refused = await #expect(throws: StorageError.self) { try await revoked.fetchToken() }
    #expect(refused?.code == .unauthenticated && refused?.detail.contains("expired or revoked") == true)
    // A clock far off: the endpoint rejects the JWT's iat/exp.
    let keyFile = try writeServiceAccount(fx.root, key: fx.key, tokenURI: fx.tokenURI)
    let account = try #require(try CredentialChain.keyFileSource(keyFile, scopes: [StorageScope.readOnly], client: .shared) as? ServiceAccountSource)
    let jwt = try account.assertion(now: Date().addingTimeInterval(-7200))
    let skewed = await #expect(throws: StorageError.self) {
      _ = try await TokenEndpoint(url: fx.tokenURI, client: .shared).post(
        [("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"), ("assertion", jwt)], what: "the service account")
    }
    #expect(skewed?.code == .unauthenticated && skewed?.detail.contains("iat and exp") == true)
    // The secret parts never appear in what a person sees.
    #expect(!(skewed?.description.contains(jwt) ?? true))
  }

  @Test func aTokenEndpointThatFailsOrHangsIsBounded() async throws {
    var faults = Faults()
    faults.errorStatus = 500
    faults.errorFraction = 1
    faults.pathFilter = "/token"
    let fx = try await AuthFixture(faults: faults)
    let keyFile = try writeServiceAccount(fx.root, key: fx.key, tokenURI: fx.tokenURI)
    let account = try CredentialChain.keyFileSource(keyFile, scopes: [], client: .shared)
    let failing = await #expect(throws: StorageError.self) { try await account.fetchToken() }
    #expect(failing?.code == .serverUnreachable && failing?.httpStatus == 500)
    var stall = Faults()
    stall.latency = .seconds(30)
    stall.pathFilter = "/token"
    fx.emulator.setFaults(stall)
    let started = Date()
    let hanging = await #expect(throws: StorageError.self) { try await account.fetchToken() }
    #expect(hanging?.code == .timedOut || hanging?.code == .serverUnreachable)
    #expect(Date().timeIntervalSince(started) < 25)
  }

  /// A Firebase user's refresh token is replaced by the one the endpoint returns, in a file
  /// only its owner reads.
  @Test func firebaseRefreshTokenRotates() async throws {
    let fx = try await AuthFixture(refreshTokens: ["first-refresh"])
    let file = fx.root.appendingPathComponent("refresh").path
    try "first-refresh\n".write(toFile: file, atomically: true, encoding: .utf8)
    let source = try FirebaseUserSource(
      refreshTokenFile: file, apiKey: "web-key", endpointURL: "http://127.0.0.1:\(fx.emulator.port)/v1/token", client: .shared)
    let token = try #require(try await source.fetchToken())
    #expect(token.scheme == "Firebase" && token.expiry != nil)
    let rotated = try String(contentsOfFile: file, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
    #expect(rotated != "first-refresh" && !rotated.isEmpty)
    var st = stat()
    #expect(stat(file, &st) == 0 && st.st_mode & 0o777 == 0o600)
    // The old one is spent; the new one works.
    _ = try await source.fetchToken()
    let storage = fx.storage(Credentials(source: source))
    _ = try await storage.reference(withPath: "user.txt").putDataAsync(Data("mine".utf8))
  }
}
