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
    // Private, like staging: side files hold download tokens, which are enough to read an
    // object whatever --require-token says.
    try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    try FileManager.default.createDirectory(at: tmpFolder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    try load()
  }

  /// Folders 0700 and files 0600 (a store written by an older version was readable by all).
  private static func tighten(_ path: String, folder: Bool) {
    let fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | (folder ? O_DIRECTORY : 0))
    guard fd >= 0 else { return }
    var st = stat()
    let wanted: mode_t = folder ? 0o700 : 0o600
    if fstat(fd, &st) == 0, st.st_uid == geteuid(), st.st_mode & 0o777 != wanted { fchmod(fd, wanted) }
    close(fd)
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
    Self.tighten(root.path, folder: true)
    Self.tighten(tmpFolder.path, folder: true)
    for folder in (try? fm.contentsOfDirectory(atPath: root.path)) ?? [] where folder.hasPrefix("b-") {
      let dir = root.appendingPathComponent(folder)
      Self.tighten(dir.path, folder: true)
      for file in (try? fm.contentsOfDirectory(atPath: dir.path)) ?? [] {
        Self.tighten(dir.appendingPathComponent(file).path, folder: false)
      }
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

  /// The buckets that hold at least one object.
  func bucketsWithObjects() -> [String] {
    buckets.withLock { all in all.filter { !$0.value.records.isEmpty }.map(\.key) }
  }

  func holdsObjects(_ bucket: String) -> Bool {
    buckets.withLock { $0[bucket].map { !$0.records.isEmpty } ?? false }
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

  /// Why GCS would refuse `name` (nil when it takes it): names are 1…1,024 bytes of UTF-8, with
  /// no carriage return or line feed, and neither `.` nor `..`.
  static func nameProblem(_ name: String) -> String? {
    let count = name.utf8.count
    if count == 0 { return "an object name may not be empty" }
    if count > 1024 { return "an object name may be at most 1024 bytes of UTF-8, not \(count)" }
    if name.utf8.contains(where: { $0 == 10 || $0 == 13 }) { return "an object name may not contain carriage returns or line feeds" }
    if name == "." || name == ".." { return "an object name may not be . or .." }
    return nil
  }

  enum Refusal: Error {
    case invalidName(String)
  }

  /// Makes a finished upload (or a copy's bytes, with the `copied` object's hashes and metadata)
  /// visible as the newest generation of `name`. Objects written through the GCS API have no
  /// download token until the Firebase API is asked for one (`downloadToken: false`), as on
  /// Google's servers, where the token is custom metadata that Firebase adds.
  func commit(
    bucket: String, name: String, temporaryPath: String, size: Int64, hashes: ObjectHashes? = nil, copied: ObjectRecord? = nil,
    componentCount: Int? = nil, downloadToken: Bool = true, metadata: [String: Any]
  ) throws -> ObjectRecord {
    if let problem = Self.nameProblem(name) { throw Refusal.invalidName(problem) }
    let folder = bucketFolder(bucket)
    try FileManager.default.createDirectory(
      at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    let generation = nextGeneration()
    let (md5, crc) = hashes?.finish() ?? (copied?.md5Hash ?? "", copied?.crc32c ?? "")
    let now = Int64(Date().timeIntervalSince1970 * 1000)
    let dataFile = ObjectHashes.sha256Hex(name) + "-\(generation).bin"
    var record = copied ?? ObjectRecord(
      name: name, bucket: bucket, generation: generation, metageneration: 1, size: size,
      contentType: "application/octet-stream", md5Hash: md5, crc32c: crc, timeCreated: now, updated: now,
      metadata: [:], downloadTokens: downloadToken ? [UUID().uuidString.lowercased()] : [], dataFile: dataFile)
    // A copy keeps the source's content type, custom metadata and tokens, as GCS's does.
    record.name = name
    record.bucket = bucket
    record.generation = generation
    record.metageneration = 1
    record.timeCreated = now
    record.updated = now
    record.dataFile = dataFile
    if let componentCount {
      // A composite object: GCS keeps no MD5 of one.
      record.md5Hash = ""
      record.componentCount = componentCount
    }
    record.apply(metadata)
    if rename(temporaryPath, folder.appendingPathComponent(dataFile).path) != 0 {
      throw CocoaError(.fileWriteUnknown)
    }
    switch try save(record) {
    case .saved(let old):
      if let old, old.dataFile != record.dataFile { unlink(folder.appendingPathComponent(old.dataFile).path) }
    case .superseded:
      // A commit that got a higher generation finished first: it stays the object, and this
      // one is as if overwritten at once (GCS keeps the highest generation too).
      unlink(folder.appendingPathComponent(record.dataFile).path)
    }
    return record
  }

  enum Saved {
    /// The index holds the record; the one it replaced, if any.
    case saved(ObjectRecord?)
    /// The index holds a newer generation of the name, which stays.
    case superseded
  }

  /// Writes the side file atomically and updates the index, unless the index holds a newer
  /// generation of the name already: generations only grow, whatever order commits finish in.
  @discardableResult
  func save(_ record: ObjectRecord) throws -> Saved {
    let encoder = JSONEncoder()
    let data = try encoder.encode(record)
    let side = sideFile(record.bucket, record.name)
    let tmp = tmpFolder.appendingPathComponent(UUID().uuidString + ".json")
    // Private: the side file holds the download tokens.
    let fd = open(tmp.path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
    guard fd >= 0 else { throw CocoaError(.fileWriteUnknown) }
    let written = data.withUnsafeBytes { raw in Foundation.write(fd, raw.baseAddress!, raw.count) == raw.count }
    close(fd)
    guard written else {
      unlink(tmp.path)
      throw CocoaError(.fileWriteUnknown)
    }
    return try buckets.withLock { all -> Saved in
      if let current = all[record.bucket]?.records[Key(record.name)], current.generation > record.generation {
        unlink(tmp.path)
        return .superseded
      }
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
      return .saved(old)
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
  /// `includeTrailingDelimiter` (GCS's parameter): an object named exactly as a prefix (a folder's
  /// placeholder, `a/`) is also an item, counted once with its prefix.
  func list(
    bucket: String, prefix: String, delimiter: String?, pageToken: String?, maxResults: Int, includeTrailingDelimiter: Bool = false
  ) -> ListResult {
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
          // The placeholder sorts first of the names inside the folder.
          if includeTrailingDelimiter && key.bytes.count == folder.count { result.items.append(b.records[key]!) }
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

  /// A v0 list page as the official emulator pages it (firebase-tools `src/emulator/storage/
  /// files.ts`, `listItems`): only items count toward `maxResults`, and every page carries all
  /// the prefixes under `prefix`.
  func listFirebase(bucket: String, prefix: String, delimiter: String?, pageToken: String?, maxResults: Int) -> ListResult {
    buckets.withLock { all in
      var result = ListResult()
      guard let b = all[bucket] else { return result }
      let prefixBytes = Array(prefix.utf8)
      let delimiterBytes = delimiter.map { Array($0.utf8) } ?? []
      var index = b.lowerBound(Key(prefix))
      let first = Key(pageToken ?? prefix)
      while index < b.sorted.count {
        let key = b.sorted[index]
        guard key.bytes.starts(with: prefixBytes) else { break }
        let rest = key.bytes[prefixBytes.count...]
        if !delimiterBytes.isEmpty, let cut = Self.firstIndex(of: delimiterBytes, in: rest) {
          let folder = Array(key.bytes[..<(cut + delimiterBytes.count)])
          result.prefixes.append(String(decoding: folder, as: UTF8.self))
          index += 1
          while index < b.sorted.count && b.sorted[index].bytes.starts(with: folder) { index += 1 }
          continue
        }
        if !(key < first) {
          if result.items.count == maxResults {
            if result.nextPageToken == nil { result.nextPageToken = String(decoding: key.bytes, as: UTF8.self) }
          } else {
            result.items.append(b.records[key]!)
          }
        }
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
