import Foundation
import StorageCore

/// The attributes of files by object name (relative to the mount prefix): those fetched one by
/// one (a lookup's, a v0 listing's entries), kept compact for `metadata_ttl`, and those a current
/// listing of the object's folder holds, which are not kept twice. Keyed by the name's bytes:
/// NFC and NFD "café" are two objects with two entries.
final class AttributeCache: Sendable {
  private let fetched: TTLCache<ObjectName, ObjectSummary>
  private let listings: FolderListings

  init(ttl: Double, capacity: Int, listings: FolderListings) {
    fetched = TTLCache(ttl: ttl, capacity: capacity)
    self.listings = listings
  }

  func get(_ objectName: String) -> StorageMetadata? { summary(objectName)?.metadata }

  func summary(_ objectName: String) -> ObjectSummary? {
    if let s = fetched.get(ObjectName(objectName)) { return s }
    return listings.summary(ofObject: objectName)
  }

  /// The attributes last fetched for `objectName`, however old (for a server that stopped
  /// answering).
  func lastKnown(_ objectName: String) -> StorageMetadata? { fetched.lastKnown(ObjectName(objectName))?.metadata }

  func set(_ objectName: String, _ m: StorageMetadata) { fetched.set(ObjectName(objectName), ObjectSummary(m, path: objectName)) }

  func remove(_ objectName: String) { fetched.remove(ObjectName(objectName)) }

  @discardableResult
  func removeAll(where matches: (String) -> Bool) -> [String] { fetched.removeAll { matches($0.string) }.map(\.string) }

  /// Another spelling of `name` (its NFC or NFD form, other bytes) whose attributes are held:
  /// most tools take the two for one name, the bucket for two objects.
  func otherSpelling(of name: String) -> String? {
    [name.precomposedStringWithCanonicalMapping, name.decomposedStringWithCanonicalMapping].first { other in
      !ObjectName.sameBytes(other, name) && fetched.get(ObjectName(other)) != nil
    }
  }

  var count: Int { fetched.count }
}
