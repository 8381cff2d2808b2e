import Foundation
import StorageCore

/// What the filesystem needs from a bucket. The real one goes through StorageCore; tests use an
/// in-memory one so that the filesystem logic runs without a kernel or a server.
public protocol ObjectClient: Sendable {
  var bucket: String { get }
  func metadata(of name: String) async throws(StorageError) -> StorageMetadata
  /// One page of names under `prefix` with delimiter `/`.
  func listPage(prefix: String, pageToken: String?, maxResults: Int?) async throws(StorageError) -> ListPage
  /// Bytes `range` of generation `generation`; another generation fails with `objectChanged`.
  func read(_ name: String, range: Range<Int64>, generation: Int64) async throws(StorageError) -> Data
  /// Starts a verified, durable download of the whole object into `file`.
  func download(_ name: String, generation: Int64, to file: URL) -> any ObjectDownload
  /// The Firebase download URL for a token.
  func downloadURL(name: String, token: String) -> String
}

/// A whole-object download in progress.
public protocol ObjectDownload: Sendable {
  /// Bytes written so far to `partialPath`, in order from byte 0.
  var bytesWritten: Int64 { get }
  var partialPath: String { get }
  func cancel()
  func wait() async throws(StorageError)
}

/// The real client: StorageCore against a server.
public struct StorageObjectClient: ObjectClient {
  public let storage: Storage

  public init(storage: Storage) { self.storage = storage }

  public var bucket: String { storage.bucket }

  private func ref(_ name: String) -> StorageReference { storage.reference().object(named: name) }

  public func metadata(of name: String) async throws(StorageError) -> StorageMetadata {
    try await ref(name).getMetadata()
  }

  public func listPage(prefix: String, pageToken: String?, maxResults: Int?) async throws(StorageError) -> ListPage {
    // A reference's list adds "/" itself; list the folder reference of the prefix.
    let folder = prefix.hasSuffix("/") ? String(prefix.dropLast()) : prefix
    return try await ref(folder).listPage(delimiter: "/", pageToken: pageToken, maxResults: maxResults)
  }

  public func read(_ name: String, range: Range<Int64>, generation: Int64) async throws(StorageError) -> Data {
    try await ref(name).data(range: range, generation: generation)
  }

  public func download(_ name: String, generation: Int64, to file: URL) -> any ObjectDownload {
    TaskDownload(task: ref(name).write(toFile: file, generation: generation, durable: true))
  }

  public func downloadURL(name: String, token: String) -> String {
    storage.downloadURL(bucket: bucket, name: name, token: token)
  }
}

struct TaskDownload: ObjectDownload {
  let task: StorageDownloadTask
  var bytesWritten: Int64 { task.bytesTransferred }
  var partialPath: String { task.partialFilePath }
  func cancel() { task.cancel() }
  func wait() async throws(StorageError) { try await task.result() }
}
