// Objects live in a folder: per bucket a folder named by a hash of the bucket name, and per object
// a data file and a JSON side file named by a hash of the object name. No object name is ever used
// as a path, so `../x`, absolute names, NUL or 1,024-byte names cannot touch anything outside the
// root. An upload is written to a temporary file and renamed into place when complete, so a
// half-written upload never becomes visible; an overwrite gets a new data file, so a reader that
// has the old one open keeps reading the old generation.
//
// In memory the server keeps only each bucket's names in order and their generations (about
// 100 bytes an object): a record is read from its side file when asked for. Which names exist
// is kept in each bucket folder's `IndexLog`, read at start instead of every side file.
import Foundation
import Synchronization

final class ObjectStore: @unchecked Sendable {
  /// Object names compared and hashed by their UTF-8 bytes, as GCS orders them.
  struct Key: Hashable, Comparable {
    let bytes: [UInt8]
    init(_ name: String) { bytes = Array(name.utf8) }
    init(bytes: [UInt8]) { self.bytes = bytes }
    var name: String { String(decoding: bytes, as: UTF8.self) }
    static func < (a: Key, b: Key) -> Bool { a.bytes.lexicographicallyPrecedes(b.bytes) }
  }

  struct Bucket {
    var sorted: [Key] = []
    var generations: [Key: Int64] = [:]
    /// The bucket folder's index log, open for appending (-1: none, as for a test's index).
    var log: Int32 = -1
    /// Records read or written lately, so that listing a folder again reads no side file.
    var cache: [Key: ObjectRecord] = [:]
    /// Saves and deletes so far: a record read from its side file is cached only if none came
    /// in meanwhile (it could be older than one saved while it was read).
    var changes: UInt64 = 0

    static let cachedRecords = 16_384

    mutating func remember(_ key: Key, _ record: ObjectRecord) {
      // Emptied when full: bounded without a recency list. (Removing the table's first entries
      // instead left probe runs that made every lookup slow.)
      if cache.count >= Self.cachedRecords { cache.removeAll(keepingCapacity: true) }
      cache[key] = record
    }

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
  /// Every bucket's index; a move (`ObjectStore+Move.swift`) changes two names under it at once.
  let buckets = Mutex<[String: Bucket]>([:])
  private let lastGeneration = Mutex<Int64>(0)

  /// The folders of HNS buckets: an object written there makes its parent folders.
  let folders: FolderStore?
  /// Told of every change of an object, with the index lock held (`Configuration.onChange`).
  let changed: (@Sendable () -> Void)?

