// Offline copies: the one owner of the staging folder. Opening a file starts its local copy
// (LocalCopy; StagingIndex keeps them); this file decides when staging starts and carries each
// copy through its states: a copy is filled under a temporary name (PartialCopy: the reads'
// own GETs and a filler write into it), verified against the server's checksum
// (CopyVerification) and only then renamed into place, and it is evicted least recently used
// first (never while open) to keep the folder under its size limit.
//
// Copies are not fsynced: a copy that a power loss left short or with stale blocks fails its
// block checksums on first use and is dropped, so waiting for the disk would buy nothing, and a
// gigabyte written back at once would slow every read on the machine. The folder and everything
// in it are private to the owner (0700/0600): the side files hold download tokens.
import Foundation
import Synchronization
import StorageCore

package final class StagingArea: Sendable {
  package enum Status: Equatable, Sendable {
    case none
    case partial(percent: Int)
    case complete
    /// Complete, and kept by a pin.
    case pinned

    package var isComplete: Bool { self == .complete || self == .pinned }
  }

  /// A complete copy, as the rest of the mount sees it.
  package struct Entry: Sendable {
    package var name: String
    package var metadata: StorageMetadata
    package var dataPath: String
  }

  package let folder: URL
  let sizeLimit: Int64
  let maxFile: Int64
  private let index: StagingIndex
  /// Pins waiting for copies being filled to end (`stagePinned`), by copy: nil, or why it failed.
  private let endWaiters = Mutex<[ObjectIdentifier: [CheckedContinuation<String?, Never>]]>([:])
  private let log: @Sendable (String) -> Void
  private let writer = DispatchQueue(label: "bucketfs.staging.writer")
  /// Writes the bytes of partial copies.
  private let copyWriter = StagingWriter()
  /// Checksums finished downloads (reads them back whole) off the task pool.
  private let verifier = DispatchQueue(label: "bucketfs.staging.verifier")

  /// Staging buffers neither held by a GET nor being written (all of them when quiet).
  package var buffersFree: Int { copyWriter.free }

  package init(folder: URL, bucket: String, sizeLimit: Int64, maxFile: Int64, log: @escaping @Sendable (String) -> Void) throws {
    self.folder = folder.appendingPathComponent(StagingIndex.hash(bucket).prefix(16) + "", isDirectory: true)
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
    index = StagingIndex(folder: self.folder, bucket: bucket)
    index.load()
  }

  /// Where a writable mount of folder `prefix` of the bucket keeps the changes it has not written
  /// to the bucket yet. Its changes name objects below that folder, so a mount of another folder
  /// must never carry them out: each folder has its own (the whole bucket's is `queue`).
  package func queueFolder(prefix: String) -> URL {
    let folderName = prefix.slashSegments(omittingEmpty: true).joined(separator: "/")
    let name = folderName.isEmpty ? "queue" : "queue-" + StagingIndex.hash(folderName).prefix(16)
    return folder.appendingPathComponent(name, isDirectory: true)
  }

  // MARK: when staging starts (decided here only)

  /// Objects up to this size are fetched whole by their first read and staged from those bytes.
  package static let smallObject = BlockCache.pageSize * 2

  /// A large object opened and not read within this time is staged anyway.
  static let fillAfterOpen: Duration = .milliseconds(300)

  /// The largest file a folder read-ahead fetches whole into the block cache: what a first read
  /// would stage whole (larger ones are read into their staged copies), or 1 MiB without staging.
  package static func readAheadLimit(staging: StagingArea?) -> Int64 { staging == nil ? 1 << 20 : smallObject }

  /// An object was opened: it is not evicted while open; a small one is staged from the bytes
  /// its first read fetches anyway (`readWhole`), a larger one gets a partial copy that its
  /// reads fill, returned for them to use, and whose filler starts at the first read served
  /// (`served`) or `fillAfterOpen` after the open. Nothing is fetched `offline`.
  package func begin(
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
    let copy = partialCopy(name, metadata: metadata, client: client)
    if let copy {
      Task {
        try? await Task.sleep(for: Self.fillAfterOpen)
        copy.startFilling()
      }
    }
    return copy
  }

  /// A read of an open file was served from the server: its copy fills the rest in the background.
  package func served(_ copy: PartialCopy?) { copy?.startFilling() }

  // MARK: absent → filling → complete

  /// The copy of `name` at `metadata.generation` being filled, made now when there is none.
  /// Nil when the object is staged completely already, too large to stage, or its file cannot
  /// be made (reads then go to the server without it).
  package func partialCopy(_ name: String, metadata: StorageMetadata, client: any ObjectClient) -> PartialCopy? {
    switch makeCopy(name, metadata: metadata, client: client) {
    case .success(let copy): return copy
    case .failure(let refusal):
      if case .diskFull(let why) = refusal { log("staging \(name): \(why); reading from the server") }
      return nil
    }
  }

  /// Why a copy of an object is not made.
  enum Refusal: Error {
    /// Larger than `stage_max_file`, or than the room `staging_size` leaves beside the pins.
    case tooLarge(String)
    case diskFull(String)
    case cannotCreate(String)

    var reason: String {
      switch self {
      case .tooLarge(let why), .diskFull(let why), .cannotCreate(let why): why
      }
    }
  }

  /// Whether a copy of `metadata.size` bytes may be made: a pinned one within `staging_size`
  /// (pins were checked to fit together), any other within what the pins leave and
  /// `stage_max_file`.
  private func room(for key: String, size: Int64) -> Refusal? {
    if index.isPinned(key) {
      if size > sizeLimit { return .tooLarge("\(ByteCount(size)) is more than staging_size (\(ByteCount(sizeLimit)))") }
      return nil
    }
    if size > maxFile { return .tooLarge("larger than stage_max_file") }
    let left = sizeLimit - index.pinnedBytes
    if size > left { return .tooLarge("\(ByteCount(size)) is more than the \(ByteCount(max(0, left))) staging_size leaves beside the pins") }
    return nil
  }

  /// Bytes free for new files on the staging folder's disk (nil: unknown).
  package var diskFree: Int64? {
    var disk = statvfs()
    guard statvfs(folder.path, &disk) == 0 else { return nil }
    return Int64(disk.f_bavail) * Int64(disk.f_frsize)
  }

  /// `partialCopy`, saying why there is none.
  private func makeCopy(_ name: String, metadata: StorageMetadata, client: any ObjectClient) -> Result<PartialCopy?, Refusal> {
    let key = index.key(name, metadata.generation)
    if let refusal = room(for: key, size: metadata.size) { return .failure(refusal) }
    let paths = index.paths(key)
    // A disk too full for the copy is found now rather than halfway (space taken by others
    // meanwhile makes a write fail later, which ends the copy the same way).
    if index.isAbsent(key), let free = diskFree, free < metadata.size {
      return .failure(.diskFull("\(String(cString: strerror(ENOSPC))) in \(folder.path) (\(ByteCount(metadata.size)) needed, \(ByteCount(free)) free)"))
    }
    var createError: Int32 = 0
    let started = index.startFilling(key) { () -> LocalCopy? in
      guard let partial = PartialCopy(
        name: name, metadata: metadata, path: index.newPartialPath(key), client: client, writer: copyWriter, log: log,
        onEnd: { [weak self] copy, filled in self?.ended(key, copy, filled: filled) })
      else {
        createError = errno
        log("staging: cannot create a copy of \(name) in \(folder.path): \(String(cString: strerror(errno)))")
        return nil
      }
      return .filling(partial, dataPath: paths.data.path)
    }
    if let (partial, made) = started, made {
      // The side file goes first among the copy's writes (the index must name a data file
      // before it is renamed into place), off the open(2) that waits for this.
      copyWriter.perform { [self] in
        if !index.writeSideFile(.filling(partial, dataPath: paths.data.path), checksums: nil) {
          log("staging: cannot write \(paths.side.path)")
          partial.breakCopy(.abandoned)
          abandon(key, partial)
        }
      }
    }
    if started == nil, index.copy(key) == nil {
      return .failure(.cannotCreate("cannot create a file in \(folder.path): \(String(cString: strerror(createError)))"))
    }
    return .success(started?.copy)
  }

  /// A copy got its last block (`filled`) or its filler gave up. A filled copy is checked whole
  /// against the object's hash and renamed into place; one that does not match is dropped, and
  /// so is one that was given up.
  private func ended(_ key: String, _ partial: PartialCopy, filled: Bool) {
    guard filled else { return abandon(key, partial) }
    // Off the transfer thread and the task pool: an object with no CRC32C is checked by reading
    // it back.
    verifier.async { [self] in
      guard let copy = index.copy(key), copy.filling === partial,
        let checksums = CopyVerification.verified(path: partial.path, metadata: partial.metadata, checksums: partial.checksums)
      else {
        log("staging \(partial.name): the fetched bytes do not match the object's hash; the copy is dropped")
        partial.breakCopy(.abandoned)
        abandon(key, partial)
        return copyEnded(partial, failure: "the downloaded bytes do not match the object's hash")
      }
      if !index.writeSideFile(copy, checksums: checksums) { log("staging: cannot write the index of \(partial.name)") }
      guard rename(partial.path, copy.dataPath) == 0 else {
        log("staging \(partial.name): cannot rename the copy into place: \(String(cString: strerror(errno)))")
        return abandon(key, partial)
      }
      // The file as verified, for passthrough opens (kept in the side file for the next mount).
      let identity = CopyIdentity.of(path: copy.dataPath)
      guard let complete = index.completed(key, partial, checksums: checksums, identity: identity) else { return }
      if identity != nil, !index.writeSideFile(complete, checksums: checksums, identity: identity) {
        log("staging: cannot write the index of \(partial.name)")
      }
      copyEnded(partial, failure: nil)
      evictIfNeeded()
    }
  }

  /// filling → absent: forgets a copy that will not complete and removes its files (readers
  /// holding it keep their descriptor).
  private func abandon(_ key: String, _ partial: PartialCopy) {
    defer { copyEnded(partial, failure: partial.failure) }
    guard index.abandoned(key, partial) else { return }
    let paths = index.paths(key)
    unlink(partial.path)
    unlink(paths.side.path)
  }

  /// absent → complete for a small object, from bytes already read (no second download):
  /// checked against the object's CRC32C or MD5, written and renamed like any staged copy.
  package func stage(_ name: String, metadata: StorageMetadata, bytes: Data) {
    // Disk writes run on the staging queue, never on a thread of the task pool that serves reads.
    writer.async { self.writeSmall(name, metadata: metadata, bytes: bytes) }
  }

  private func writeSmall(_ name: String, metadata: StorageMetadata, bytes: Data) {
    let key = index.key(name, metadata.generation)
    guard room(for: key, size: metadata.size) == nil, Int64(bytes.count) == metadata.size else { return }
    guard index.isAbsent(key) else { return }
    if let mismatch = CopyVerification.mismatch(bytes, metadata: metadata) {
      log("staging \(name): \(mismatch), not staged")
      return
    }
    let paths = index.paths(key)
    let partial = index.newPartialPath(key)
    let checksums = bytes.withUnsafeBytes { BlockChecksums.of($0) }
    let fd = open(partial, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
    guard fd >= 0 else { return }
    let written = bytes.withUnsafeBytes { raw in raw.isEmpty || PartialCopy.writeFully(fd, raw, at: 0) }
    close(fd)
    guard written, rename(partial, paths.data.path) == 0 else {
      log("staging \(name): cannot write the copy: \(String(cString: strerror(errno)))")
      unlink(partial)
      return
    }
    // The side file after the rename, so that it can name the file as verified: a crash
    // between the two leaves a data file no side file names, which the next mount removes.
    let identity = CopyIdentity.of(path: paths.data.path)
    let copy = LocalCopy.complete(name: name, metadata: metadata, dataPath: paths.data.path, checksums: checksums, identity: identity)
    guard index.writeSideFile(copy, checksums: checksums, identity: identity) else {
      unlink(paths.data.path)
      return
    }
    guard index.added(key, copy) else { return }
    evictIfNeeded()
  }

  // MARK: pinned copies (PinKeeper)

  /// Objects (full name, generation, size) the pins keep: never evicted, and what they take of
  /// `staging_size` is not offered to other copies.
  package func setPinned(_ objects: [(name: String, generation: Int64, size: Int64)]) {
    var sizes: [String: Int64] = [:]
    for o in objects { sizes[index.key(o.name, o.generation)] = o.size }
    index.setPinned(sizes)
  }

  /// `name`'s copy of `generation` is kept by a pin too (a new generation of a kept name: a move
  /// that landed), without going over every pinned object again.
  package func addPinned(_ name: String, generation: Int64, size: Int64) { index.addPinned(index.key(name, generation), size: size) }

  package func isPinned(_ name: String, generation: Int64) -> Bool { index.isPinned(index.key(name, generation)) }

  package var pinnedBytes: Int64 { index.pinnedBytes }

  /// Complete pinned copies: their bytes and how many.
  package var pinnedTotals: (bytes: Int64, files: Int) { index.pinnedTotals }

  /// Bytes `staging_size` allows for copies.
  package var capacity: Int64 { sizeLimit }

  /// Stages `name` at `metadata.generation` whole, verified as every copy is, and returns once
  /// it is complete (nil) or why it is not. For a pin: the object is pinned already, so the
  /// copy may take room other copies may not, and nothing evicts it.
  package func stagePinned(_ name: String, metadata: StorageMetadata, client: any ObjectClient) async -> String? {
    let key = index.key(name, metadata.generation)
    if index.copy(key)?.isComplete == true { return nil }
    if metadata.size <= Self.smallObject {
      let bytes: Data
      do throws(BucketError) {
        bytes = try await client.read(name, range: 0..<metadata.size, generation: metadata.generation)
      } catch {
        return error.detail
      }
      if let mismatch = CopyVerification.mismatch(bytes, metadata: metadata) { return mismatch }
      // On the staging queue, off the task pool: the copies' creates and renames in the one
      // staging folder contend for its lock, so writing several at once is no faster.
      await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
        writer.async {
          self.writeSmall(name, metadata: metadata, bytes: bytes)
          done.resume()
        }
      }
      if index.copy(key)?.isComplete == true { return nil }
      return room(for: key, size: metadata.size)?.reason ?? "the copy could not be written in \(folder.path)"
    }
    let copy: PartialCopy
    switch makeCopy(name, metadata: metadata, client: client) {
    case .failure(let refusal): return refusal.reason
    case .success(nil): return index.copy(key)?.isComplete == true ? nil : "the copy could not be made"
    case .success(let made?): copy = made
    }
    return await withCheckedContinuation { (ended: CheckedContinuation<String?, Never>) in
      endWaiters.withLock { $0[ObjectIdentifier(copy), default: []].append(ended) }
      // It may have ended before the wait was registered: then no one else wakes it.
      if index.copy(key)?.filling !== copy {
        let mine = endWaiters.withLock { $0.removeValue(forKey: ObjectIdentifier(copy)) } ?? []
        let outcome = index.copy(key)?.isComplete == true ? nil : copy.failure
        for waiter in mine { waiter.resume(returning: outcome) }
        return
      }
      copy.startFilling()
    }
  }

  /// Makes the complete copy of `source` at `generation` the copy of `name` at
  /// `metadata.generation` too, when they are the same bytes (size and CRC32C, and MD5 where
  /// both have one): a file renamed through the mount keeps its copy under the new name, and
  /// the new generation the server made of it takes that copy rather than fetching it again.
  /// A hard link, so no byte is written; its block checksums are the source's, which the same
  /// bytes have. True when `name` has a complete copy at that generation now.
  package func adopt(_ name: String, metadata: StorageMetadata, from source: String, generation: Int64) -> Bool {
    let key = index.key(name, metadata.generation)
    if index.copy(key)?.isComplete == true { return true }
    guard index.isAbsent(key), let original = index.copy(index.key(source, generation)), original.isComplete,
      let checksums = original.checksums, Self.sameBytes(original.metadata, metadata)
    else {
      // Another adopter of the same version may have finished since the first look: the copy
      // is there, which is what was asked.
      return index.copy(key)?.isComplete == true
    }
    let paths = index.paths(key)
    let partial = index.newPartialPath(key)
    guard link(original.dataPath, partial) == 0 else { return false }
    guard rename(partial, paths.data.path) == 0 else {
      unlink(partial)
      return false
    }
    // The side file after the rename, as for any copy: a crash between leaves a data file no
    // side file names, which the next mount removes.
    let identity = CopyIdentity.of(path: paths.data.path)
    let copy = LocalCopy.complete(name: name, metadata: metadata, dataPath: paths.data.path, checksums: checksums, identity: identity)
    guard index.writeSideFile(copy, checksums: checksums, identity: identity) else {
      unlink(paths.data.path)
      return false
    }
    return index.added(key, copy) || index.copy(key)?.isComplete == true
  }

  /// Whether two object versions hold the same bytes, as far as their hashes tell.
  private static func sameBytes(_ a: StorageMetadata, _ b: StorageMetadata) -> Bool {
    guard a.size == b.size, let crc = a.crc32c, crc == b.crc32c else { return false }
    if let x = a.md5Hash, let y = b.md5Hash { return x == y }
    return true
  }

  /// A copy being filled completed (`failure` nil) or was given up: the pins waiting for it go on.
  private func copyEnded(_ copy: PartialCopy, failure: String?) {
    let waiting = endWaiters.withLock { $0.removeValue(forKey: ObjectIdentifier(copy)) } ?? []
    for waiter in waiting { waiter.resume(returning: failure) }
  }

  /// Removes the copy of `name` at `generation` unless it is open or pinned: a version a pin
  /// kept until the next was verified, or an object deleted from a pinned folder.
  package func removeUnused(_ name: String, generation: Int64) {
    let key = index.key(name, generation)
    guard let copy = index.removeIfUnused(key) else { return }
    removeFiles(key)
    log("staging: removed \(copy.name) (generation \(generation)): no pin keeps it")
  }

  /// Every complete copy (full name, generation), for a pin to find versions it no longer keeps.
  package func completeCopies(where wanted: (String) -> Bool) -> [(name: String, generation: Int64)] {
    index.completeCopies(where: wanted)
  }

  /// Makes the copies written so far last across a power loss (one syncfs of their disk): a pin
  /// is recorded complete only after it.
  package func syncCopies() {
    let fd = open(folder.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    guard fd >= 0 else { return }
    defer { close(fd) }
    // Glibc's module map leaves syncfs(2) out (it is a GNU extension): found at run time.
    typealias SyncFS = @convention(c) (Int32) -> Int32
    if let symbol = dlsym(dlopen(nil, RTLD_NOW), "syncfs") {
      _ = unsafeBitCast(symbol, to: SyncFS.self)(fd)
    } else {
      sync()
    }
  }

  // MARK: reading a complete copy

  /// Bytes `offset..<offset+count` of a complete staged copy, after checking the checksum of
  /// every block they touch. Nil when the object is not staged completely, or when the copy
  /// turned out damaged (it is then dropped). Partial copies answer through `PartialCopy`.
  package func read(_ name: String, generation: Int64, offset: Int64, count: Int) -> ReadReply? {
    let key = index.key(name, generation)
    guard var copy = index.use(key) else { return nil }
    if copy.checksums == nil {
      // Made by a version that kept no block checksums: verified whole once.
      guard let checked = checkWhole(key, copy) else { return nil }
      copy = checked
    }
    guard let file = openFile(key, copy) else { return nil }
    switch CopyVerification.read(copy, file: file, offset: offset, count: count) {
    case .success(let reply):
      return reply
    case .failure(let damage):
      drop(key, reason: damage.reason)
      return nil
    }
  }

  /// The descriptor of complete copy `name` at `generation` for the kernel to read by itself
  /// (passthrough), which checks no block: only while its file is the one last verified
  /// (`CopyIdentity`). A copy that changed since, or was never seen as verified, is verified
  /// whole first; one that no longer matches the object is dropped. Nil: not complete, damaged,
  /// or changing while it was checked (its reads then go through the daemon, which checks them).
  package func verifiedFile(_ name: String, generation: Int64) -> FileDescriptor? {
    let key = index.key(name, generation)
    guard let copy = index.use(key), let file = openFile(key, copy), let now = CopyIdentity.of(file) else { return nil }
    if now == copy.identity { return file }
    // Read back whole; one written to meanwhile (its identity moved) is not handed over this time.
    guard let checked = checkWhole(key, copy), checked.identity == now else { return nil }
    return file
  }

  /// The shared descriptor of complete copy `key`; nil (the copy dropped) when it cannot be opened.
  private func openFile(_ key: String, _ copy: LocalCopy) -> FileDescriptor? {
    let dataPath = copy.dataPath
    let file = index.openFile(key) {
      let fd = open(dataPath, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
      return fd >= 0 ? FileDescriptor(fd) : nil
    }
    if file == nil { drop(key, reason: "it cannot be opened: \(String(cString: strerror(errno)))") }
    return file
  }

  /// Complete copy `key` read back whole against the object's hash: the copy with its new
  /// checksums and identity (kept in its side file), or nil when it no longer matches (dropped).
  private func checkWhole(_ key: String, _ copy: LocalCopy) -> LocalCopy? {
    let before = CopyIdentity.of(path: copy.dataPath)
    guard let checksums = CopyVerification.checkWhole(path: copy.dataPath, metadata: copy.metadata) else {
      drop(key, reason: "it does not match the object's hash")
      return nil
    }
    // A file that changed while it was read is not known as verified.
    let identity = CopyIdentity.of(path: copy.dataPath) == before ? before : nil
    var checked = copy
    checked.checked(checksums, identity: identity)
    index.checked(key, checksums, identity: identity)
    if !index.writeSideFile(checked, checksums: checksums, identity: identity) { log("staging: cannot write the index of \(copy.name)") }
    return checked
  }

  // MARK: complete → absent

  /// Forgets a damaged copy and removes its files.
  private func drop(_ key: String, reason: String) {
    guard let copy = index.removed(key) else { return }
    removeFiles(key)
    dropped.add(1, ordering: .relaxed)
    log("staging: dropped the staged copy of \(copy.name) (generation \(copy.metadata.generation)): \(reason)")
  }

  /// Removes least recently used copies of files that are not open until under the limit.
  func evictIfNeeded() {
    for (key, copy) in index.evict(toFit: sizeLimit) {
      removeFiles(key)
      evicted.add(1, ordering: .relaxed)
      log("staging: evicted \(copy.name) (\(copy.metadata.size) bytes)")
    }
  }

  private func removeFiles(_ key: String) {
    let paths = index.paths(key)
    unlink(paths.data.path)
    unlink(paths.side.path)
  }

  // MARK: what the mount shows, and open counts

  package func status(_ name: String, generation: Int64, size: Int64) -> Status {
    let key = index.key(name, generation)
    switch index.copy(key)?.state {
    case .complete?: return index.isPinned(key) ? .pinned : .complete
    case .filling(let partial)?:
      let percent = size > 0 ? Int(partial.bytesPresent * 100 / size) : 0
      return .partial(percent: min(99, percent))
    case nil: return .none
    }
  }

  /// The metadata of `name`'s complete copy of `generation`, if there is one.
  package func completeCopy(_ name: String, generation: Int64) -> StorageMetadata? {
    guard let copy = index.copy(index.key(name, generation)), case .complete = copy.state else { return nil }
    return copy.metadata
  }

  /// Bytes and count of complete copies.
  package var totals: (bytes: Int64, files: Int) { index.totals }
  /// Complete copies evicted to stay within the size limit, and dropped as damaged (a block that
  /// did not match its checksum, a file changed or cut short), since the mount started.
  package let evicted = Atomic<Int>(0)
  package let dropped = Atomic<Int>(0)

  /// Open files are never evicted.
  package func retain(_ name: String, generation: Int64) { index.retain(index.key(name, generation)) }

  package func release(_ name: String, generation: Int64) {
    index.release(index.key(name, generation))
    evictIfNeeded()
  }

  /// Changes whenever a copy comes or goes: what is made of `completeEntries` holds until then.
  package var version: UInt64 { index.version }

  /// The newest complete copy of each object, for offline use.
  package func completeEntries() -> [ObjectName: Entry] { index.newestComplete().mapValues(\.entry) }

  /// Stops every download in progress (at unmount).
  package func cancelAll() { index.filling.forEach { $0.breakCopy(.abandoned) } }
}
