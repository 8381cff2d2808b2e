// The folders of buckets with a hierarchical namespace (HNS), kept in one small file beside the
// object folders. On such a bucket a folder is a resource of its own: it exists empty, and every
// object's parent folders exist (writing `a/b/c` makes `a/` and `a/b/`, as GCS does). Flat
// buckets have none.
//
// Folder names are bytes, as object names are (`ObjectStore.Key`): NFC "café/" and NFD "café/"
// are two folders. Keyed by `String` (canonical equivalence) the second was taken for the first.
import Foundation
import Synchronization

final class FolderStore: Sendable {
  struct Folder: Codable {
    var bucket: String
    /// Ends with `/`.
    var name: String
    var metageneration: Int64
    /// Milliseconds since the epoch.
    var created: Int64
    var updated: Int64
  }

  private let file: URL
  typealias Key = ObjectStore.Key

  /// Bucket → folder name (its bytes) → folder.
  private let folders: Mutex<[String: [Key: Folder]]>
  let registry: BucketRegistry

  init(root: URL, registry: BucketRegistry) {
    file = root.appendingPathComponent("folders.json")
    self.registry = registry
    let saved = (try? Data(contentsOf: file)).flatMap { try? JSONDecoder().decode([Folder].self, from: $0) } ?? []
    var all: [String: [Key: Folder]] = [:]
    for folder in saved { all[folder.bucket, default: [:]][Key(folder.name)] = folder }
    folders = Mutex(all)
  }

  /// Why GCS would refuse `name` as a folder name: 1…1,024 bytes ending in `/`, no empty
  /// segment, no `.` or `..` segment, no line break.
  static func nameProblem(_ name: String) -> String? {
    guard name.utf8.last == UInt8(ascii: "/"), name.utf8.count <= 1024 else { return "a folder name ends with / and has at most 1024 bytes" }
    // At the byte "/": a slash before a combining mark is one `Character`, and still a slash.
    let segments = name.utf8.dropLast().split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
    if segments.contains(where: { $0.isEmpty || $0.elementsEqual(".".utf8) || $0.elementsEqual("..".utf8) }) {
      return "a folder name has no empty, . or .. part"
    }
    if name.utf8.contains(where: { $0 == 10 || $0 == 13 }) { return "a folder name may not contain carriage returns or line feeds" }
    return nil
  }

