// Which local copies the staging folder holds, how they are named on disk, which are in use,
// and which go when the folder is over its size limit. The index lives in the copies' JSON side
// files, so it survives a crash: a data file under its final name is complete (the rename into
// place is the commit), and its side file (written first) says which object and generation it
// holds. Files are named by a hash of bucket, object and generation, so no object name can
// reach outside the folder. Every change of a copy's state goes through the methods here, under
// one lock.
import Foundation
import StorageCore
import Synchronization

final class StagingIndex: Sendable {
  private struct State {
    var copies: [String: LocalCopy] = [:] {  // key → copy
      didSet { version &+= 1 }
    }
    /// Moves with every change of `copies`: views made of them (the offline listings) are kept
    /// until it does.
    var version: UInt64 = 0
    var lastUse: [String: UInt64] = [:]
    var openCount: [String: Int] = [:]
    /// Descriptors of complete copies being read, shared by their readers.
    var openFiles: [String: FileDescriptor] = [:]
    /// Bytes of complete copies.
    var bytes: Int64 = 0
    var tick: UInt64 = 0
    /// Copies a pin keeps (PinKeeper): never evicted, and the room they take is not offered to
    /// the others. Their sizes, counted once each.
    var pinned: Set<String> = []
    var pinnedBytes: Int64 = 0

    mutating func touch(_ key: String) {
      tick += 1
      lastUse[key] = tick
    }
  }

  let folder: URL
  private let bucket: String
  private let state = Mutex(State())
  static let checksumsKey = "bucketfs.blockCRC32C"
  static let identityKey = "bucketfs.verifiedFile"

  init(folder: URL, bucket: String) {
    self.folder = folder
    self.bucket = bucket
  }

  // MARK: names on disk

  static func hash(_ text: String) -> String {
    let d = Digest(.sha256)
    d.update(Data(text.utf8))
    return Digest.hex(d.finalize())
  }

  func key(_ name: String, _ generation: Int64) -> String {
    String(Self.hash(bucket + "\u{0}" + name).prefix(40)) + "-\(generation)"
  }

  func paths(_ key: String) -> (data: URL, side: URL) {
    (folder.appendingPathComponent(key + ".data"), folder.appendingPathComponent(key + ".json"))
  }

  /// A file of its own for a copy being made: two makers of one object never share one (the
  /// second would truncate or unlink the first's), and a crash leaves a `.part` the next load
  /// removes.
  func newPartialPath(_ key: String) -> String {
    folder.appendingPathComponent("." + key + "." + String(UInt64.random(in: 0...UInt64.max), radix: 36) + ".part").path
  }

  /// The side file: the object's metadata, its name and (once complete) the block checksums
  /// and what the data file was when verified.
  func writeSideFile(_ copy: LocalCopy, checksums: BlockChecksums?, identity: CopyIdentity? = nil) -> Bool {
    var dict = copy.metadata.dictionaryRepresentation()
    dict["name"] = copy.name
    if let checksums { dict[Self.checksumsKey] = checksums.encoded }
    if let identity { dict[Self.identityKey] = identity.encoded }
    guard let json = try? JSONSerialization.data(withJSONObject: dict) else { return false }
    // Not synced: the data file's rename is the commit; a side file lost or left from before the
    // checksums makes the copy be dropped or verified again.
    return (try? PrivateFile.write(json, to: paths(key(copy.name, copy.metadata.generation)).side.path, sync: false)) != nil
  }

