// Objects live in a folder: per bucket a folder named by a hash of the bucket name, and per object
// a data file and a JSON side file named by a hash of the object name. No object name is ever used
// as a path, so `../x`, absolute names, NUL or 1,024-byte names cannot touch anything outside the
// root. An upload is written to a temporary file and renamed into place when complete, so a
// half-written upload never becomes visible; an overwrite gets a new data file, so a reader that
// has the old one open keeps reading the old generation.
import Foundation
import Synchronization

final class ObjectStore: @unchecked Sendable {
  /// Object names compared and hashed by their UTF-8 bytes, as GCS orders them.
  struct Key: Hashable, Comparable {
    let bytes: [UInt8]
    init(_ name: String) { bytes = Array(name.utf8) }
    static func < (a: Key, b: Key) -> Bool { a.bytes.lexicographicallyPrecedes(b.bytes) }
  }

  struct Bucket {
    var sorted: [Key] = []
    var records: [Key: ObjectRecord] = [:]

    func lowerBound(_ key: Key) -> Int {
      var lo = 0
      var hi = sorted.count
      while lo < hi {
        let mid = (lo + hi) / 2
        if sorted[mid] < key { lo = mid + 1 } else { hi = mid }
      }
      return lo
    }
  }

  let root: URL
  private let buckets = Mutex<[String: Bucket]>([:])
  private let lastGeneration = Mutex<Int64>(0)

  init(root: URL) throws {
    self.root = root
    try FileManager.default.createDirectory(at: tmpFolder, withIntermediateDirectories: true)
    try load()
  }

  var tmpFolder: URL { root.appendingPathComponent(".tmp", isDirectory: true) }

  func bucketFolder(_ bucket: String) -> URL {
    root.appendingPathComponent("b-" + String(ObjectHashes.sha256Hex(bucket).prefix(24)), isDirectory: true)
  }

  private func sideFile(_ bucket: String, _ name: String) -> URL {
    bucketFolder(bucket).appendingPathComponent(ObjectHashes.sha256Hex(name) + ".json")
  }

  private func load() throws {
    let fm = FileManager.default
    let decoder = JSONDecoder()
    var records: [ObjectRecord] = []
    for folder in (try? fm.contentsOfDirectory(atPath: root.path)) ?? [] where folder.hasPrefix("b-") {
      let dir = root.appendingPathComponent(folder)
      for file in (try? fm.contentsOfDirectory(atPath: dir.path)) ?? [] where file.hasSuffix(".json") {
        guard let data = fm.contents(atPath: dir.appendingPathComponent(file).path),
          let record = try? decoder.decode(ObjectRecord.self, from: data)
        else { continue }
        records.append(record)
      }
    }
    index(records)
    // Uploads that never finished are dropped: they were never visible.
    for file in (try? fm.contentsOfDirectory(atPath: tmpFolder.path)) ?? [] {
      try? fm.removeItem(at: tmpFolder.appendingPathComponent(file))
    }
  }

  /// Adds records whose side files exist to the index in one step (sorting once, not per record).
  func index(_ records: [ObjectRecord]) {
    lastGeneration.withLock { last in last = max(last, records.map(\.generation).max() ?? 0) }
    buckets.withLock { all in
      var touched = Set<String>()
      for record in records {
        all[record.bucket, default: Bucket()].records[Key(record.name)] = record
        touched.insert(record.bucket)
      }
      for name in touched {
        all[name]!.sorted = all[name]!.records.keys.sorted()
      }
    }
  }

  /// Strictly increasing generations, based on the clock in microseconds as GCS's are.
  func nextGeneration() -> Int64 {
    lastGeneration.withLock { last in
      let now = Int64(Date().timeIntervalSince1970 * 1_000_000)
      last = max(last + 1, now)
      return last
    }
  }

  func get(_ bucket: String, _ name: String) -> ObjectRecord? {
    buckets.withLock { $0[bucket]?.records[Key(name)] }
  }

  func dataPath(_ record: ObjectRecord) -> String {
    bucketFolder(record.bucket).appendingPathComponent(record.dataFile).path
  }

  /// A fresh temporary file for an upload's bytes.
  func temporaryFile() -> (path: String, fd: Int32) {
    let path = tmpFolder.appendingPathComponent(UUID().uuidString).path
    let fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    return (path, fd)
  }

