// What a rename made through the mount does to a pin. A pin names its folder or file by full
// object name, and its tree holds objects by name; a rename moves names, so without this a pin
// stayed on the old name: its next pass listed an empty folder, dropped the copies, and the
// renamed folder was neither kept nor shown offline (on a hierarchical bucket, whose one
// folders.rename no pass hears of, offline showed the old names instead). Here the pin's target
// and the names of its tree follow the rename, each moved file keeping its last listed metadata
// (its copy is carried to the new name by `PinKeeper.renamed`). All by bytes: a rename of NFD
// "café/" moves nothing of NFC "café/".
import Foundation
import StorageCore

struct PinRename: Sendable {
  /// Full object names; a folder's end in "/".
  let source: String
  let target: String

  var isFolder: Bool { source.endsWithSlash }

  /// `name` (a full object name) under the rename's new name; nil when the rename leaves it.
  func moved(_ name: String) -> String? {
    if isFolder { return name.hasBytePrefix(source) ? target + name.droppingBytes(source.utf8.count) : nil }
    return ObjectName.sameBytes(name, source) ? target : nil
  }

  /// A file of a pin's tree whose name the rename moved: the copy of `from` at the metadata's
  /// generation serves `to` (the metadata already renamed) until the server lists `to`.
  struct Carried: Sendable {
    let from: String
    let to: String
    let metadata: StorageMetadata
  }

  /// `pin` as the rename leaves it, and the files whose copies go to their new names; nil when
  /// the rename touches nothing of it. A pin of the name, or of a folder under it, becomes the
  /// pin of the new name; what its tree holds under the name is held under the new name, unless
  /// the new name is outside the pin (that object is no longer the pin's).
  func apply(to pin: Pin) -> (pin: Pin, carried: [Carried])? {
    var renamed = pin
    if let target = moved(pin.target.string) { renamed.target = ObjectName(target) }
    var carried: [Carried] = []
    var touched = renamed.target != pin.target
    for (name, metadata) in pin.tree {
      guard let to = moved(name.string) else { continue }
      touched = true
      renamed.tree.removeValue(forKey: name)
      guard renamed.holds(to) else { continue }
      var m = metadata
      m.path = to
      renamed.tree[ObjectName(to)] = m
      if !to.endsWithSlash { carried.append(Carried(from: name.string, to: to, metadata: m)) }
    }
    for (name, reason) in pin.failures {
      guard let to = moved(name.string) else { continue }
      touched = true
      renamed.failures.removeValue(forKey: name)
      if renamed.holds(to) { renamed.failures[ObjectName(to)] = reason }
    }
    return touched ? (renamed, carried) : nil
  }
}
