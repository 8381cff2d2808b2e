import Foundation
import StorageCore

/// The attributes of files by object name (relative to the mount prefix): those fetched one by
/// one (a lookup's, a v0 listing's entries), kept compact for `metadata_ttl`, and those a current
/// listing of the object's folder holds, which are not kept twice.
final class AttributeCache: Sendable {
  private let fetched: TTLCache<String, ObjectSummary>
  private let listings: FolderListings

  init(ttl: Double, capacity: Int, listings: FolderListings) {
    fetched = TTLCache(ttl: ttl, capacity: capacity, sameKey: Namespace.sameBytes)
    self.listings = listings
  }

  func get(_ objectName: String) -> StorageMetadata? { summary(objectName)?.metadata }

  func summary(_ objectName: String) -> ObjectSummary? {
    if let s = fetched.get(objectName) { return s }
    return listings.summary(ofObject: objectName)
  }

  func set(_ objectName: String, _ m: StorageMetadata) { fetched.set(objectName, ObjectSummary(m, path: objectName)) }

  func remove(_ objectName: String) { fetched.remove(objectName) }

  @discardableResult
  func removeAll(where matches: (String) -> Bool) -> [String] { fetched.removeAll(where: matches) }

  /// The name held that the cache takes for `name` (the same, or another spelling of it).
  func heldKey(_ name: String) -> String? { fetched.heldKey(name) }

  var count: Int { fetched.count }
}
