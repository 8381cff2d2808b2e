import Foundation

/// The queue's records that cannot be trusted, set aside in the queue's `damaged/` folder: never
/// carried out as if good, never deleted. The journal from a frame that is cut short or does not
/// match its CRC; a record whose bytes are not the size and CRC32C it wrote down; bytes that no
/// record owns; a record file of an earlier version that does not decode or names another change
/// than its file does (a copied record). Each is moved there with a `.why` file beside it, and the
/// log, `bucketfs sync`, the stats and the metrics page say how many there are.
struct DamagedRecords: Sendable {
  let folder: URL
  private let disk: any QueueDisk

  init(queueFolder: URL, disk: any QueueDisk) {
    folder = queueFolder.appendingPathComponent("damaged")
    self.disk = disk
  }

  /// How many things were set aside (this mount and earlier ones): a listing of the folder, read
  /// by the queue once, when it loads (nothing is set aside later).
  var count: Int {
    ((try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []).filter { $0.hasSuffix(".why") }.count
  }

  /// Moves `paths` (bytes, a record file of an earlier version, or both) into the folder, and
  /// writes `kept` there (a record or the end of the journal, read from the queue's one file),
  /// with `reason` beside them; returns false when a path could not be moved (it then stays
  /// where it is, and is still never carried out).
  @discardableResult
  func setAside(_ paths: [String], keeping kept: [(name: String, bytes: Data)] = [], reason: String) -> Bool {
    _ = disk.makeFolder(folder.path, PrivateFolder.folderMode)
    try? PrivateFolder.make(folder)
    let stamp = String(Int(Date().timeIntervalSince1970)) + "-" + String(UInt32.random(in: 0...UInt32.max), radix: 36)
    var moved = true
    for path in paths where FileManager.default.fileExists(atPath: path) {
      let name = URL(fileURLWithPath: path).lastPathComponent
      if disk.rename(path, folder.appendingPathComponent("\(stamp)-\(name)").path) != 0 { moved = false }
    }
    let durable = DurableFile(disk: disk)
    for (name, bytes) in kept { try? durable.write(bytes, to: folder.appendingPathComponent("\(stamp)-\(name)").path) }
    let names = paths.map { URL(fileURLWithPath: $0).lastPathComponent } + kept.map(\.name)
    let why = names.joined(separator: ", ") + ": " + reason + "\n"
    try? durable.write(Data(why.utf8), to: folder.appendingPathComponent("\(stamp).why").path)
    return moved
  }
}

/// The write-back queue's numbers, for the stats, the metrics page and `bucketfs sync`.
package struct QueueTotals: Sendable, Equatable {
  package var changes: Int
  package var bytes: Int64
  package var failed: Int
  package var applied: Int
  package var conflicts: Int
  /// Appends carried onto a version another writer made meanwhile.
  package var merges = 0
  /// Renames carried out as an upload under the new name, then a delete of the old.
  package var renamesByUpload = 0
  /// Records and bytes set aside as damaged (`DamagedRecords`).
  package var damaged: Int
  /// Of `changes`, uploads held while the kernel still writes their file (`QueueState.writing`).
  package var stillWritten = 0
  /// How many changes the queue carries out at once now (`ChangeConcurrency`).
  package var atOnce = 0
}