  /// Makes a finished upload visible as the newest generation of `name`.
  func commit(
    bucket: String, name: String, temporaryPath: String, size: Int64, hashes: ObjectHashes,
    metadata: [String: Any]
  ) throws -> ObjectRecord {
    let folder = bucketFolder(bucket)
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    let generation = nextGeneration()
    let (md5, crc) = hashes.finish()
    let now = Int64(Date().timeIntervalSince1970 * 1000)
    let dataFile = ObjectHashes.sha256Hex(name) + "-\(generation).bin"
    var record = ObjectRecord(
      name: name, bucket: bucket, generation: generation, metageneration: 1, size: size,
      contentType: "application/octet-stream", md5Hash: md5, crc32c: crc, timeCreated: now, updated: now,
      metadata: [:], downloadTokens: [UUID().uuidString.lowercased()], dataFile: dataFile)
    record.apply(metadata)
    if rename(temporaryPath, folder.appendingPathComponent(dataFile).path) != 0 {
      throw CocoaError(.fileWriteUnknown)
    }
    let old = try save(record)
    if let old, old.dataFile != record.dataFile {
      unlink(folder.appendingPathComponent(old.dataFile).path)
    }
    return record
  }

  /// Writes the side file atomically and updates the index; returns the record it replaced.
  @discardableResult
  func save(_ record: ObjectRecord) throws -> ObjectRecord? {
    let encoder = JSONEncoder()
    let data = try encoder.encode(record)
    let side = sideFile(record.bucket, record.name)
    let tmp = tmpFolder.appendingPathComponent(UUID().uuidString + ".json")
    try data.write(to: tmp)
    return try buckets.withLock { all -> ObjectRecord? in
      // Renaming under the lock keeps the side file and the index in the same order of writes.
      if rename(tmp.path, side.path) != 0 { throw CocoaError(.fileWriteUnknown) }
      // Changed in place: a copy of the bucket (`var b = all[name]`) would copy every record on
      // every write, making uploads slower as the bucket grows.
      let key = Key(record.name)
      if all[record.bucket] == nil { all[record.bucket] = Bucket() }
      let old = all[record.bucket]!.records.updateValue(record, forKey: key)
      if old == nil {
        let at = all[record.bucket]!.lowerBound(key)
        all[record.bucket]!.sorted.insert(key, at: at)
      }
      return old
    }
  }

  func delete(_ bucket: String, _ name: String) -> Bool {
    let removed: ObjectRecord? = buckets.withLock { all in
      guard all[bucket] != nil, let record = all[bucket]!.records.removeValue(forKey: Key(name)) else { return nil }
      let at = all[bucket]!.lowerBound(Key(name))
      all[bucket]!.sorted.remove(at: at)
      unlink(sideFile(bucket, name).path)
      return record
    }
    guard let removed else { return false }
    unlink(dataPath(removed))
    return true
  }

  struct ListResult {
    var items: [ObjectRecord] = []
    var prefixes: [String] = []
    var nextPageToken: String?
  }

  /// Names under `prefix` from `pageToken` on; with a delimiter, deeper names fold into prefixes.
  /// Items and prefixes both count toward `maxResults`, so pages of folders really page.
  func list(bucket: String, prefix: String, delimiter: String?, pageToken: String?, maxResults: Int) -> ListResult {
    buckets.withLock { all in
      var result = ListResult()
      guard let b = all[bucket] else { return result }
      let prefixBytes = Array(prefix.utf8)
      let delimiterBytes = delimiter.map { Array($0.utf8) } ?? []
      var index = b.lowerBound(Key(pageToken ?? prefix))
      var count = 0
      while index < b.sorted.count {
        let key = b.sorted[index]
        guard key.bytes.starts(with: prefixBytes) else { break }
        if count == maxResults {
          result.nextPageToken = String(decoding: key.bytes, as: UTF8.self)
          break
        }
        let rest = key.bytes[prefixBytes.count...]
        if !delimiterBytes.isEmpty, let cut = Self.firstIndex(of: delimiterBytes, in: rest) {
          let folder = Array(key.bytes[..<(cut + delimiterBytes.count)])
          result.prefixes.append(String(decoding: folder, as: UTF8.self))
          count += 1
          // Skip every name inside this folder.
          index += 1
          while index < b.sorted.count && b.sorted[index].bytes.starts(with: folder) { index += 1 }
          continue
        }
        result.items.append(b.records[key]!)
        count += 1
        index += 1
      }
      return result
    }
  }

  private static func firstIndex(of needle: [UInt8], in haystack: ArraySlice<UInt8>) -> Int? {
    guard !needle.isEmpty, haystack.count >= needle.count else { return nil }
    var i = haystack.startIndex
    while i <= haystack.endIndex - needle.count {
      if haystack[i] == needle[0] && haystack[i..<(i + needle.count)].elementsEqual(needle) { return i }
      i += 1
    }
    return nil
  }
}
