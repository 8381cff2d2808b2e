import Foundation

/// A local bucket server backed by a folder: the Firebase Storage REST API and the GCS JSON API on
/// loopback, with
/// fault injection for tests. It shares no code with the client, so each checks the other.
public final class StorageEmulator: Sendable {
  public struct Configuration: Sendable {
    public var root: URL
    public var host: String = "127.0.0.1"
    /// 0 picks a free port.
    public var port: Int = 9199
    public var requiredToken: String? = nil
    /// Enforce App Check: requests must carry `X-Firebase-AppCheck: TOKEN`.
    public var requiredAppCheckToken: String? = nil
    /// Token endpoints (OAuth, secure-token, metadata server); with `requireOAuth`, data routes
    /// accept only tokens they issued (or `requiredToken`).
    public var tokens: TokenAuthority.Configuration? = nil
    public var requireOAuth = false
    /// What links in answers (media links, upload session URLs) start with, for a TLS terminator
    /// in front of us; nil: `http://` and the loopback host:port the client used.
    public var publicURL: String? = nil
    /// False: `objects.move` is answered 404, as by a server that predates it (fake-gcs-server),
    /// so that a client's fallback to copy-then-delete can be tried.
    public var movesObjects = true
    /// Buckets with a hierarchical namespace (folders of their own) whether or not a client made
    /// them with `hierarchicalNamespace.enabled`.
    public var hierarchicalBuckets: Set<String> = []
    /// Preconditions on the Firebase API ignored, as the official emulator ignores them.
    public var ignoresFirebasePreconditions = false
    public var faults = Faults()
    /// Called after each change of an object (a new generation, new metadata, a delete, a
    /// move), one at a time and in their order (with the store's lock held, so it must not call
    /// the emulator): a test can copy the server's folder here, to start another server later
    /// on what this one held at that moment.
    public var onChange: (@Sendable () -> Void)? = nil
    public var limits = ConnectionLimits()

    public init(root: URL) { self.root = root }
  }

  public enum StartError: Error, CustomStringConvertible {
    case cannotUseRoot(String)
    case cannotListen(String)
    public var description: String {
      switch self {
      case .cannotUseRoot(let s): return "cannot use the root folder: \(s)"
      case .cannotListen(let s): return s
      }
    }
  }

  let server: HTTPServer
  let authority: TokenAuthority?
  public var port: Int { server.port }
  public var host: String { server.host }
  /// `host:port`, as `FIREBASE_STORAGE_EMULATOR_HOST` takes it.
  public var address: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

  public init(_ configuration: Configuration) throws {
    let store: ObjectStore
    let registry = BucketRegistry(root: configuration.root, hierarchical: configuration.hierarchicalBuckets)
    let folders = FolderStore(root: configuration.root, registry: registry)
    do {
      store = try ObjectStore(root: configuration.root, folders: folders, changed: configuration.onChange)
    } catch {
      throw StartError.cannotUseRoot("\(configuration.root.path): \(error.localizedDescription)")
    }
    let uploads = UploadSessions()
    let authority = configuration.tokens.map(TokenAuthority.init)
    self.authority = authority
    let access = AccessCheck(
      requiredToken: configuration.requiredToken, requiredAppCheckToken: configuration.requiredAppCheckToken,
      authority: configuration.requireOAuth ? authority : nil)
    let box = RoutesBox()
    do {
      server = try HTTPServer(host: configuration.host, port: configuration.port, faults: configuration.faults, limits: configuration.limits) { request in
        box.handle(&request)
      }
    } catch {
      throw StartError.cannotListen("\(error)")
    }
    let hostPart = configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
    let base = "http://\(hostPart):\(server.port)"
    var firebase = FirebaseRoutes(store: store, uploads: uploads, access: access)
    firebase.ignoresPreconditions = configuration.ignoresFirebasePreconditions
    box.firebase = firebase
    box.gcs = GCSRoutes(store: store, uploads: uploads, access: access, firebase: firebase, registry: registry, folders: folders, operations: Operations(),
      movesObjects: configuration.movesObjects)
    box.authority = authority
    box.publicBase = base
    box.fixedBase = configuration.publicURL
    box.server = server
    server.start()
  }

