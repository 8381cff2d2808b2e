// The write-back queue on disk: the changes' records in one append-only file (`ChangeLog`,
// `changes.log`), and an upload's bytes beside it (`NNNNNNNNNNNN.data`, the sequence number).
// Bytes under a final name always have a record: they wait under `.data.tmp` until the record is
// written, so a crash before the record leaves only a temporary file, removed at the next load,
// and one between the two is finished there. A queue an earlier version left (a record per
// change, `NNNNNNNNNNNN.json`) is read and moved into the log at the first load.
import Foundation
import StorageCore
import Synchronization

struct ChangeJournal: Sendable {
  let folder: URL
  let damaged: DamagedRecords
  private let log: @Sendable (String) -> Void
  private let durable: DurableFile
  /// The file operations the queue's durability rests on (`QueueDisk`).
  var disk: any QueueDisk { durable.disk }
  private let records: ChangeLog
  /// Set: a close's files are put in place through the page cache and made to last by this
  /// group commit; nil: each is fsynced before the close returns.
  let groupCommit: GroupCommit?

  init(folder: URL, disk: any QueueDisk = SystemDisk(), groupCommit: Bool = false, log: @escaping @Sendable (String) -> Void) throws {
    self.folder = folder
    self.damaged = DamagedRecords(queueFolder: folder, disk: disk)
    self.log = log
    durable = DurableFile(disk: disk)
    prefix = folder.path.hasSuffix("/") ? folder.path : folder.path + "/"
    let commit = groupCommit ? GroupCommit(folder: folder.path, journal: prefix + "changes.log", disk: disk) : nil
    self.groupCommit = commit
    var beforeRewrite: (@Sendable () throws(FSError) -> Void)? = nil
    if let commit {
      beforeRewrite = { () throws(FSError) -> Void in try commit.flushBytes() }
    }
    records = ChangeLog(path: prefix + "changes.log", disk: disk, beforeRewrite: beforeRewrite)
    try PrivateFolder.make(folder)
  }

  private static func isReplaced(_ change: PendingChange) -> Bool {
    if case .replaced = change.life { true } else { false }
  }

  /// The folder's path and a "/": a change's files are named by joining strings, not through
  /// `URL`, whose parsing was a tenth of the daemon's work for a small file's close.
  private let prefix: String

  func dataPath(_ change: PendingChange) -> String { prefix + change.fileName + ".data" }

