// A folder is a prefix, and may have a placeholder object (`dir/`, an empty object) as well:
// that object's custom metadata keeps the folder's mode, owner and times in the keys a file's
// object keeps them in (`PosixAttributes`), and its `updated` is the folder's ctime. What the mount
// knows of each folder's placeholder comes from the folder's parent listing where the listing
// carries it (the GCS API lists placeholders with their metadata), else from a GET of the
// placeholder at the folder's first lookup (v0), and from this mount's own changes of it.
import Foundation
import StorageCore

/// What a folder's placeholder object is, as far as the mount knows.
enum FolderObject: Sendable {
  /// No placeholder: the folder exists because objects are under it (or this mount made it and
  /// its placeholder is still queued); the mount's `dir_mode`, `uid` and `gid` answer.
  case absent
  case object(StorageMetadata)

  var metadata: StorageMetadata? {
    if case .object(let m) = self { return m }
    return nil
  }
}

/// The placeholders known, by folder path. What a listing says of its folders' placeholders
/// lives as long as the listing does (a walk that keeps its listings past `metadata_ttl` keeps
/// this too), and gives way when the parent is listed again.
final class FolderObjects: Sendable {
  /// By the folder path's bytes: NFC and NFD "café" are two folders.
  private let known = TTLCache<ObjectName, FolderObject>(ttl: .infinity, capacity: 200_000)

  /// What folder `path`'s placeholder is; nil when the mount does not know. The root has none
  /// (a bucket's root is no object; a mount below a prefix shows the defaults there too).
  func get(_ path: String) -> FolderObject? { path.isEmpty ? .absent : known.get(ObjectName(path)) }

  func set(_ path: String, _ object: FolderObject) { if !path.isEmpty { known.set(ObjectName(path), object) } }

  /// Asked of the server again at the folder's next lookup.
  func forget(_ path: String) { known.remove(ObjectName(path)) }

  func forget(under path: String) { known.removeAll { Namespace.isInside($0.string, path) } }

  /// The POSIX entries of folder `path`'s placeholder that go with the folder when it is
  /// renamed (its new placeholder is another object).
  func keptEntries(_ path: String) -> [String: String] { PosixAttributes.entries(of: get(path)?.metadata?.customMetadata ?? [:]) }
}