  /// How many requests reached the routes so far.
  public var requestsServed: Int { server.requestsServed.load(ordering: .relaxed) }

  /// Tokens the token endpoints handed out so far.
  public var tokenGrants: Int { authority?.grants ?? 0 }

  /// Response body bytes sent so far (what a test counts to see that nothing is fetched twice).
  public var bodyBytesSent: Int { server.bodyBytesSent.load(ordering: .relaxed) }

  /// Request body bytes taken so far: an upload that resumes does not send its bytes twice.
  public var bodyBytesReceived: Int { server.bodyBytesReceived.load(ordering: .relaxed) }

  /// Connections accepted so far: a client that reuses its connections opens few.
  public var connectionsAccepted: Int { server.connectionsAccepted.load(ordering: .relaxed) }

  /// Connections open right now (idle keep-alive ones included).
  public var openConnections: Int { server.connections.count }

  /// Faults injected since the faults were last set (counted as `Faults.limit` counts them).
  public var faultsInjected: Int { server.faultsInjected }

  /// Changes the injected faults from now on.
  public func setFaults(_ faults: Faults) {
    server.setFaults(faults)
  }

  /// Stops listening and closes every connection.
  public func stop() {
    server.stop()
  }
}

/// Lets the server's handler reach routes built after the server knows its port, and picks the
/// API by path: `/v0/…` is Firebase, `/storage/v1`, `/upload/storage/v1`, `/download/storage/v1` GCS.
final class RoutesBox: @unchecked Sendable {
  var firebase: FirebaseRoutes?
  var gcs: GCSRoutes?
  var authority: TokenAuthority?
  var publicBase = ""
  var fixedBase: String?
  weak var server: HTTPServer?

  func handle(_ request: inout ServerRequest) -> ServerResponse {
    let path = request.rawPath
    request.publicBase = fixedBase ?? Self.base(host: request.header("host")) ?? publicBase
    if let authority, let answer = authority.handle(&request, publicBase: publicBase) { return answer }
    if request.method == "GET" && path == "/emulator/v1/stats" {
      // Counters for tests and benchmarks run in another process.
      return .json(200, [
        "requests": server?.requestsServed.load(ordering: .relaxed) ?? 0,
        "bodyBytesSent": server?.bodyBytesSent.load(ordering: .relaxed) ?? 0,
        "bodyBytesReceived": server?.bodyBytesReceived.load(ordering: .relaxed) ?? 0,
        "tokenGrants": authority?.grants ?? 0,
        "connectionsAccepted": server?.connectionsAccepted.load(ordering: .relaxed) ?? 0,
      ])
    }
    if path.hasPrefix("/storage/v1/") || path.hasPrefix("/upload/storage/v1/") || path.hasPrefix("/download/storage/v1/")
      || path.hasPrefix("/resumable/upload/storage/v1/")
    {
      return gcs!.handle(&request)
    }
    return firebase!.handle(&request)
  }

  /// The base a client used, from its Host header, when that names a loopback address with a
  /// port (a delaying proxy in front of us, say); anything else gets our own address.
  static func base(host: String?) -> String? {
    guard let host, host.utf8.count <= 64 else { return nil }
    let address = host.hasPrefix("localhost:") ? String(host.dropFirst("localhost".count)) : host
    guard address.allSatisfy({ "0123456789.:[]".contains($0) }),
      host.hasPrefix("127.") || host.hasPrefix("[::1]:") || host.hasPrefix("localhost:"),
      let colon = host.lastIndex(of: ":"), Int(host[host.index(after: colon)...]) != nil
    else { return nil }
    return "http://" + host
  }
}
