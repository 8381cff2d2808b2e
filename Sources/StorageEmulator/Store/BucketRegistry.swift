// Buckets made with `buckets insert`, kept in one small file beside the object folders. Any
// bucket a client names exists here (the demo and tests write to buckets nobody created), so
// this only decides what `buckets list` shows and what a second `insert` of a name is told.
import Foundation
import Synchronization

final class BucketRegistry: Sendable {
  struct Bucket: Codable {
    var name: String
    var project: String
    /// Milliseconds since the epoch.
    var timeCreated: Int64
    /// Made with `hierarchicalNamespace.enabled` (nil in a file from before: false).
    var hierarchical: Bool? = nil
  }

  private let file: URL
  private let created: Mutex<[String: Bucket]>
  /// Buckets `bucketfs serve --hierarchical-namespace` names: HNS whether or not made with insert.
  private let hierarchicalByFlag: Set<String>

  init(root: URL, hierarchical: Set<String> = []) {
    hierarchicalByFlag = hierarchical
    file = root.appendingPathComponent("buckets.json")
    let saved = (try? Data(contentsOf: file)).flatMap { try? JSONDecoder().decode([Bucket].self, from: $0) } ?? []
    created = Mutex(Dictionary(saved.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a }))
  }

  /// Why GCS would refuse `name` as a bucket name (nil when it takes it): 3–222 characters of
  /// lower-case letters, digits, `-`, `_` and `.`, starting and ending with a letter or digit
  /// (GCS's 63-character limit on each dot-separated part is not checked).
  static func nameProblem(_ name: String) -> String? {
    let allowed = Set("abcdefghijklmnopqrstuvwxyz0123456789-_.")
    guard (3...222).contains(name.count), name.allSatisfy({ allowed.contains($0) }),
      let first = name.first, let last = name.last, first.isLetter || first.isNumber, last.isLetter || last.isNumber
    else { return "Invalid bucket name: '\(name)'" }
    return nil
  }

  /// The bucket's record: the one `insert` made, else one for a bucket that exists because
  /// objects were written to it.
  func info(_ name: String) -> Bucket {
    var bucket = created.withLock { $0[name] } ?? Bucket(name: name, project: "", timeCreated: 0)
    if hierarchicalByFlag.contains(name) { bucket.hierarchical = true }
    return bucket
  }

  /// Whether the bucket has a hierarchical namespace (folders of its own).
  func isHierarchical(_ name: String) -> Bool {
    hierarchicalByFlag.contains(name) || created.withLock { $0[name]?.hierarchical ?? false }
  }

  func isCreated(_ name: String) -> Bool { created.withLock { $0[name] != nil } }

  /// False when the name was made before.
  func create(_ name: String, project: String, hierarchical: Bool = false) -> Bool {
    let bucket = Bucket(
      name: name, project: project, timeCreated: Int64(Date().timeIntervalSince1970 * 1000), hierarchical: hierarchical ? true : nil)
    let added: [Bucket]? = created.withLock { all in
      guard all[name] == nil else { return nil }
      all[name] = bucket
      return Array(all.values)
    }
    guard let added else { return false }
    save(added)
    return true
  }

  func remove(_ name: String) {
    let left: [Bucket]? = created.withLock { all in all.removeValue(forKey: name) == nil ? nil : Array(all.values) }
    if let left { save(left) }
  }

  func names() -> [String] { created.withLock { Array($0.keys) } }

  private func save(_ buckets: [Bucket]) {
    guard let data = try? JSONEncoder().encode(buckets.sorted { $0.name < $1.name }) else { return }
    try? data.write(to: file, options: .atomic)
  }
}
