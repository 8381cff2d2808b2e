// Offline copies. Opening a file starts filling a copy of the whole object in the staging folder
// (PartialCopy: the reads' own GETs and a filler write into it); a copy is written under a
// temporary name, verified against the server's checksum and only then renamed into place. The
// rename is the commit: a data file under its final name is complete, and its JSON side file
// (written first) says which object and generation it holds, so the index survives a crash.
// Copies are not fsynced: a copy that a power loss left short or with stale blocks fails its
// block checksums on first use and is dropped, so waiting for the disk would buy nothing, and
// a gigabyte written back at once would slow every read on the machine. Files are named by a hash of bucket, object and generation, so
// no object name can reach outside the folder. Least recently used copies that are not open are
// evicted to keep the folder under its size limit.
//
// A complete copy's index carries a CRC32C per block (BlockChecksums), computed when the copy is
// made and checked on every read from it: a copy damaged on disk is dropped, logged and never
// served, and the read goes to the server instead (or fails with EIO offline). The folder and
// everything in it are private to the owner (0700/0600): the index holds download tokens.
import Foundation
import StorageCore
import Synchronization

public final class StagingArea: Sendable {
  public enum Status: Equatable, Sendable {
    case none
    case partial(percent: Int)
    case complete
  }

  /// One staged (or staging) object.
  public struct Entry: Sendable {
    public var name: String
    public var metadata: StorageMetadata
    public var dataPath: String
    /// Nil for a copy made by a version that kept none: it is verified whole on first use.
    var checksums: BlockChecksums?
  }

  struct Active {
    var copy: PartialCopy
    var entry: Entry
  }

  struct State {
    var complete: [String: Entry] = [:]  // key → entry
    var active: [String: Active] = [:]
    var lastUse: [String: UInt64] = [:]
    var openCount: [String: Int] = [:]
    /// Descriptors of complete copies being read.
    var openCopies: [String: FileDescriptor] = [:]
    var bytes: Int64 = 0
    var tick: UInt64 = 0
  }

  let folder: URL
  let bucket: String
  let sizeLimit: Int64
  let maxFile: Int64
  private let state = Mutex(State())
  private let log: @Sendable (String) -> Void
  private let writer = DispatchQueue(label: "bucketfs.staging.writer")
  /// Writes the bytes of partial copies.
  private let copyWriter = StagingWriter()

  /// Staging buffers neither held by a GET nor being written (all of them when quiet).
  public var buffersFree: Int { copyWriter.free }
  /// Checksums finished downloads (reads them back whole) off the task pool.
  private let verifier = DispatchQueue(label: "bucketfs.staging.verifier")
  static let checksumsKey = "bucketfs.blockCRC32C"