  /// Rebuilds the index from the folder; drops leftovers of copies that never completed and
  /// data that no side file names (its side file was lost in a crash, or never written).
  func load() {
    let fm = FileManager.default
    let files = (try? fm.contentsOfDirectory(atPath: folder.path)) ?? []
    var copies: [String: LocalCopy] = [:]
    var lastUse: [String: UInt64] = [:]
    for file in files {
      let full = folder.appendingPathComponent(file).path
      if file.hasSuffix(".part") {
        unlink(full)
        continue
      }
      guard file.hasSuffix(".json") else { continue }
      let key = String(file.dropLast(5))
      let data = paths(key).data
      guard let json = fm.contents(atPath: full),
        let dict = try? ExactText.jsonObject(with: json) as? [String: Any],
        let name = dict["name"] as? String, fm.fileExists(atPath: data.path)
      else {
        unlink(full)
        continue
      }
      let checksums = (dict[Self.checksumsKey] as? String).flatMap(BlockChecksums.init(encoded:))
      let identity = (dict[Self.identityKey] as? String).flatMap(CopyIdentity.init(encoded:))
      copies[key] = .complete(
        name: name, metadata: StorageMetadata(dictionary: dict), dataPath: data.path, checksums: checksums, identity: identity)
      // By stat(2): FileManager's attributes look the owner up by name, a read of /etc/passwd
      // and /etc/group for each copy of a staging folder that may hold 100,000.
      var st = stat()
      lastUse[key] = stat(data.path, &st) == 0 ? UInt64(max(0, st.st_mtim.tv_sec)) : UInt64(Date().timeIntervalSince1970)
    }
    for file in files where !file.hasSuffix(".json") {
      let key = file.hasSuffix(".data") ? String(file.dropLast(5)) : nil
      if key.map({ copies[$0] == nil }) ?? true { unlink(folder.appendingPathComponent(file).path) }
    }
    state.withLock { s in
      s.copies = copies
      s.lastUse = lastUse
      s.bytes = copies.values.reduce(0) { $0 + $1.metadata.size }
      s.tick = (lastUse.values.max() ?? 0) + 1
    }
  }

  // MARK: transitions

  /// absent → filling. `make` (which creates the copy's file: disk I/O and maybe a log line)
  /// runs outside the lock, on a file of its own (`newPartialPath`); when another open made one
  /// meanwhile, that one is the copy and `make`'s is removed. The copy being filled when there
  /// is one, and whether `make`'s is it; nil when the object is complete or `make` gives none.
  func startFilling(_ key: String, make: () -> LocalCopy?) -> (copy: PartialCopy, made: Bool)? {
    if let existing = state.withLock({ $0.copies[key] }) { return existing.filling.map { ($0, false) } }
    guard let copy = make(), let partial = copy.filling else { return nil }
    let winner = state.withLock { s -> LocalCopy in
      if let other = s.copies[key] { return other }
      s.copies[key] = copy
      return copy
    }
    if winner.filling === partial { return (partial, true) }
    unlink(partial.path)
    return winner.filling.map { ($0, false) }
  }

  /// filling → complete. False when the copy is no longer the one being filled.
  func completed(_ key: String, _ filled: PartialCopy, checksums: BlockChecksums, identity: CopyIdentity?) -> LocalCopy? {
    state.withLock { s in
      guard var copy = s.copies[key], copy.filling === filled, copy.completed(checksums: checksums, identity: identity) else { return nil }
      s.copies[key] = copy
      s.bytes += copy.metadata.size
      s.touch(key)
      return copy
    }
  }

  /// absent → complete (a small object staged from bytes already read). False when the key is
  /// not absent.
  func added(_ key: String, _ copy: LocalCopy) -> Bool {
    state.withLock { s in
      guard s.copies[key] == nil, copy.isComplete else { return false }
      s.copies[key] = copy
      s.bytes += copy.metadata.size
      s.touch(key)
      return true
    }
  }

  /// filling → absent (given up). False when `filled` is not the copy being filled.
  @discardableResult
  func abandoned(_ key: String, _ filled: PartialCopy) -> Bool {
    state.withLock { s in
      guard s.copies[key]?.filling === filled else { return false }
      s.copies.removeValue(forKey: key)
      return true
    }
  }

  /// complete → absent (damaged, or evicted). The copy, when it was complete.
  func removed(_ key: String) -> LocalCopy? {
    state.withLock { s in Self.remove(key, &s) }
  }

  private static func remove(_ key: String, _ s: inout State) -> LocalCopy? {
    guard let copy = s.copies[key], copy.isComplete else { return nil }
    s.copies.removeValue(forKey: key)
    s.lastUse.removeValue(forKey: key)
    s.openFiles.removeValue(forKey: key)
    s.bytes -= copy.metadata.size
    return copy
  }

  /// A complete copy verified whole again gets its checksums and its file's identity.
  func checked(_ key: String, _ checksums: BlockChecksums, identity: CopyIdentity?) {
    state.withLock { s in s.copies[key]?.checked(checksums, identity: identity) }
  }

  // MARK: use

  func isAbsent(_ key: String) -> Bool { state.withLock { $0.copies[key] == nil } }

  /// The complete copy of `key`, marked as just used.
  func use(_ key: String) -> LocalCopy? {
    state.withLock { s in
      guard let copy = s.copies[key], copy.isComplete else { return nil }
      s.touch(key)
      return copy
    }
  }