  /// The changes an earlier mount left, and the size of each upload's bytes. What cannot be
  /// trusted (a record that does not decode, a copied record, the journal from a frame that does
  /// not check on, bytes that are not what their record wrote down, bytes without a record) is
  /// set aside, never carried out.
  func load() throws -> (changes: [PendingChange], sizes: [UInt64: Int64]) {
    let fm = FileManager.default
    func setAside(_ paths: [String], keeping kept: [(name: String, bytes: Data)] = [], _ reason: String) {
      damaged.setAside(paths, keeping: kept, reason: reason)
      log("write-back: \(reason); kept aside in \(damaged.folder.path), not carried out")
    }
    // Records of an earlier version, a file each.
    var byNumber: [UInt64: PendingChange] = [:]
    var legacyFiles: [String] = []
    for file in ((try? fm.contentsOfDirectory(atPath: folder.path)) ?? []).sorted() where file.hasSuffix(".json") {
      let path = prefix + file
      let stem = String(file.dropLast(5))
      guard let data = fm.contents(atPath: path), let change = try? JSONDecoder().decode(PendingChange.self, from: data) else {
        setAside([path, prefix + stem + ".data"], "record \(file) cannot be read (truncated or damaged)")
        continue
      }
      guard change.fileName == stem else {
        setAside([path], "record \(file) is change \(change.sequence)'s (a copy of another record)")
        continue
      }
      byNumber[change.sequence] = change
      legacyFiles.append(path)
    }
    let loaded = try records.load()
    if let (bytes, reason) = loaded.damage {
      setAside([], keeping: [("changes.log.rest", bytes)], "\(reason); the \(bytes.count) bytes from there")
    }
    for (sequence, payload) in loaded.records {
      if let change = try? JSONDecoder().decode(PendingChange.self, from: payload) { byNumber[sequence] = change }
    }
    // The earlier version's records go into the log, then their files.
    if !legacyFiles.isEmpty {
      try records.append(byNumber.keys.sorted().map { byNumber[$0]! }, sync: true)
      for path in legacyFiles { _ = disk.unlink(path) }
      try? disk.syncFolder(folder.path)
    }
    let files = (try? fm.contentsOfDirectory(atPath: folder.path)) ?? []
    for file in files where file.hasSuffix(".tmp") {
      let path = prefix + file
      // Bytes whose record was written before a crash: finished here. Anything else under a
      // temporary name (bytes without a record, a record file half written) goes.
      if file.hasSuffix(".data.tmp"), let sequence = UInt64(file.dropLast(".data.tmp".count)), byNumber[sequence] != nil {
        _ = disk.rename(path, String(path.dropLast(4)))
      } else {
        _ = disk.unlink(path)
      }
    }
    // Newest first, so that a replaced upload knows whether the one that replaced it stands.
    var changes: [PendingChange] = []
    var setAsideRecords: [UInt64] = []
    var revived: [PendingChange] = []
    var obsolete: [PendingChange] = []
    for sequence in byNumber.keys.sorted(by: >) {
      var change = byNumber[sequence]!
      if case .replaced(let newer) = change.life {
        // The newer one is queued with sound bytes, or was carried out (its record removed, or
        // gone with the removal in a compaction): this one must never go. Only a newer one set
        // aside here (its bytes did not outlast a power loss) sends this one back to wait.
        guard setAsideRecords.contains(newer) else {
          obsolete.append(change)
          continue
        }
        log("write-back: \(TerminalText.visible(change.name)) (change \(sequence)) waits again: the change that replaced it (\(newer)) lost its bytes")
        change.life = .pending
        // Based on what the change before it left, which was carried out meanwhile: the record
        // that named that generation may not have outlasted the crash, the newer one's did
        // (a replacement takes the base of what it replaces). Else it went beside the object
        // as a conflict copy that no writer made.
        if change.base == .previous, let newerBase = byNumber[newer]?.base, newerBase != .previous,
          !byNumber.values.contains(where: { $0.sequence < sequence && $0.name.utf8.elementsEqual(change.name.utf8) && !Self.isReplaced($0) })
        {
          change.base = newerBase
        }
        revived.append(change)
      }
      if change.kind == .upload && change.isQueued, let reason = damage(of: change) {
        let record = (try? JSONEncoder().encode(change)) ?? Data()
        setAside([dataPath(change)], keeping: [(change.fileName + ".json", record)], reason)
        setAsideRecords.append(sequence)
        continue
      }
      changes.append(change)
    }
    changes.reverse()
    // A rename whose new name lost its bytes keeps its old name: its delete goes with them.
    let undone = changes.filter { $0.renamedInto.map(setAsideRecords.contains) == true }
    for change in undone {
      log("write-back: the delete of \(TerminalText.visible(change.name)) (change \(change.sequence)) is dropped: the bytes it was renamed into (change \(change.renamedInto!)) are lost, and the object keeps this name")
    }
    if !undone.isEmpty { changes.removeAll { $0.renamedInto.map(setAsideRecords.contains) == true } }
    if !setAsideRecords.isEmpty || !revived.isEmpty || !obsolete.isEmpty {
      try records.append(
        revived.filter { !setAsideRecords.contains($0.sequence) }, removed: setAsideRecords + obsolete.map(\.sequence) + undone.map(\.sequence),
        sync: true)
    }
    for change in obsolete { _ = disk.unlink(dataPath(change)) }
    // Bytes no record owns (a record removed by hand, or lost with a damaged journal): kept,
    // never uploaded under a guess. Those of a change whose removal the log holds were left by
    // a daemon killed before it unlinked them: they go. So do those of a change an intact
    // journal never mentions: a group commit makes the bytes' name last before the journal,
    // and a power loss between the two leaves the bytes of a close that no commit covered
    // (or of a change carried out whose removal a compaction dropped before they were unlinked).
    let owned = Set(changes.map { $0.fileName + ".data" })
    let carriedOut = Set(loaded.removed.map { PendingChange.fileName(of: $0) + ".data" })
    let mentioned = Set(byNumber.keys).union(loaded.removed)
    for file in (try? fm.contentsOfDirectory(atPath: folder.path)) ?? [] where file.hasSuffix(".data") && !owned.contains(file) {
      let neverMentioned = loaded.damage == nil && UInt64(file.dropLast(5)).map { !mentioned.contains($0) } == true
      if carriedOut.contains(file) || neverMentioned {
        _ = disk.unlink(prefix + file)
      } else {
        setAside([prefix + file], "\(file) has no record")
      }
    }
    var sizes: [UInt64: Int64] = [:]
    for change in changes where change.kind == .upload {
      var st = stat()
      if stat(dataPath(change), &st) == 0 { sizes[change.sequence] = Int64(st.st_size) }
    }
    return (changes, sizes)
  }