  init(root: URL, folders: FolderStore? = nil, changed: (@Sendable () -> Void)? = nil) throws {
    self.root = root
    self.folders = folders
    self.changed = changed
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

  /// The side file's path, as a string: a list page names a thousand, and building a URL for
  /// each cost more than reading the file.
  func sideFile(_ bucket: String, _ name: String) -> String {
    root.path + "/b-" + String(ObjectHashes.sha256Hex(bucket).prefix(24)) + "/" + ObjectHashes.sha256Hex(name) + ".json"
  }

  private func load() throws {
    Self.tighten(root.path, folder: true)
    Self.tighten(tmpFolder.path, folder: true)
    var loaded: [String: Bucket] = [:]
    var highest: Int64 = 0
    for folder in (try? FileManager.default.contentsOfDirectory(atPath: root.path)) ?? [] where folder.hasPrefix("b-") {
      let dir = root.appendingPathComponent(folder)
      Self.tighten(dir.path, folder: true)
      let sideFiles = Self.countSideFiles(dir.path)
      var replayed = IndexLog.replay(folder: dir)
      if let r = replayed, r.generations.count != sideFiles || bucketFolder(r.bucket).path != dir.path { replayed = nil }
      let (bucket, generations): (String?, [Key: Int64])
      if let replayed {
        (bucket, generations) = (replayed.bucket, replayed.generations)
        // Mostly lines that later ones replaced: written again as the names it holds.
        if replayed.lines > 2 * generations.count + 10_000 {
          _ = IndexLog.write(folder: dir, bucket: replayed.bucket, generations: generations)
        }
      } else {
        (bucket, generations) = Self.indexSideFiles(dir)
        guard let bucket else { continue }
        guard IndexLog.write(folder: dir, bucket: bucket, generations: generations) else { throw CocoaError(.fileWriteUnknown) }
      }
      guard let bucket, !generations.isEmpty else { continue }
      var b = Bucket()
      b.generations = generations
      b.sorted = generations.keys.sorted()
      b.log = IndexLog.openForAppend(folder: dir)
      highest = max(highest, generations.values.max() ?? 0)
      loaded[bucket] = b
    }
    buckets.withLock { $0 = loaded }
    lastGeneration.withLock { $0 = max($0, highest) }
    // Uploads that never finished are dropped: they were never visible.
    for file in (try? FileManager.default.contentsOfDirectory(atPath: tmpFolder.path)) ?? [] {
      try? FileManager.default.removeItem(at: tmpFolder.appendingPathComponent(file))
    }
  }

  private static func countSideFiles(_ path: String) -> Int {
    guard let dir = opendir(path) else { return 0 }
    defer { closedir(dir) }
    var count = 0
    while let entry = readdir(dir) {
      // Read in place, up to its NUL: `entry.pointee.d_name` copies the field's full 256 bytes,
      // past the end of a short record at the end of the buffer (a SIGSEGV at start, once).
      let field = UnsafeRawPointer(entry) + MemoryLayout<dirent>.offset(of: \dirent.d_name)!
      let length = strlen(field.assumingMemoryBound(to: CChar.self))
      let name = UnsafeRawBufferPointer(start: field, count: length)
      let isSide = length >= 5 && name[(length - 5)...].elementsEqual(".json".utf8)
      if isSide { count += 1 }
    }
    return count
  }

  /// Every side file of a bucket folder read (a store from before the index log, or one whose
  /// log cannot be trusted); files made private on the way, as an older version left them open.
  private static func indexSideFiles(_ dir: URL) -> (String?, [Key: Int64]) {
    let decoder = JSONDecoder()
    var bucket: String?
    var generations: [Key: Int64] = [:]
    for file in (try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? [] {
      let path = dir.appendingPathComponent(file).path
      tighten(path, folder: false)
      guard file.hasSuffix(".json"), let data = FileManager.default.contents(atPath: path),
        let record = try? decoder.decode(ObjectRecord.self, from: data)
      else { continue }
      bucket = bucket ?? record.bucket
      generations[Key(record.name)] = record.generation
    }
    return (bucket, generations)
  }

  /// Adds names to the in-memory index in one step (sorting once), without side files or log:
  /// for tests of the index's own cost.
  func index(_ records: [ObjectRecord]) {
    lastGeneration.withLock { last in last = max(last, records.map(\.generation).max() ?? 0) }
    buckets.withLock { all in
      var touched = Set<String>()
      for record in records {
        all[record.bucket, default: Bucket()].generations[Key(record.name)] = record.generation
        touched.insert(record.bucket)
      }
      for name in touched {
        all[name]!.sorted = all[name]!.generations.keys.sorted()
      }
    }
  }

  /// The record in `name`'s side file (nil when it has none, or one that cannot be read).
  func readRecord(_ bucket: String, _ key: Key) -> ObjectRecord? {
    let fd = open(sideFile(bucket, key.name), O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var data = Data()
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
      let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
      if n < 0 && errno == EINTR { continue }
      guard n >= 0 else { return nil }
      if n == 0 { break }
      data.append(contentsOf: buffer[0..<n])
    }
    return try? JSONDecoder().decode(ObjectRecord.self, from: data)
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
    buckets.withLock { all in all.filter { !$0.value.generations.isEmpty }.map(\.key) }
  }

  func holdsObjects(_ bucket: String) -> Bool {
    buckets.withLock { $0[bucket].map { !$0.generations.isEmpty } ?? false }
  }

  func get(_ bucket: String, _ name: String) -> ObjectRecord? {
    records(bucket, [Key(name)]).first
  }

  /// The records of `keys` that exist, in order: from the cache, else from their side files.
  func records(_ bucket: String, _ keys: [Key]) -> [ObjectRecord] {
    var found: [Int: ObjectRecord] = [:]
    var missing: [Int] = []
    let mark = buckets.withLock { all -> UInt64 in
      guard let b = all[bucket] else { return 0 }
      for (i, key) in keys.enumerated() where b.generations[key] != nil {
        if let r = b.cache[key] { found[i] = r } else { missing.append(i) }
      }
      return b.changes
    }
    guard !missing.isEmpty else { return keys.indices.compactMap { found[$0] } }
    var read: [(Key, ObjectRecord)] = []
    for i in missing {
      guard let r = readRecord(bucket, keys[i]) else { continue }
      found[i] = r
      read.append((keys[i], r))
    }
    buckets.withLock { all in
      guard all[bucket]?.changes == mark else { return }
      for (key, r) in read { all[bucket]!.remember(key, r) }
    }
    return keys.indices.compactMap { found[$0] }
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
    /// The request's preconditions did not hold against the object as it was when the new
    /// generation was to be made (checked under the index lock, so that two writers with the
    /// same `ifGenerationMatch` never both succeed, as on GCS).
    case preconditionFailed
  }

  /// Makes a finished upload (or a copy's bytes, with the `copied` object's hashes and metadata)
  /// visible as the newest generation of `name`. Objects written through the GCS API have no
  /// download token until the Firebase API is asked for one (`downloadToken: false`), as on
  /// Google's servers, where the token is custom metadata that Firebase adds.
  func commit(
    bucket: String, name: String, temporaryPath: String, size: Int64, hashes: ObjectHashes? = nil, copied: ObjectRecord? = nil,
    componentCount: Int? = nil, downloadToken: Bool = true, metadata: [String: Any], unless refused: ((ObjectRecord?) -> Bool)? = nil
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
    let saved: Saved
    do {
      saved = try save(record, unless: refused)
    } catch {
      unlink(folder.appendingPathComponent(dataFile).path)
      throw error
    }
    switch saved {
    case .saved(let old):
      if let old, old.dataFile != record.dataFile { unlink(folder.appendingPathComponent(old.dataFile).path) }
      folders?.objectWritten(bucket, name)
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
  func save(_ record: ObjectRecord, unless refused: ((ObjectRecord?) -> Bool)? = nil) throws -> Saved {
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
    let key = Key(record.name)
    return try buckets.withLock { all -> Saved in
      let current = all[record.bucket]?.generations[key]
      let old = current == nil ? nil : (all[record.bucket]!.cache[key] ?? readRecord(record.bucket, key))
      // Before the check below: a conditional write that a newer generation overtook is
      // refused, not taken as overwritten at once (its writer would think it landed).
      if let refused, refused(old) {
        unlink(tmp.path)
        throw Refusal.preconditionFailed
      }
      if let current, current > record.generation {
        unlink(tmp.path)
        return .superseded
      }
      if all[record.bucket] == nil {
        let folder = bucketFolder(record.bucket)
        var fresh = Bucket()
        if IndexLog.replay(folder: folder) == nil { _ = IndexLog.write(folder: folder, bucket: record.bucket, generations: [:]) }
        fresh.log = IndexLog.openForAppend(folder: folder)
        all[record.bucket] = fresh
      }
      // Renaming under the lock keeps the side file, the log and the index in one order of writes.
      if rename(tmp.path, side) != 0 { throw CocoaError(.fileWriteUnknown) }
      // Changed in place: a copy of the bucket (`var b = all[name]`) would copy the whole index
      // on every write, making uploads slower as the bucket grows.
      all[record.bucket]!.generations[key] = record.generation
      all[record.bucket]!.changes += 1
      all[record.bucket]!.remember(key, record)
      if current == nil {
        let at = all[record.bucket]!.lowerBound(key)
        all[record.bucket]!.sorted.insert(key, at: at)
      }
      Self.appendLine(IndexLog.putLine(key, generation: record.generation), to: all[record.bucket]!.log)
      changed?()
      return .saved(old)
    }
  }

  /// Writes `record`'s side file in place atomically (a temporary file renamed over it); for a
  /// caller that holds the index lock.
  func writeSideFile(_ record: ObjectRecord) -> Bool {
    guard let data = try? JSONEncoder().encode(record) else { return false }
    let tmp = tmpFolder.appendingPathComponent(UUID().uuidString + ".json")
    let fd = open(tmp.path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
    guard fd >= 0 else { return false }
    let written = data.withUnsafeBytes { raw in Foundation.write(fd, raw.baseAddress!, raw.count) == raw.count }
    close(fd)
    guard written, rename(tmp.path, sideFile(record.bucket, record.name)) == 0 else {
      unlink(tmp.path)
      return false
    }
    return true
  }

  static func appendLine(_ line: [UInt8], to fd: Int32) {
    guard fd >= 0 else { return }
    _ = line.withUnsafeBytes { writeAll(fd, $0) }
  }

  func delete(_ bucket: String, _ name: String) -> Bool {
    let key = Key(name)
    let removed: ObjectRecord? = buckets.withLock { all in
      guard all[bucket] != nil, all[bucket]!.generations.removeValue(forKey: key) != nil else { return nil }
      all[bucket]!.changes += 1
      let record = all[bucket]!.cache.removeValue(forKey: key) ?? readRecord(bucket, key)
      let at = all[bucket]!.lowerBound(key)
      all[bucket]!.sorted.remove(at: at)
      Self.appendLine(IndexLog.deleteLine(key), to: all[bucket]!.log)
      unlink(sideFile(bucket, name))
      changed?()
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

  /// A page as the index gives it: the items' names, their records read after (outside the
  /// lock); a name deleted in between is left out, as if listed a moment later.
  private struct ListedKeys {
    var items: [Key] = []
    var prefixes: [String] = []
    var nextPageToken: String?
  }

  private func records(_ bucket: String, _ listed: ListedKeys) -> ListResult {
    ListResult(items: records(bucket, listed.items), prefixes: listed.prefixes, nextPageToken: listed.nextPageToken)
  }

  /// Names under `prefix` from `pageToken` on; with a delimiter, deeper names fold into prefixes.
  /// Items and prefixes both count toward `maxResults`, so pages of folders really page.
  /// `includeTrailingDelimiter` (GCS's parameter): an object named exactly as a prefix (a folder's
  /// placeholder, `a/`) is also an item, counted once with its prefix.
  func list(
    bucket: String, prefix: String, delimiter: String?, pageToken: String?, maxResults: Int, includeTrailingDelimiter: Bool = false
  ) -> ListResult {
    records(bucket, buckets.withLock { all in
      var result = ListedKeys()
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
          if includeTrailingDelimiter && key.bytes.count == folder.count { result.items.append(key) }
          // Skip every name inside this folder.
          index += 1
          while index < b.sorted.count && b.sorted[index].bytes.starts(with: folder) { index += 1 }
          continue
        }
        result.items.append(key)
        count += 1
        index += 1
      }
      return result
    })
  }

  /// A v0 list page as the official emulator pages it (firebase-tools `src/emulator/storage/
  /// files.ts`, `listItems`): only items count toward `maxResults`, and every page carries all
  /// the prefixes under `prefix`.
  func listFirebase(bucket: String, prefix: String, delimiter: String?, pageToken: String?, maxResults: Int) -> ListResult {
    records(bucket, buckets.withLock { all in
      var result = ListedKeys()
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
            result.items.append(key)
          }
        }
        index += 1
      }
      return result
    })
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
