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
  }

  public let bucket: String
  let settings: Mutex<Settings>
  let client: HTTPClient
  /// Where observer handlers run.
  public let callbackQueue: DispatchQueue

  /// Creates a storage instance for `gs://bucket`, `gs://bucket/` or a bare bucket name.
  public init(bucket: String, client: HTTPClient = .shared) {
    var name = bucket
    if name.hasPrefix("gs://") { name = String(name.dropFirst(5)) }
    while name.hasSuffix("/") { name.removeLast() }
    self.bucket = name
    self.settings = Mutex(Settings())
    self.client = client
    self.callbackQueue = DispatchQueue(label: "bucketfs.storage.callbacks")
  }

  /// `Storage.storage(url:)`: the URL must name a bucket and no object.
  public static func storage(url: String) throws(StorageError) -> Storage {
    let path = try StoragePath.parse(url: url.hasPrefix("gs://") || url.contains("://") ? url : "gs://\(url)")
    guard path.object.isEmpty else {
      throw StorageError(code: .invalidArgument, object: url, detail: "a storage URL must not name an object")
    }
    return Storage(bucket: path.bucket)
  }

  /// The REST API spoken: Firebase v0 (the default) or the GCS JSON API.
  public var api: StorageAPI {
    get { settings.withLock { $0.api } }
    set { settings.withLock { $0.api = newValue } }
  }

  /// Sends every request to a local emulator over plain HTTP.
  public func useEmulator(host: String, port: Int) {
    settings.withLock {
      $0.host = host
      $0.port = port
      $0.scheme = "http"
    }
  }

  /// The token sent as `Authorization: Firebase <token>`; never logged or printed.
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
  public var timeouts: TransportTimeouts {
    get { settings.withLock { $0.timeouts } }
    set { settings.withLock { $0.timeouts = newValue } }
  }
  /// Bytes per request of a resumable upload.
  public var uploadChunkSize: Int64 {
    get { settings.withLock { $0.uploadChunkSize } }
    set { settings.withLock { $0.uploadChunkSize = max(256 * 1024, newValue) } }
  }

  public func reference() -> StorageReference {
    StorageReference(storage: self, path: StoragePath(bucket: bucket, object: ""))
  }

  public func reference(withPath path: String) -> StorageReference {
    reference().child(path)
  }

  /// A reference from a `gs://` or `https://` URL; its bucket must be this instance's bucket.
  public func reference(forURL url: String) throws(StorageError) -> StorageReference {
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
      let firebaseHost = s.host ?? "firebasestorage.googleapis.com"
      let firebaseBase = "\(s.scheme)://\(firebaseHost)\(portPart)/v0"
      switch s.api {
      case .firebase:
        return FirebaseWire(base: firebaseBase, token: s.token)
      case .gcs:
        return GCSWire(root: "\(s.scheme)://\(s.host ?? "storage.googleapis.com")\(portPart)", token: s.token, firebaseBase: firebaseBase)
      }
    }
  }
}