  /// Why `change`'s bytes cannot be uploaded as they are (nil: they can): gone, or not what its
  /// record says (its CRC32C; an overlay's length, which its holes keep whatever was lost).
  private func damage(of change: PendingChange) -> String? {
    let path = dataPath(change)
    var st = stat()
    guard stat(path, &st) == 0 else { return "\(TerminalText.visible(change.name)) (change \(change.sequence)) lost its bytes" }
    let wrong = "the bytes of \(TerminalText.visible(change.name)) (change \(change.sequence)) are not the \(change.dataSize ?? 0) bytes queued"
    if let size = change.dataSize, let crc = change.dataCRC32C {
      return BlockChecksums.compute(path: path, size: size, md5: false)?.1.value == crc ? nil : wrong
    }
    if change.overlay != nil, let size = change.dataSize, Int64(st.st_size) != size { return wrong }
    // A file the kernel still wrote when the mount ended: its record has the size of its last
    // close (a truncation since rewrote it), so less than that is bytes a crash lost, never a
    // version its writer made.
    if change.overlay == nil, change.dataCRC32C == nil, let size = change.dataSize, Int64(st.st_size) < size { return wrong }
    return nil
  }

  /// `change`'s record, appended to the journal and fsynced. `committed`: as a close writes it,
  /// made to last by the group commit when there is one. An append needs no folder sync, so
  /// the record is either written or the call throws.
  ///
  /// Without `committed`, with a group commit, the record lasts through a commit run now: the
  /// bytes the journal's other records vouch for last first (an fsync of the journal alone
  /// would make a close's record last before the bytes it names).
  func write(_ change: PendingChange, committed: Bool = false) throws(FSError) { try write([change], committed: committed) }

  /// `changes`' records in one append: a power loss keeps all of them or a prefix.
  func write(_ changes: [PendingChange], committed: Bool = false) throws(FSError) {
    guard let groupCommit else { return try records.append(changes, sync: true) }
    try records.append(changes, sync: false)
    groupCommit.note(files: [records.path], names: changes.map(\.name))
    if !committed { try groupCommit.commit() }
  }

  /// Makes the records of `names` last (and all noted before them), through a commit that
  /// covers them, run now only when none has yet.
  func commitCovering(_ names: [String]) throws(FSError) {
    try groupCommit?.commit(coveringNamesOf: names)
  }

  /// The bytes of `fd` under `change`'s temporary name, fsynced (by the group commit, when there
  /// is one) and read back (from the page cache, so that the record vouches for the bytes on
  /// disk): their size and CRC32C. `linking`: `fd`'s own path, linked under the temporary name
  /// instead of copied (it falls back to a copy where the file system will not link).
  /// `written`: the CRC32C of a file of the given size as its writes gave it (nil: unknown),
  /// which spares the read back of a linked file. `unfinished`: the file is not what will go up
  /// yet (an overlay whose base fills its holes later, `EditOverlay`; a file the kernel is still
  /// writing): it must be linked (a copy would not be the file that changes on; EXDEV where it
  /// cannot be), and its CRC32C is taken once it is final (`wholeBytes`, `currentBytes`).
  func takeBytes(
    from fd: Int32, linking: String? = nil, written: (Int64) -> UInt32? = { _ in nil }, unfinished: Bool = false, for change: PendingChange
  ) throws(FSError) -> (size: Int64, crc32c: UInt32?) {
    let temporary = dataPath(change) + ".tmp"
    // Noted before the record is written: a commit between the two makes these bytes last
    // before it makes the record last (under this name, or the final one if renamed by then).
    groupCommit?.note(files: [temporary])
    let size: Int64
    var st = stat()
    if let linking, disk.link(linking, temporary) == 0, fstat(fd, &st) == 0 {
      size = Int64(st.st_size)
      if groupCommit == nil, disk.fsync(fd) != 0 {
        let e = errno
        _ = disk.unlink(temporary)
        throw FSError(e)
      }
      if unfinished {
        nameLasts(temporary)
        return (size, nil)
      }
      // The very file the writes went to (linked, not copied): their CRC is its bytes'.
      if let crc = written(size) {
        nameLasts(temporary)
        return (size, crc)
      }
    } else if unfinished {
      throw FSError(EXDEV)
    } else {
      size = try durable.copy(from: fd, to: temporary, sync: groupCommit == nil)
    }
    guard let crc = BlockChecksums.compute(path: temporary, size: size, md5: false)?.1.value else {
      _ = disk.unlink(temporary)
      throw FSError(EIO)
    }
    nameLasts(temporary)
    return (size, crc)
  }

  /// Without a group commit, the bytes' temporary name lasts before the record that names them
  /// is written (fsynced): else a power loss could keep the record and lose the name, and the
  /// next mount would report damage for a close that never returned.
  /// A folder that cannot be synced is reported once the change is queued (`keepBytes`), as
  /// any folder sync's error: the change is kept.
  private func nameLasts(_ temporary: String) {
    guard groupCommit == nil else { return }
    _ = durable.syncFolder(of: temporary)
  }

