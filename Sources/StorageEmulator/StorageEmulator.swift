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
    public var faults = Faults()
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
  public var port: Int { server.port }
  public var host: String { server.host }
  /// `host:port`, as `FIREBASE_STORAGE_EMULATOR_HOST` takes it.
  public var address: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

  public init(_ configuration: Configuration) throws {
    let store: ObjectStore
    do {
      store = try ObjectStore(root: configuration.root)
    } catch {
      throw StartError.cannotUseRoot("\(configuration.root.path): \(error.localizedDescription)")
    }
    let uploads = UploadSessions()
    let access = AccessCheck(requiredToken: configuration.requiredToken, requiredAppCheckToken: configuration.requiredAppCheckToken)
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
    let firebase = FirebaseRoutes(store: store, uploads: uploads, access: access, publicBase: base)
    box.firebase = firebase
    box.gcs = GCSRoutes(store: store, uploads: uploads, access: access, firebase: firebase, publicBase: base)
    server.start()
  }

  /// How many requests reached the routes so far.
  public var requestsServed: Int { server.requestsServed.load(ordering: .relaxed) }

  /// Connections open right now (idle keep-alive ones included).
  public var openConnections: Int { server.connections.count }

  /// Changes the injected faults from now on.
  public func setFaults(_ faults: Faults) {
    server.faults.withLock { $0 = faults }
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

  func handle(_ request: inout ServerRequest) -> ServerResponse {
    let path = request.rawPath
    if path.hasPrefix("/storage/v1/") || path.hasPrefix("/upload/storage/v1/") || path.hasPrefix("/download/storage/v1/") {
      return gcs!.handle(&request)
    }
    return firebase!.handle(&request)
  }
}