  public init(folder: URL, bucket: String, sizeLimit: Int64, maxFile: Int64, log: @escaping @Sendable (String) -> Void) throws {
    self.folder = folder.appendingPathComponent(Self.hash(bucket).prefix(16) + "", isDirectory: true)
    self.bucket = bucket
    self.sizeLimit = sizeLimit
    self.maxFile = maxFile
    self.log = log
    if !FileManager.default.fileExists(atPath: folder.path) || PrivateFolder.holdsOnlyStaging(folder) {
      try PrivateFolder.make(folder)
      // Other buckets' copies, perhaps left open by an older version.
      PrivateFolder.tightenFiles(in: folder)
      for other in (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? [] {
        var st = stat()
        let url = folder.appendingPathComponent(other, isDirectory: true)
        guard lstat(url.path, &st) == 0, st.st_mode & S_IFMT == S_IFDIR, st.st_uid == geteuid() else { continue }
        PrivateFolder.tightenFiles(in: url)
      }
    }
    try PrivateFolder.make(self.folder)
    PrivateFolder.tightenFiles(in: self.folder)
    loadIndex()
  }

  /// Where a writable mount keeps the changes it has not written to the bucket yet.
  public var queueFolder: URL { folder.appendingPathComponent("queue", isDirectory: true) }

  static func hash(_ text: String) -> String {
    let d = Digest(.sha256)
    d.update(Data(text.utf8))
    return Digest.hex(d.finalize())
  }

  func key(_ name: String, _ generation: Int64) -> String {
    String(Self.hash(bucket + "\u{0}" + name).prefix(40)) + "-\(generation)"
  }

  private func paths(_ key: String) -> (data: URL, meta: URL) {
    (folder.appendingPathComponent(key + ".data"), folder.appendingPathComponent(key + ".json"))
  }

  /// Rebuilds the index from the folder; drops leftovers of copies that never completed.
  private func loadIndex() {
    let fm = FileManager.default
    let files = (try? fm.contentsOfDirectory(atPath: folder.path)) ?? []
    var complete: [String: Entry] = [:]
    var lastUse: [String: UInt64] = [:]
    var bytes: Int64 = 0
    for file in files {
      let full = folder.appendingPathComponent(file).path
      if file.hasSuffix(".part") {
        try? fm.removeItem(atPath: full)
        continue
      }
      guard file.hasSuffix(".json") else { continue }
      let key = String(file.dropLast(5))
      let (data, _) = paths(key)
      guard let json = fm.contents(atPath: full),
        let dict = try? JSONSerialization.jsonObject(with: json) as? [String: Any],
        let name = dict["name"] as? String, fm.fileExists(atPath: data.path)
      else {
        try? fm.removeItem(atPath: full)
        continue
      }
      let metadata = StorageMetadata(dictionary: dict)
      let checksums = (dict[Self.checksumsKey] as? String).flatMap(BlockChecksums.init(encoded:))
      complete[key] = Entry(name: name, metadata: metadata, dataPath: data.path, checksums: checksums)
      let mtime = (try? fm.attributesOfItem(atPath: data.path)[.modificationDate] as? Date) ?? Date()
      lastUse[key] = UInt64(mtime.timeIntervalSince1970)
      bytes += metadata.size
    }
    // Data no index names (its index was lost in a crash, or never written): nothing can find
    // it again, so it only takes space.
    for file in files where !file.hasSuffix(".json") {
      let key = file.hasSuffix(".data") ? String(file.dropLast(5)) : nil
      if key.map({ complete[$0] == nil }) ?? true { unlink(folder.appendingPathComponent(file).path) }
    }
    state.withLock { s in
      s.complete = complete
      s.lastUse = lastUse
      s.bytes = bytes
      s.tick = (lastUse.values.max() ?? 0) + 1
    }
  }

  /// Objects up to this size are fetched whole by their first read and staged from those bytes.
  public static let smallObject = BlockCache.pageSize * 2

  /// Staging of an opened object: it is not evicted while open; a small one is staged from the
  /// bytes its first read fetches anyway (`readWhole`), a larger one gets a partial copy that
  /// its reads fill, returned for them to use. Nothing is fetched `offline`.
  public func begin(
    _ name: String, metadata: StorageMetadata, client: any ObjectClient, offline: Bool,
    readWhole: @escaping @Sendable () async -> Data?
  ) -> PartialCopy? {
    retain(name, generation: metadata.generation)
    guard !offline else { return nil }
    guard metadata.size > Self.smallObject else {
      Task {
        if let bytes = await readWhole() { stage(name, metadata: metadata, bytes: bytes) }
      }
      return nil
    }
    return partialCopy(name, metadata: metadata, client: client)
  }

  /// The copy of `name` at `metadata.generation` being filled, made now when there is none.
  /// Nil when the object is staged completely already, too large to stage, or its file cannot
  /// be made (reads then go to the server without it).
  public func partialCopy(_ name: String, metadata: StorageMetadata, client: any ObjectClient) -> PartialCopy? {
    guard metadata.size <= maxFile, metadata.size <= sizeLimit else { return nil }
    let key = key(name, metadata.generation)
    let (data, meta) = paths(key)
    // A disk too full for the copy is found now rather than halfway (space taken by others
    // meanwhile makes a write fail later, which ends the copy the same way).
    var disk = statvfs()
    if statvfs(folder.path, &disk) == 0, Int64(disk.f_bavail) * Int64(disk.f_frsize) < metadata.size {
      let free = Int64(disk.f_bavail) * Int64(disk.f_frsize)
      log("staging \(name): \(String(cString: strerror(ENOSPC))) in \(folder.path) (\(metadata.size >> 20) MiB needed, \(free >> 20) MiB free); reading from the server")
      return nil
    }
    // Made under the lock: two opens of one object must not both create (and truncate) its file.
    return state.withLock { s -> PartialCopy? in
      if s.complete[key] != nil { return nil }
      if let active = s.active[key] { return active.copy }
      let entry = Entry(name: name, metadata: metadata, dataPath: data.path)
      guard let copy = PartialCopy(
        name: name, metadata: metadata, path: folder.appendingPathComponent("." + key + ".part").path, client: client, writer: copyWriter, log: log,
        onEnd: { [weak self] copy, filled in self?.ended(key, copy, filled: filled) })
      else {
        log("staging: cannot create a copy of \(name) in \(folder.path): \(String(cString: strerror(errno)))")
        return nil
      }
      s.active[key] = Active(copy: copy, entry: entry)
      // The side file goes first among the copy's writes (the index must name a data file
      // before it is renamed into place), off the open(2) that waits for this.
      copyWriter.perform { [self] in
        if !writeIndex(entry, to: meta.path) {
          log("staging: cannot write \(meta.path)")
          copy.breakCopy(.abandoned)
          discard(key, copy)
        }
      }
      return copy
    }
  }

  /// A copy got its last block (`filled`) or its filler gave up. A filled copy is checked whole
  /// against the object's hash (its block checksums, taken as the bytes arrived, combine into its
  /// CRC32C) and renamed into place; one that does not match is dropped, and so is one that was
  /// given up.
  private func ended(_ key: String, _ copy: PartialCopy, filled: Bool) {
    let (data, meta) = paths(key)
    guard filled else { return discard(key, copy) }
    // Off the transfer thread and the task pool: an object with no CRC32C is checked by reading
    // it back.
    verifier.async { [self] in
      var entry = Entry(name: copy.name, metadata: copy.metadata, dataPath: copy.path)
      guard let checked = verified(entry, checksums: copy.checksums) else {
        log("staging \(copy.name): the fetched bytes do not match the object's hash; the copy is dropped")
        copy.breakCopy(.abandoned)
        return discard(key, copy)
      }
      entry = checked
      entry.dataPath = data.path
      guard rename(copy.path, data.path) == 0 else {
        log("staging \(copy.name): cannot rename the copy into place: \(String(cString: strerror(errno)))")
        return discard(key, copy)
      }
      state.withLock { s in
        s.active.removeValue(forKey: key)
        s.complete[key] = entry
        s.bytes += entry.metadata.size
        s.tick += 1
        s.lastUse[key] = s.tick
      }
      evictIfNeeded()
    }
  }

  /// Forgets a copy that will not complete and removes its files (readers holding it keep their
  /// descriptor).
  private func discard(_ key: String, _ copy: PartialCopy) {
    state.withLock { s in if s.active[key]?.copy === copy { s.active.removeValue(forKey: key) } }
    unlink(copy.path)
    unlink(paths(key).meta.path)
  }

  /// Stages a small object from bytes already read (no second download): checked against the
  /// object's CRC32C or MD5, written and renamed like any staged copy.
  public func stage(_ name: String, metadata: StorageMetadata, bytes: Data) {
    // Disk writes run on the staging queue, never on a thread of the task pool that serves reads.
    writer.async { self.writeSmall(name, metadata: metadata, bytes: bytes) }
  }

  private func writeSmall(_ name: String, metadata: StorageMetadata, bytes: Data) {
    guard metadata.size <= maxFile, metadata.size <= sizeLimit, Int64(bytes.count) == metadata.size else { return }
    let key = key(name, metadata.generation)
    guard state.withLock({ $0.complete[key] == nil && $0.active[key] == nil }) else { return }
    if let expected = metadata.crc32c {
      var crc = CRC32C()
      bytes.withUnsafeBytes { crc.update($0) }
      guard crc.matches(expected) else {
        log("staging \(name): CRC32C mismatch, not staged")
        return
      }
    } else if let expected = metadata.md5Hash {
      let digest = Digest(.md5)
      digest.update(bytes)
      guard digest.finalize().base64EncodedString() == expected else {
        log("staging \(name): MD5 mismatch, not staged")
        return
      }
    }
    let (data, meta) = paths(key)
    let checksums = bytes.withUnsafeBytes { BlockChecksums.of($0) }
    let entry = Entry(name: name, metadata: metadata, dataPath: data.path, checksums: checksums)
    let tmpData = folder.appendingPathComponent("." + key + ".part").path
    guard writeIndex(entry, to: meta.path) else { return }
    unlink(tmpData)
    let fd = open(tmpData, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
    guard fd >= 0 else { return }
    let written = bytes.withUnsafeBytes { raw -> Bool in
      raw.count == 0 || write(fd, raw.baseAddress!, raw.count) == raw.count
    }
    close(fd)
    guard written, rename(tmpData, data.path) == 0 else {
      unlink(tmpData)
      unlink(meta.path)
      return
    }
    state.withLock { s in
      s.complete[key] = entry
      s.bytes += metadata.size
      s.tick += 1
      s.lastUse[key] = s.tick
    }
    evictIfNeeded()
  }

  /// Bytes `offset..<offset+count` of a complete staged copy, after checking the checksum of
  /// every block they touch. Nil when the object is not staged completely, or when the copy
  /// turned out damaged (it is then dropped). Partial copies answer through `PartialCopy`.
  public func read(_ name: String, generation: Int64, offset: Int64, count: Int) -> ReadReply? {
    let key = key(name, generation)
    let source = state.withLock { s -> Entry? in
      guard let e = s.complete[key] else { return nil }
      s.tick += 1
      s.lastUse[key] = s.tick
      return e
    }
    guard var entry = source else { return nil }
    if entry.checksums == nil {
      guard let checked = checksummed(entry) else {
        drop(key, entry, reason: "it does not match the object's hash")
        return nil
      }
      entry = checked
      state.withLock { s in if s.complete[key] != nil { s.complete[key] = checked } }
    }
    guard let file = openCopy(key, entry) else {
      drop(key, entry, reason: "it cannot be opened: \(String(cString: strerror(errno)))")
      return nil
    }
    switch Self.verifiedRead(entry, file: file, offset: offset, count: count) {
    case .success(let reply):
      return reply
    case .failure(let damage):
      drop(key, entry, reason: damage.reason)
      return nil
    }
  }

  /// The open descriptor of a complete copy, shared by its readers (opened once, not per read).
  private func openCopy(_ key: String, _ entry: Entry) -> FileDescriptor? {
    if let file = state.withLock({ $0.openCopies[key] }) { return file }
    let fd = open(entry.dataPath, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    let file = FileDescriptor(fd)
    return state.withLock { s in
      if let other = s.openCopies[key] { return other }
      guard s.complete[key] != nil else { return file }
      s.openCopies[key] = file
      return file
    }
  }

  struct Damage: Error { let reason: String }

  /// Reads whole blocks around the range and checks each against the index.
  static func verifiedRead(_ entry: Entry, file: FileDescriptor, offset: Int64, count: Int) -> Result<ReadReply, Damage> {
    guard let checksums = entry.checksums else { return .failure(Damage(reason: "it has no checksums")) }
    let size = entry.metadata.size
    var st = stat()
    guard fstat(file.fd, &st) == 0, Int64(st.st_size) == size else {
      return .failure(Damage(reason: "it holds \(st.st_size) bytes, the object \(size)"))
    }
    guard checksums.crcs.count == BlockChecksums.count(for: size) else {
      return .failure(Damage(reason: "its index does not fit its size"))
    }
    let end = min(size, offset + Int64(count))
    guard offset < end else { return .success(.bytes(Data())) }
    let blockSize = Int64(BlockChecksums.blockSize)
    let firstBlock = offset / blockSize
    let from = firstBlock * blockSize
    let to = min(size, ((end - 1) / blockSize + 1) * blockSize)
    var damage: Damage?
    let buffer = ReadBuffer.filled(count: Int(to - from), answer: Int(offset - from)..<Int(end - from)) { raw in
      guard BlockChecksums.readFully(file.fd, into: raw, at: from) else {
        damage = Damage(reason: "reading it failed: \(String(cString: strerror(errno)))")
        return false
      }
      if let bad = checksums.firstMismatch(UnsafeRawBufferPointer(raw), firstBlock: Int(firstBlock)) {
        damage = Damage(reason: "block \(bad) (bytes \(Int64(bad) * blockSize)…) does not match its checksum")
        return false
      }
      return true
    }
    guard let buffer else { return .failure(damage ?? Damage(reason: "reading it failed")) }
    return .success(.buffer(buffer))
  }

  /// `entry` with block checksums taken from its data file, after checking the whole file
  /// against the object's CRC32C (or MD5); the index is rewritten with them. Nil when the file
  /// does not match.
  private func checksummed(_ entry: Entry) -> Entry? {
    let m = entry.metadata
    guard let (checksums, crc, md5) = BlockChecksums.compute(path: entry.dataPath, size: m.size, md5: m.crc32c == nil && m.md5Hash != nil)
    else { return nil }
    if let expected = m.crc32c, !crc.matches(expected) { return nil }
    if m.crc32c == nil, let expected = m.md5Hash, md5 != expected { return nil }
    var checked = entry
    checked.checksums = checksums
    let key = key(entry.name, m.generation)
    if !writeIndex(checked, to: paths(key).meta.path) { log("staging: cannot write the index of \(entry.name)") }
    return checked
  }

  /// `entry` with `checksums` (taken from the bytes as they arrived) when they combine into the
  /// object's CRC32C; without a CRC32C to compare, the file is read back (`checksummed`).
  private func verified(_ entry: Entry, checksums: BlockChecksums?) -> Entry? {
    let m = entry.metadata
    guard let expected = m.crc32c, let checksums, checksums.crcs.count == BlockChecksums.count(for: m.size) else {
      return checksummed(entry)
    }
    let block = BlockChecksums.blockSize
    let lengths = checksums.crcs.indices.map { i in min(block, Int(m.size) - i * block) }
    guard CRC32C.combining(zip(checksums.crcs, lengths).map { (crc: $0, length: $1) }).matches(expected) else { return nil }
    var st = stat()
    guard stat(entry.dataPath, &st) == 0, Int64(st.st_size) == m.size else { return nil }
    var checked = entry
    checked.checksums = checksums
    if !writeIndex(checked, to: paths(key(entry.name, m.generation)).meta.path) { log("staging: cannot write the index of \(entry.name)") }
    return checked
  }

  /// The side file: the object's metadata, its name and (once complete) the block checksums.
  private func writeIndex(_ entry: Entry, to path: String) -> Bool {
    var dict = entry.metadata.dictionaryRepresentation()
    dict["name"] = entry.name
    if let checksums = entry.checksums { dict[Self.checksumsKey] = checksums.encoded }
    guard let json = try? JSONSerialization.data(withJSONObject: dict) else { return false }
    // Not synced: the data file's rename is the commit; an index lost or left from before the
    // checksums makes the copy be dropped or verified again.
    return (try? PrivateFile.write(json, to: path, sync: false)) != nil
  }

  /// Forgets a damaged copy and removes its files.
  private func drop(_ key: String, _ entry: Entry, reason: String) {
    let removed = state.withLock { s -> Bool in
      guard s.complete.removeValue(forKey: key) != nil else { return false }
      s.lastUse.removeValue(forKey: key)
      s.openCopies.removeValue(forKey: key)
      s.bytes -= entry.metadata.size
      return true
    }
    guard removed else { return }
    let (data, meta) = paths(key)
    unlink(data.path)
    unlink(meta.path)
    log("staging: dropped the staged copy of \(entry.name) (generation \(entry.metadata.generation)): \(reason)")
  }

  public func status(_ name: String, generation: Int64, size: Int64) -> Status {
    let key = key(name, generation)
    return state.withLock { s in
      if s.complete[key] != nil { return .complete }
      if let a = s.active[key] {
        let percent = size > 0 ? Int(a.copy.bytesPresent * 100 / size) : 0
        return .partial(percent: min(99, percent))
      }
      return .none
    }
  }

  /// Bytes and count of complete copies.
  public var totals: (bytes: Int64, files: Int) { state.withLock { ($0.bytes, $0.complete.count) } }

  /// Open files are never evicted.
  public func retain(_ name: String, generation: Int64) {
    let key = key(name, generation)
    state.withLock { $0.openCount[key, default: 0] += 1 }
  }

  public func release(_ name: String, generation: Int64) {
    let key = key(name, generation)
    state.withLock { s in
      let n = (s.openCount[key] ?? 1) - 1
      s.openCount[key] = n > 0 ? n : nil
      if n <= 0 { s.openCopies.removeValue(forKey: key) }
    }
    evictIfNeeded()
  }

  /// The newest complete copy of each object, for offline use.
  public func completeEntries() -> [String: Entry] {
    state.withLock { s in
      var out: [String: Entry] = [:]
      for e in s.complete.values where (out[e.name]?.metadata.generation ?? -1) < e.metadata.generation {
        out[e.name] = e
      }
      return out
    }
  }

  /// Removes least recently used copies of files that are not open until under the limit.
  func evictIfNeeded() {
    let victims: [(String, Entry)] = state.withLock { s in
      var out: [(String, Entry)] = []
      guard s.bytes > sizeLimit else { return out }
      let candidates = s.complete.keys.filter { s.openCount[$0] == nil }.sorted { (s.lastUse[$0] ?? 0) < (s.lastUse[$1] ?? 0) }
      for key in candidates where s.bytes > sizeLimit {
        let e = s.complete.removeValue(forKey: key)!
        s.lastUse.removeValue(forKey: key)
        s.openCopies.removeValue(forKey: key)
        s.bytes -= e.metadata.size
        out.append((key, e))
      }
      return out
    }
    for (key, entry) in victims {
      let (data, meta) = paths(key)
      unlink(data.path)
      unlink(meta.path)
      log("staging: evicted \(entry.name) (\(entry.metadata.size) bytes)")
    }
  }

  /// Stops every download in progress (at unmount).
  public func cancelAll() {
    let copies = state.withLock { s in s.active.values.map(\.copy) }
    copies.forEach { $0.breakCopy(.abandoned) }
  }
}