  func copy(_ key: String) -> LocalCopy? { state.withLock { $0.copies[key] } }

  /// The shared descriptor of complete copy `key`, opened by `open` when there is none yet.
  func openFile(_ key: String, open: () -> FileDescriptor?) -> FileDescriptor? {
    if let file = state.withLock({ $0.openFiles[key] }) { return file }
    guard let file = open() else { return nil }
    return state.withLock { s in
      if let other = s.openFiles[key] { return other }
      guard s.copies[key]?.isComplete == true else { return file }
      s.openFiles[key] = file
      return file
    }
  }

  /// Open files are never evicted.
  func retain(_ key: String) { state.withLock { $0.openCount[key, default: 0] += 1 } }

  func release(_ key: String) {
    state.withLock { s in
      let n = (s.openCount[key] ?? 1) - 1
      s.openCount[key] = n > 0 ? n : nil
      if n <= 0 { s.openFiles.removeValue(forKey: key) }
    }
  }

  /// complete → absent for the least recently used copies that are not open, until the
  /// complete copies fit in `limit` bytes; returns them, for their files to be removed.
  func evict(toFit limit: Int64) -> [(key: String, copy: LocalCopy)] {
    state.withLock { s in
      guard s.bytes > limit else { return [] }
      var out: [(key: String, copy: LocalCopy)] = []
      let candidates = s.copies.filter { $0.value.isComplete && s.openCount[$0.key] == nil && !s.pinned.contains($0.key) }.keys
        .sorted { (s.lastUse[$0] ?? 0) < (s.lastUse[$1] ?? 0) }
      for key in candidates where s.bytes > limit {
        if let copy = Self.remove(key, &s) { out.append((key, copy)) }
      }
      return out
    }
  }

  /// Changes with every copy that comes or goes (`State.version`).
  var version: UInt64 { state.withLock { $0.version } }

  // MARK: pins

  /// The copies the pins keep now (key → size), in place of those they kept before.
  func setPinned(_ sizes: [String: Int64]) {
    state.withLock { s in
      s.pinned = Set(sizes.keys)
      s.pinnedBytes = sizes.values.reduce(0, +)
    }
  }

  /// One more copy the pins keep (a new generation of a name they keep), until the next
  /// `setPinned` says again what they keep.
  func addPinned(_ key: String, size: Int64) {
    state.withLock { s in if s.pinned.insert(key).inserted { s.pinnedBytes += size } }
  }

  func isPinned(_ key: String) -> Bool { state.withLock { $0.pinned.contains(key) } }

  var pinnedBytes: Int64 { state.withLock { $0.pinnedBytes } }

  /// Pinned complete copies: how many, and their bytes.
  var pinnedTotals: (bytes: Int64, files: Int) {
    state.withLock { s in
      s.pinned.reduce(into: (Int64(0), 0)) { t, key in
        if let copy = s.copies[key], copy.isComplete { t = (t.0 + copy.metadata.size, t.1 + 1) }
      }
    }
  }

  /// complete → absent for copy `key` when it is not open and no pin keeps it (a version a pin
  /// kept until the next one was verified); the copy, for its files to be removed.
  func removeIfUnused(_ key: String) -> LocalCopy? {
    state.withLock { s in
      guard s.openCount[key] == nil, !s.pinned.contains(key) else { return nil }
      return Self.remove(key, &s)
    }
  }

  // MARK: what the mount shows

  /// Bytes and count of complete copies.
  var totals: (bytes: Int64, files: Int) { state.withLock { s in (s.bytes, s.copies.values.filter(\.isComplete).count) } }

  /// The newest complete copy of each object, for offline use.
  func newestComplete() -> [ObjectName: LocalCopy] {
    state.withLock { s in
      var out: [ObjectName: LocalCopy] = [:]
      for copy in s.copies.values where copy.isComplete && (out[ObjectName(copy.name)]?.metadata.generation ?? -1) < copy.metadata.generation {
        out[ObjectName(copy.name)] = copy
      }
      return out
    }
  }

  /// The complete copies (name, generation) whose names `wanted` takes.
  func completeCopies(where wanted: (String) -> Bool) -> [(name: String, generation: Int64)] {
    state.withLock { s in
      s.copies.values.filter { $0.isComplete && wanted($0.name) }.map { ($0.name, $0.metadata.generation) }
    }
  }

  /// Every copy being filled.
  var filling: [PartialCopy] { state.withLock { s in s.copies.values.compactMap(\.filling) } }
}