  /// An overlaid upload's bytes, filled: fsynced before a record says they are whole (a power
  /// loss must not leave a record vouching for holes), with their size and CRC32C.
  func wholeBytes(of change: PendingChange) throws(FSError) -> (size: Int64, crc32c: UInt32) {
    let path = dataPath(change)
    let fd = disk.open(path, O_RDONLY | O_CLOEXEC, 0)
    guard fd >= 0 else { throw FSError(errno) }
    defer { disk.close(fd) }
    var st = stat()
    guard fstat(fd, &st) == 0 else { throw FSError(errno) }
    guard disk.fsync(fd) == 0 else { throw FSError(errno) }
    guard let crc = BlockChecksums.compute(path: path, size: Int64(st.st_size), md5: false)?.1.value else { throw FSError(EIO) }
    return (Int64(st.st_size), crc)
  }

  /// The size of `change`'s bytes as they are now, the kernel having written them, and with
  /// `checksum` their CRC32C (read back, from the page cache) once it has stopped; the group
  /// commit makes them last.
  func currentBytes(of change: PendingChange, checksum: Bool) throws(FSError) -> (size: Int64, crc32c: UInt32?) {
    let path = dataPath(change)
    var st = stat()
    guard stat(path, &st) == 0 else { throw FSError(errno) }
    var crc: UInt32? = nil
    if checksum {
      guard let sum = BlockChecksums.compute(path: path, size: Int64(st.st_size), md5: false)?.1.value else { throw FSError(EIO) }
      crc = sum
    }
    groupCommit?.note(files: [path])
    return (Int64(st.st_size), crc)
  }

  /// Bytes taken for `change` under their final name, once its record is on disk.
  func keepBytes(of change: PendingChange) throws(FSError) -> DurableFile.Placed {
    let temporary = dataPath(change) + ".tmp"
    guard disk.rename(temporary, dataPath(change)) == 0 else {
      let e = errno
      try? records.append([], removed: [change.sequence], sync: groupCommit == nil)
      _ = disk.unlink(temporary)
      throw FSError(e)
    }
    guard let groupCommit else { return durable.syncFolder(of: dataPath(change)) }
    groupCommit.note(files: [dataPath(change)])
    return .durable
  }

  /// Bytes taken for a change that was not queued after all.
  func dropBytes(of change: PendingChange) { _ = disk.unlink(dataPath(change) + ".tmp") }

  /// An empty file as `change`'s bytes (a folder placeholder made where there was none).
  func writeEmptyBytes(for change: PendingChange) throws(FSError) {
    let empty = disk.open(dataPath(change), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    guard empty >= 0 else { throw FSError(errno) }
    disk.close(empty)
  }

  /// A replaced upload's record and bytes, removed once the change that replaced it lasts: at
  /// the next group commit, or now (durably) without one.
  /// Its record already says it was replaced (written with the one that replaced it), so a load
  /// drops it while that one stands, whatever became of its bytes; the removal only tidies.
  @discardableResult
  func removeReplaced(_ change: PendingChange) -> DurableFile.Placed {
    guard let groupCommit else {
      _ = disk.unlink(dataPath(change))
      try? records.append([], removed: [change.sequence], sync: false)
      return .durable
    }
    groupCommit.note(files: [], unlinks: [dataPath(change)]) { [records] in
      try? records.append([], removed: [change.sequence], sync: false)
    }
    return .durable
  }

  /// Removes `change`'s record and bytes. A change carried out may come back after a power loss
  /// (its record says it is done, or pending and its bytes in the bucket already: the next mount
  /// finds them there, `ChangeWorker.baseMoved`); one `durably` removed may not (a replaced
  /// upload, which would go up beside the one that replaced it). With a group commit the bytes
  /// go once the journal up to the removal lasts: a record never outlives its bytes.
  @discardableResult
  func remove(_ change: PendingChange, durably: Bool = false) -> DurableFile.Placed {
    if !durably, let groupCommit {
      try? records.append([], removed: [change.sequence], sync: false)
      groupCommit.note(files: [records.path], unlinks: [dataPath(change)])
      return .durable
    }
    // The bytes first: a crash between the two leaves a record without bytes, which a done
    // change (the usual one removed) no longer needs, rather than bytes without a record.
    _ = disk.unlink(dataPath(change))
    do throws(FSError) {
      try records.append([], removed: [change.sequence], sync: durably)
    } catch {
      return .folderNotSynced(error.errno)
    }
    return durably ? durable.syncFolder(of: dataPath(change)) : .durable
  }
}