  /// `a/`, `a/b/` for `a/b/c` or `a/b/c/` (none with an empty part: `a//b` has only `a/`).
  static func parents(of name: String) -> [String] {
    var result: [String] = []
    var prefix: [UInt8] = []
    for part in name.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).dropLast() {
      if part.isEmpty { break }
      prefix += part + [UInt8(ascii: "/")]
      result.append(String(decoding: prefix, as: UTF8.self))
    }
    if let last = result.last, Key(last) == Key(name) { result.removeLast() }
    return result
  }

  func get(_ bucket: String, _ name: String) -> Folder? { folders.withLock { $0[bucket]?[Key(name)] } }

  enum InsertOutcome {
    case made(Folder)
    case exists
    /// A parent folder is missing and `recursive` was not asked for.
    case noParent(String)
  }

  /// Makes `name` (and with `recursive` its missing parents).
  func insert(_ bucket: String, _ name: String, recursive: Bool) -> InsertOutcome {
    let now = Int64(Date().timeIntervalSince1970 * 1000)
    let outcome: InsertOutcome = folders.withLock { all in
      if all[bucket]?[Key(name)] != nil { return .exists }
      let parents = Self.parents(of: name)
      if !recursive, let missing = parents.first(where: { all[bucket]?[Key($0)] == nil }) { return .noParent(missing) }
      for parent in parents where all[bucket]?[Key(parent)] == nil {
        all[bucket, default: [:]][Key(parent)] = Folder(bucket: bucket, name: parent, metageneration: 1, created: now, updated: now)
      }
      let folder = Folder(bucket: bucket, name: name, metageneration: 1, created: now, updated: now)
      all[bucket, default: [:]][Key(name)] = folder
      return .made(folder)
    }
    if case .made = outcome { save() }
    return outcome
  }

  /// Makes the parent folders of an object written to an HNS bucket.
  func objectWritten(_ bucket: String, _ name: String) {
    guard registry.isHierarchical(bucket) else { return }
    let parents = Self.parents(of: name)
    guard !parents.isEmpty else { return }
    let now = Int64(Date().timeIntervalSince1970 * 1000)
    let added = folders.withLock { all -> Bool in
      var added = false
      for parent in parents where all[bucket]?[Key(parent)] == nil {
        all[bucket, default: [:]][Key(parent)] = Folder(bucket: bucket, name: parent, metageneration: 1, created: now, updated: now)
        added = true
      }
      return added
    }
    if added { save() }
  }

  /// Whether any folder lies inside `name`.
  func hasSubfolders(_ bucket: String, _ name: String) -> Bool {
    let key = Key(name)
    return folders.withLock { all in all[bucket]?.keys.contains { $0 != key && $0.bytes.starts(with: key.bytes) } ?? false }
  }

  func delete(_ bucket: String, _ name: String) -> Bool {
    let removed = folders.withLock { $0[bucket]?.removeValue(forKey: Key(name)) != nil }
    if removed { save() }
    return removed
  }

  /// Folders whose names start with `prefix`, in byte order, from `start` (inclusive) to `end`
  /// (exclusive); with `oneLevel`, only `prefix` itself and the folders directly inside it.
  func list(_ bucket: String, prefix: String, oneLevel: Bool, start: String?, end: String?) -> [Folder] {
    let all = folders.withLock { $0[bucket].map { Array($0) } ?? [] }
    let prefixBytes = Array(prefix.utf8)
    return all.filter { key, _ in
      guard key.bytes.starts(with: prefixBytes) else { return false }
      if let start, key < Key(start) { return false }
      if let end, !(key < Key(end)) { return false }
      if oneLevel && key.bytes.dropFirst(prefixBytes.count).dropLast().contains(UInt8(ascii: "/")) { return false }
      return true
    }.sorted { $0.key < $1.key }.map(\.value)
  }

  /// `source` and every folder inside it renamed to lie under `target` (which must not exist),
  /// `target`'s missing parents made.
  func rename(_ bucket: String, _ source: String, to target: String) {
    let now = Int64(Date().timeIntervalSince1970 * 1000)
    folders.withLock { all in
      var inBucket = all[bucket] ?? [:]
      let sourceBytes = Array(source.utf8)
      for key in Array(inBucket.keys) where key.bytes.starts(with: sourceBytes) {
        var folder = inBucket.removeValue(forKey: key)!
        folder.name = target + String(decoding: key.bytes.dropFirst(sourceBytes.count), as: UTF8.self)
        folder.metageneration = 1
        folder.created = now
        folder.updated = now
        inBucket[Key(folder.name)] = folder
      }
      for parent in Self.parents(of: target) where inBucket[Key(parent)] == nil {
        inBucket[Key(parent)] = Folder(bucket: bucket, name: parent, metageneration: 1, created: now, updated: now)
      }
      all[bucket] = inBucket
    }
    save()
  }

  /// Forgets a deleted bucket's folders.
  func removeBucket(_ bucket: String) {
    if folders.withLock({ $0.removeValue(forKey: bucket) != nil }) { save() }
  }

  private func save() {
    // Under the lock, so two saves cannot write an older set last.
    folders.withLock { all in
      let list = all.values.flatMap { $0.values }.sorted { ($0.bucket, Key($0.name)) < ($1.bucket, Key($1.name)) }
      guard let data = try? JSONEncoder().encode(list) else { return }
      try? data.write(to: file, options: .atomic)
    }
  }
}
