import Foundation

/// A pointer to an object (or a folder-like prefix) in a bucket, as `StorageReference` in the SDK.
public struct StorageReference: Sendable, CustomStringConvertible, Hashable {
  public let storage: Storage
  let path: StoragePath

  init(storage: Storage, path: StoragePath) {
    self.storage = storage
    self.path = path
  }

  public var bucket: String { path.bucket }
  public var fullPath: String { path.object }
  public var name: String { path.object.slashSegments(omittingEmpty: true).last ?? "" }
  public var description: String { "gs://\(path.bucket)/\(path.object)" }

  public static func == (a: StorageReference, b: StorageReference) -> Bool {
    a.storage === b.storage && a.path == b.path
  }
  public func hash(into hasher: inout Hasher) { hasher.combine(path) }

  public func root() -> StorageReference {
    StorageReference(storage: storage, path: StoragePath(bucket: bucket, object: ""))
  }

  /// The enclosing folder; `nil` for the root.
  public func parent() -> StorageReference? {
    guard !fullPath.isEmpty else { return nil }
    var parts = fullPath.slashSegments(omittingEmpty: true)
    parts.removeLast()
    return StorageReference(storage: storage, path: StoragePath(bucket: bucket, object: parts.joined(separator: "/")))
  }

  /// A reference below this one; `path` is normalised (`a//b/` → `a/b`).
  public func child(_ childPath: String) -> StorageReference {
    let normalized = StoragePath.normalize(childPath)
    if normalized.isEmpty { return self }
    let joined = fullPath.isEmpty ? normalized : fullPath + "/" + normalized
    return StorageReference(storage: storage, path: StoragePath(bucket: bucket, object: joined))
  }

  /// A reference to an object name taken verbatim (a listed name may hold `//` or a trailing `/`).
  public func object(named rawName: String) -> StorageReference {
    StorageReference(storage: storage, path: StoragePath(bucket: bucket, object: rawName))
  }

  var runnerForOperations: RequestRunner {
    RequestRunner(storage: storage, budget: storage.maxOperationRetryTime, object: description)
  }

  func requireObject(_ operation: String) throws(StorageError) {
    if fullPath.isEmpty {
      throw StorageError(
        code: .invalidArgument, object: description, detail: "\(operation) needs an object, not the bucket root")
    }
  }
}
