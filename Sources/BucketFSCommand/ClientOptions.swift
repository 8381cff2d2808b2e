import Foundation
import StorageCore

/// How object commands reach the bucket: `--emulator HOST:PORT` or FIREBASE_STORAGE_EMULATOR_HOST,
/// and a token from `--token-file` or BUCKETFS_TOKEN_FILE (never from argv itself).
struct ClientOptions {
  var emulator: String?
  var tokenFile: String?
  var timeout: Int?

  static func parse(_ args: inout Arguments, environment: [String: String]) throws(CommandError) -> ClientOptions {
    var options = ClientOptions()
    options.emulator = try args.value("--emulator") ?? environment["FIREBASE_STORAGE_EMULATOR_HOST"]
    options.tokenFile = try args.value("--token-file") ?? environment["BUCKETFS_TOKEN_FILE"]
    options.timeout = try args.int("--timeout")
    return options
  }

  /// A configured `Storage` for `bucket`.
  func storage(bucket: String) throws(CommandError) -> Storage {
    let storage = Storage(bucket: bucket)
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
    let storage = try self.storage(bucket: path.bucket)
    return storage.reference().object(named: path.object)
  }
}
