import Foundation
import Synchronization

/// A bucket and how to reach it: the entry point of the API, as `Storage` is in the Firebase SDK.
public final class Storage: Sendable {
  /// Settings that may change after creation; read once per request.
  struct Settings: Sendable {
    var api = StorageAPI.firebase
    /// nil: the API's production host.
    var host: String? = nil
    var port: Int? = nil
    var scheme = "https"
    var token: String? = nil
    var maxOperationRetryTime: TimeInterval = 120
    var maxDownloadRetryTime: TimeInterval = 600
    var maxUploadRetryTime: TimeInterval = 600
    var retryInitialDelay: TimeInterval = 1
    var timeouts = TransportTimeouts()
    var uploadChunkSize: Int64 = 32 << 20
    /// How long an unreachable host is retried; nil: as long as the operation's retry time.
    var unreachableRetryTime: TimeInterval? = nil
    var callbackQueue = DispatchQueue(label: "bucketfs.storage.callbacks")
    var tokenProvider: (@Sendable () async throws -> String?)? = nil
    var credentials: Credentials? = nil
    var caFile: String? = nil
    var appCheckTokenProvider: (@Sendable () async throws -> String?)? = nil
  }

  public let bucket: String
  let settings: Mutex<Settings>
  /// The transport its requests go through.
  package let client: HTTPClient
  /// Upload and download tasks whose transfer is running (or winding down after a pause or a
  /// cancel): once it is 0, none of this instance's tasks sends anything more.
  package let transfersRunning = Atomic<Int>(0)

  /// Where completion handlers and observers run. The SDK's default is the main queue; here it is
  /// a serial queue of the instance's own, because a Linux program seldom runs a main loop (one
  /// that does may set `.main`).
  public var callbackQueue: DispatchQueue {
    get { settings.withLock { $0.callbackQueue } }
    set { settings.withLock { $0.callbackQueue = newValue } }
  }

  /// Creates a storage instance for `gs://bucket`, `gs://bucket/` or a bare bucket name.
  package init(bucket: String, client: HTTPClient = .shared) {
    var name = bucket
    if name.hasPrefix("gs://") { name = String(name.dropFirst(5)) }
    while name.hasSuffix("/") { name.removeLast() }
    self.bucket = name
    self.settings = Mutex(Settings())
    self.client = client
  }

  /// The instance of the default bucket, as `Storage.storage()` in the SDK. The bucket comes
  /// from `FIREBASE_STORAGE_BUCKET`, else `STORAGE_BUCKET` in a `GoogleService-Info.plist`, else
  /// `project_info.storage_bucket` in a `google-services.json` in the working directory. Without
  /// one it stops the program with a message saying where it looked (the SDK traps too, when no
  /// Firebase app is configured). `FIREBASE_STORAGE_EMULATOR_HOST` points it at an emulator.
  public static func storage() -> Storage {
    switch DefaultBucket.find() {
    case .success(let bucket): return instance(bucket)
    case .failure(let why): fatalError(why.description)
    }
  }

  /// The instance of the bucket of `url` (`gs://bucket`), as `Storage.storage(url:)` in the SDK:
  /// a URL that is not a bucket's is a programming error there and here (the message names it).
  public static func storage(url: String) -> Storage {
    do {
      return try storage(forURL: url)
    } catch {
      fatalError("Storage.storage(url: \(url.debugDescription)): \(error.detail)")
    }
  }

  /// `storage(url:)` for callers who want an error instead of a trap.
  public static func storage(forURL url: String) throws(StorageError) -> Storage {
    let path = try StoragePath.parse(url: url.hasPrefix("gs://") || url.contains("://") ? url : "gs://\(url)")
    guard path.object.isEmpty else {
      throw StorageError(code: .invalidArgument, object: url, detail: "a storage URL must not name an object")
    }
    return instance(path.bucket)
  }

  /// One instance per bucket, as the SDK keeps one per app and bucket.
  private static let instances = Mutex<[String: Storage]>([:])
  private static func instance(_ bucket: String) -> Storage {
    instances.withLock { all in
      if let existing = all[bucket] { return existing }
      let made = Storage(bucket: bucket)
      // As firebase-tools' `emulators:exec` sets it for the SDKs that read it.
      if let emulator = ProcessInfo.processInfo.environment["FIREBASE_STORAGE_EMULATOR_HOST"],
        let (host, port) = hostAndPort(emulator)
      {
        made.useEmulator(withHost: host, port: port)
      }
      all[bucket] = made
      return made
    }
  }

