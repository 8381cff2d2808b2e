// Where pins are kept across remounts and `kill -9`: one JSON file per pin in the staging
// folder's `pins/`, next to the copies it keeps, written whole and durably (fsync, rename,
// fsync of the folder) through `DurableFile`, so that a power loss leaves the old record or the
// new one. A record that cannot be read is set aside (renamed `.damaged`) and said in the log.
//
// A pin that follows a rename changes its record's name: the new record is written, then the
// old one removed. The new record names the one it replaces (`follows`: its target and a
// SHA-256 of its bytes) until it is written again, so that a stop between the two steps
// (`kill -9`) leaves a pair `load` resolves: the old record, still those bytes, is removed. It
// stayed as a second pin on the old name (kept 0/0) beside the right one. A record of the old
// name written since (the name pinned again) has other bytes and stays.
import Foundation
import StorageCore

struct PinStore: Sendable {
  let folder: URL
  private let durable = DurableFile()

  init(stagingFolder: URL) { folder = stagingFolder.appendingPathComponent("pins", isDirectory: true) }

  /// The record of the pin of `target`, named by a hash of its bytes: twin spellings of a
  /// folder have a record each.
  private func path(_ target: ObjectName) -> String {
    folder.appendingPathComponent(String(StagingIndex.hash(target.string).prefix(40)) + ".json").path
  }

  /// Every recorded pin, what could not be read, and the targets whose records a rename left
  /// behind (removed now: the record that follows them names them).
  func load() -> (pins: [Pin], damaged: [String], superseded: [ObjectName]) {
    let files = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
    var records: [(path: String, digest: String, pin: Pin, follows: Follows?)] = []
    var damaged: [String] = []
    for file in files.sorted() where file.hasSuffix(".json") {
      let full = folder.appendingPathComponent(file).path
      guard let data = FileManager.default.contents(atPath: full), let (pin, follows) = Self.decode(data) else {
        rename(full, full + ".damaged")
        damaged.append(full)
        continue
      }
      records.append((full, Self.digest(data), pin, follows))
    }
    let digests = Dictionary(records.map { ($0.path, $0.digest) }, uniquingKeysWith: { a, _ in a })
    var stale: Set<String> = []
    for record in records {
      guard let follows = record.follows else { continue }
      let old = path(follows.target)
      if old != record.path, digests[old] == follows.record { stale.insert(old) }
    }
    for old in stale { unlink(old) }
    if let any = stale.first { _ = durable.syncFolder(of: any) }
    let superseded = records.filter { stale.contains($0.path) }.map(\.pin.target)
    return (records.filter { !stale.contains($0.path) }.map(\.pin), damaged, superseded)
  }

  /// Records `pin` as it is now; throws when it could not be written. `following`: the target
  /// whose pin became this one by a rename, whose record the caller removes next.
  func save(_ pin: Pin, following old: ObjectName? = nil) throws(FSError) {
    // Inside the staging folder, which is private already.
    if mkdir(folder.path, PrivateFolder.folderMode) != 0 && errno != EEXIST { throw FSError(errno) }
    let follows = old.flatMap { old in FileManager.default.contents(atPath: path(old)).map { Follows(target: old, record: Self.digest($0)) } }
    let placed = try durable.replace(path(pin.target), with: Self.encode(pin, follows: follows))
    if case .folderNotSynced(let errno) = placed { throw FSError(errno) }
  }

  /// The record a rename replaces: its target, and a digest of its bytes then.
  private struct Follows {
    let target: ObjectName
    let record: String
  }

  private static func digest(_ data: Data) -> String {
    let d = Digest(.sha256)
    d.update(data)
    return Digest.hex(d.finalize())
  }

  func remove(_ target: ObjectName) {
    unlink(path(target))
    _ = durable.syncFolder(of: path(target))
  }

  private static func encode(_ pin: Pin, follows: Follows?) -> Data {
    var dict: [String: Any] = [
      "target": pin.target.string,
      "kept": { if case .kept = pin.phase { true } else { false } }(),
      // Lists, not objects keyed by name: JSON objects and `String` keys take two spellings
      // of a name for one.
      "objects": pin.tree.sorted { $0.key < $1.key }.map { name, m in ["name": name.string, "metadata": m.dictionaryRepresentation()] },
      "failures": pin.failures.sorted { $0.key < $1.key }.map { name, reason in ["name": name.string, "reason": reason] },
    ]
    if let problem = pin.problem { dict["problem"] = problem }
    if let follows { dict["follows"] = ["target": follows.target.string, "record": follows.record] }
    if let at = pin.lastRefreshed { dict["lastRefreshed"] = at.timeIntervalSince1970 }
    if let at = pin.lastVerified { dict["lastVerified"] = at.timeIntervalSince1970 }
    if let at = pin.listed { dict["listed"] = at.timeIntervalSince1970 }
    return (try? JSONSerialization.data(withJSONObject: dict, options: [.sortedKeys])) ?? Data()
  }

  private static func decode(_ data: Data) -> (Pin, Follows?)? {
    guard let dict = try? ExactText.jsonObject(with: data) as? [String: Any], let target = dict["target"] as? String else {
      return nil
    }
    var tree: [ObjectName: StorageMetadata] = [:]
    if let objects = dict["objects"] as? [[String: Any]] {
      for o in objects {
        guard let name = o["name"] as? String, let m = o["metadata"] as? [String: Any] else { return nil }
        tree[ObjectName(name)] = StorageMetadata(dictionary: m)
      }
    } else if let old = dict["tree"] as? [String: [String: Any]] {
      // Written before names were kept as a list.
      for (name, m) in old { tree[ObjectName(name)] = StorageMetadata(dictionary: m) }
    } else {
      return nil
    }
    // A pin last seen staging resumes as such; a kept one stays kept until its next refresh.
    let kept = dict["kept"] as? Bool ?? false
    var pin = Pin(target: ObjectName(target), phase: kept ? .kept : .staging(Pin.Progress()), tree: tree)
    if let failures = dict["failures"] as? [[String: String]] {
      for f in failures { if let name = f["name"], let reason = f["reason"] { pin.failures[ObjectName(name)] = reason } }
    } else if let old = dict["failures"] as? [String: String] {
      // Written before failures were kept as a list.
      for (name, reason) in old { pin.failures[ObjectName(name)] = reason }
    }
    pin.problem = dict["problem"] as? String
    pin.lastRefreshed = (dict["lastRefreshed"] as? Double).map { Date(timeIntervalSince1970: $0) }
    pin.listed = (dict["listed"] as? Double).map { Date(timeIntervalSince1970: $0) }
    // Written before passes stopped asking every object's metadata: each pass verified.
    pin.lastVerified = (dict["lastVerified"] as? Double).map { Date(timeIntervalSince1970: $0) } ?? pin.lastRefreshed
    let follows = (dict["follows"] as? [String: String]).flatMap { f in
      f["target"].flatMap { target in f["record"].map { Follows(target: ObjectName(target), record: $0) } }
    }
    return (pin, follows)
  }
}
