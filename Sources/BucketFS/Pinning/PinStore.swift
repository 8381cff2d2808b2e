// Where pins are kept across remounts and `kill -9`: one JSON file per pin in the staging
// folder's `pins/`, next to the copies it keeps, written whole and durably (fsync, rename,
// fsync of the folder) through `DurableFile`, so that a power loss leaves the old record or the
// new one. A record that cannot be read is set aside (renamed `.damaged`) and said in the log.
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

  /// Every recorded pin, and what could not be read.
  func load() -> (pins: [Pin], damaged: [String]) {
    let files = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
    var pins: [Pin] = []
    var damaged: [String] = []
    for file in files.sorted() where file.hasSuffix(".json") {
      let full = folder.appendingPathComponent(file).path
      guard let data = FileManager.default.contents(atPath: full), let pin = Self.decode(data) else {
        rename(full, full + ".damaged")
        damaged.append(full)
        continue
      }
      pins.append(pin)
    }
    return (pins, damaged)
  }

  /// Records `pin` as it is now; throws when it could not be written.
  func save(_ pin: Pin) throws(FSError) {
    // Inside the staging folder, which is private already.
    if mkdir(folder.path, PrivateFolder.folderMode) != 0 && errno != EEXIST { throw FSError(errno) }
    let placed = try durable.replace(path(pin.target), with: Self.encode(pin))
    if case .folderNotSynced(let errno) = placed { throw FSError(errno) }
  }

  func remove(_ target: ObjectName) {
    unlink(path(target))
    _ = durable.syncFolder(of: path(target))
  }

  private static func encode(_ pin: Pin) -> Data {
    var dict: [String: Any] = [
      "target": pin.target.string,
      "kept": { if case .kept = pin.phase { true } else { false } }(),
      // Lists, not objects keyed by name: JSON objects and `String` keys take two spellings
      // of a name for one.
      "objects": pin.tree.sorted { $0.key < $1.key }.map { name, m in ["name": name.string, "metadata": m.dictionaryRepresentation()] },
      "failures": pin.failures.sorted { $0.key < $1.key }.map { name, reason in ["name": name.string, "reason": reason] },
    ]
    if let problem = pin.problem { dict["problem"] = problem }
    if let at = pin.lastRefreshed { dict["lastRefreshed"] = at.timeIntervalSince1970 }
    if let at = pin.lastVerified { dict["lastVerified"] = at.timeIntervalSince1970 }
    return (try? JSONSerialization.data(withJSONObject: dict, options: [.sortedKeys])) ?? Data()
  }

  private static func decode(_ data: Data) -> Pin? {
    guard let dict = try? JSONSerialization.jsonObject(with: data) as? [String: Any], let target = dict["target"] as? String else {
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
    // Written before passes stopped asking every object's metadata: each pass verified.
    pin.lastVerified = (dict["lastVerified"] as? Double).map { Date(timeIntervalSince1970: $0) } ?? pin.lastRefreshed
    return pin
  }
}