  /// `HOST:PORT`, `http://HOST:PORT/` or `[::1]:PORT`, as the emulator variables write it.
  public static func hostAndPort(_ address: String) -> (String, Int)? {
    var text = address
    if let scheme = text.range(of: "://") { text = String(text[scheme.upperBound...]) }
    while text.hasSuffix("/") { text.removeLast() }
    guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]) else { return nil }
    var host = String(text[..<colon])
    if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
    return host.isEmpty ? nil : (host, port)
  }

  /// The REST API spoken: Firebase v0 (the default) or the GCS JSON API.
  public var api: StorageAPI {
    get { settings.withLock { $0.api } }
    set { settings.withLock { $0.api = newValue } }
  }

  /// Sends every request to a local emulator over plain HTTP (the SDK's name).
  public func useEmulator(withHost host: String, port: Int) {
    settings.withLock {
      $0.host = host
      $0.port = port
      $0.scheme = "http"
    }
  }

  /// Sends every request to `scheme://host:port` (an HTTPS proxy or a private endpoint that
  /// speaks the same API), e.g. `https://storage.internal:8443`.
  public func useEndpoint(_ url: URL) throws(StorageError) {
    guard let scheme = url.scheme, scheme == "http" || scheme == "https", let host = url.host else {
      throw StorageError(code: .invalidArgument, object: url.absoluteString, detail: "an endpoint is http(s)://HOST[:PORT]")
    }
    settings.withLock {
      $0.host = host
      $0.port = url.port
      $0.scheme = scheme
    }
  }

  /// The same as `useEmulator(withHost:port:)`.
  public func useEmulator(host: String, port: Int) {
    useEmulator(withHost: host, port: port)
  }

  /// Asked for a fresh token before each request, as the SDK asks Firebase Auth for the signed-in
  /// user's ID token; nil sends none. It wins over `setAuthToken`. The token is never logged.
  public var authTokenProvider: (@Sendable () async throws -> String?)? {
    get { settings.withLock { $0.tokenProvider } }
    set { settings.withLock { $0.tokenProvider = newValue } }
  }

  /// Asked before each request for an App Check token, sent as `X-Firebase-AppCheck`; never logged.
  public var appCheckTokenProvider: (@Sendable () async throws -> String?)? {
    get { settings.withLock { $0.appCheckTokenProvider } }
    set { settings.withLock { $0.appCheckTokenProvider = newValue } }
  }

  /// Where tokens come from for the `bucketfs` commands and the mount: refreshed ahead of
  /// expiry, once more after a 401. `authTokenProvider`, when set, wins.
  package var credentials: Credentials? {
    get { settings.withLock { $0.credentials } }
    set { settings.withLock { $0.credentials = newValue } }
  }

  /// CA certificates to trust instead of the system's (PEM bundle), for servers with a private CA.
  public var caFile: String? {
    get { settings.withLock { $0.caFile } }
    set { settings.withLock { $0.caFile = newValue } }
  }

  /// `request` with the credentials of this moment, and the token it carries (to report a 401).
  func authorize(_ request: HTTPRequest) async throws(StorageError) -> (HTTPRequest, AccessToken?) {
    let (provider, appCheck, api, credentials, caFile) = settings.withLock {
      ($0.tokenProvider, $0.appCheckTokenProvider, $0.api, $0.credentials, $0.caFile)
    }
    var out = request
    out.caFile = caFile
    guard provider != nil || appCheck != nil || credentials != nil else { return (out, nil) }
    var used: AccessToken? = nil
    let defaultScheme = api == .gcs ? "Bearer" : "Firebase"
    do {
      if let provider {
        out.headers.removeAll { $0.0.lowercased() == "authorization" }
        if let token = try await provider() {
          out.headers.append(("Authorization", defaultScheme + " " + token))
        }
      } else if let credentials {
        out.headers.removeAll { $0.0.lowercased() == "authorization" }
        if let token = try await credentials.token() {
          used = token
          out.headers.append(("Authorization", (token.scheme.isEmpty ? defaultScheme : token.scheme) + " " + token.value))
        }
      }
      if let appCheck, let token = try await appCheck() {
        out.headers.append(("X-Firebase-AppCheck", token))
      }
    } catch let error as StorageError {
      throw error
    } catch {
      // The provider's error may describe the credential; only its type is kept.
      throw StorageError(code: .unauthenticated, object: "gs://\(bucket)", detail: "the token provider failed (\(type(of: error)))")
    }
    return (out, used)
  }

  /// The server answered 401 to a request that carried `token`: true when fresh credentials
  /// are worth one more try (the token is dropped so the next request fetches another).
  func refreshAfterUnauthenticated(_ token: AccessToken?) -> Bool {
    guard let credentials = settings.withLock({ $0.credentials }), token != nil else { return false }
    credentials.rejected(token)
    return true
  }

  /// A static token sent as `Authorization: Firebase <token>` (Bearer for the GCS API); never
  /// logged or printed. `credentials` and `authTokenProvider` win over it.
  public func setAuthToken(_ token: String?) {
    settings.withLock { $0.token = token }
  }

  /// Reads the token from a file (first line, trimmed).
  public func setAuthToken(fromFile path: String) throws(StorageError) {
    guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
      throw StorageError(code: .unauthenticated, object: path, detail: "cannot read the token file")
    }
    let token = text.split(whereSeparator: \.isNewline).first.map(String.init)?
      .trimmingCharacters(in: .whitespaces) ?? ""
    guard !token.isEmpty else {
      throw StorageError(code: .unauthenticated, object: path, detail: "the token file is empty")
    }
    setAuthToken(token)
  }

  public var maxOperationRetryTime: TimeInterval {
    get { settings.withLock { $0.maxOperationRetryTime } }
    set { settings.withLock { $0.maxOperationRetryTime = newValue } }
  }
  public var maxDownloadRetryTime: TimeInterval {
    get { settings.withLock { $0.maxDownloadRetryTime } }
    set { settings.withLock { $0.maxDownloadRetryTime = newValue } }
  }
  public var maxUploadRetryTime: TimeInterval {
    get { settings.withLock { $0.maxUploadRetryTime } }
    set { settings.withLock { $0.maxUploadRetryTime = newValue } }
  }
  /// The first backoff wait; later waits double (tests shorten it).
  public var retryInitialDelay: TimeInterval {
    get { settings.withLock { $0.retryInitialDelay } }
    set { settings.withLock { $0.retryInitialDelay = newValue } }
  }
  /// Connect and stall timeouts of every request.
  package var timeouts: TransportTimeouts {
    get { settings.withLock { $0.timeouts } }
    set { settings.withLock { $0.timeouts = newValue } }
  }
  /// Bytes per request of a resumable upload: a multiple of 256 KiB, the protocol's granularity
  /// (rounded down, at least 256 KiB; a server that names a coarser granularity gets multiples
  /// of that).
  public var uploadChunkSize: Int64 {
    get { settings.withLock { $0.uploadChunkSize } }
    set { settings.withLock { $0.uploadChunkSize = Self.roundedChunk(newValue, granularity: Self.chunkGranularity) } }
  }

  static let chunkGranularity: Int64 = 256 * 1024

  /// `size` rounded down to a multiple of `granularity`, and at least one.
  static func roundedChunk(_ size: Int64, granularity: Int64) -> Int64 {
    let g = max(1, granularity)
    return max(g, size / g * g)
  }

  /// The SDK's name for `uploadChunkSize`.
  public var uploadChunkSizeBytes: Int64 {
    get { uploadChunkSize }
    set { uploadChunkSize = newValue }
  }

  /// How long a host that cannot be reached is retried. The SDK retries it like any network
  /// failure, within the operation's retry time (nil, the default); the command line sets a
  /// short time so that a wrong address fails at once.
  public var unreachableRetryTime: TimeInterval? {
    get { settings.withLock { $0.unreachableRetryTime } }
    set { settings.withLock { $0.unreachableRetryTime = newValue } }
  }

  public func reference() -> StorageReference {
    StorageReference(storage: self, path: StoragePath(bucket: bucket, object: ""))
  }

  public func reference(withPath path: String) -> StorageReference {
    reference().child(path)
  }

  /// A reference from a `gs://` or `https://` URL, as the SDK's `reference(forURL:)`: a malformed
  /// URL or one of another bucket is a programming error, and stops the program with a message
  /// naming the URL. `reference(for:)` throws instead.
  public func reference(forURL url: String) -> StorageReference {
    do {
      return try reference(for: url)
    } catch {
      fatalError("reference(forURL: \(url.debugDescription)): \(error.detail)")
    }
  }

  /// A reference from a `gs://` or `https://` URL; throws for a malformed URL or another bucket.
  public func reference(for url: URL) throws(StorageError) -> StorageReference {
    try reference(for: url.absoluteString)
  }

  /// A reference from a URL string; its bucket must be this instance's bucket.
  public func reference(for url: String) throws(StorageError) -> StorageReference {
    let path = try StoragePath.parse(url: url)
    guard bucket.isEmpty || path.bucket == bucket else {
      throw StorageError(
        code: .bucketMismatch, object: url,
        detail: "the URL's bucket \(path.bucket) is not this storage's bucket \(bucket)")
    }
    return StorageReference(storage: self, path: path)
  }

  /// The download URL of `name` with `token`, as `downloadURL()` builds it.
  public func downloadURL(bucket: String, name: String, token: String) -> String {
    wire.downloadURL(StoragePath(bucket: bucket, object: name), token: token)
  }

  var wire: any ObjectWire {
    settings.withLock { s in
      let portPart = s.port.map { ":\($0)" } ?? ""
      // An IPv6 literal goes in brackets in a URL ([::1]:9199).
      let host = s.host.map { $0.contains(":") && !$0.hasPrefix("[") ? "[\($0)]" : $0 }
      let firebaseBase = "\(s.scheme)://\(host ?? "firebasestorage.googleapis.com")\(portPart)/v0"
      switch s.api {
      case .firebase:
        return FirebaseWire(base: firebaseBase, token: s.token)
      case .gcs:
        return GCSWire(root: "\(s.scheme)://\(host ?? "storage.googleapis.com")\(portPart)", token: s.token, firebaseBase: firebaseBase)
      }
    }
  }
}
