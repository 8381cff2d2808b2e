import Foundation
import StorageCore

/// How object commands reach the bucket: `--emulator HOST:PORT` or FIREBASE_STORAGE_EMULATOR_HOST
/// (Firebase v0), STORAGE_EMULATOR_HOST=http://HOST:PORT (GCS JSON, as Google's client libraries
/// read it), `--api firebase|gcs`, and a token from `--token-file` or BUCKETFS_TOKEN_FILE (never
/// from argv itself).
struct ClientOptions {
  var emulator: String?
  var api: StorageAPI?
  var tokenFile: String?
  var timeout: Int?

  static func parse(_ args: inout Arguments, environment: [String: String]) throws(CommandError) -> ClientOptions {
    var options = ClientOptions()
    if let api = try args.value("--api") {
      guard let parsed = StorageAPI(rawValue: api) else { throw .usage("--api takes firebase or gcs, not \(api)") }
      options.api = parsed
    }
    options.emulator = try args.value("--emulator")
    if options.emulator == nil {
      if let firebase = environment["FIREBASE_STORAGE_EMULATOR_HOST"], !firebase.isEmpty {
        options.emulator = firebase
      } else if let gcs = environment["STORAGE_EMULATOR_HOST"], !gcs.isEmpty {
        options.emulator = gcs
        options.api = options.api ?? .gcs
      }
    }
    options.tokenFile = try args.value("--token-file") ?? environment["BUCKETFS_TOKEN_FILE"]
    options.timeout = try args.int("--timeout")
    return options
  }

  /// A configured `Storage` for `bucket`.
  func storage(bucket: String, api urlAPI: StorageAPI? = nil) throws(CommandError) -> Storage {
    let storage = Storage(bucket: bucket)
    storage.api = api ?? urlAPI ?? .firebase
    // A command fails at once when nothing listens at the address (the SDK would retry for the
    // whole operation's retry time); broken connections and stalls are still retried.
    storage.unreachableRetryTime = 0
    if let emulator {
      guard let (host, port) = Self.split(emulator) else {
        throw .usage("the emulator address must be HOST:PORT, not \(emulator)")
      }
      storage.useEmulator(host: host, port: port)
    }
    if let tokenFile {
      do {
        try storage.setAuthToken(fromFile: tokenFile)
      } catch {
        throw .failed("\(tokenFile): \(error.detail)", status: ExitStatus.permission)
      }
    }
    if let timeout {
      storage.timeouts = TransportTimeouts(connect: .seconds(timeout), stall: .seconds(timeout))
      storage.maxOperationRetryTime = TimeInterval(timeout)
      storage.maxDownloadRetryTime = TimeInterval(timeout)
      storage.maxUploadRetryTime = TimeInterval(timeout)
    }
    return storage
  }

  static func split(_ address: String) -> (String, Int)? {
    var text = address
    if text.hasPrefix("http://") { text = String(text.dropFirst(7)) }
    while text.hasSuffix("/") { text.removeLast() }
    guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]) else { return nil }
    var host = String(text[..<colon])
    if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
    return host.isEmpty ? nil : (host, port)
  }

  /// A reference for a `gs://` or v0 `https://` URL.
  func reference(_ url: String) throws(CommandError) -> StorageReference {
    let path: StoragePath
    do {
      path = try StoragePath.parse(url: url)
    } catch {
      throw .usage("\(url): \(error.detail)")
    }
    // A Cloud Storage URL asks for the GCS API unless --api says otherwise.
    let gcsURL = url.hasPrefix("https://storage.googleapis.com/") || url.hasPrefix("https://storage.cloud.google.com/")
      || url.contains("/storage/v1/b/")
    let storage = try self.storage(bucket: path.bucket, api: gcsURL ? .gcs : nil)
    return storage.reference().object(named: path.object)
  }
}
