// The changes a writable mount has accepted and the bucket does not have yet, in the order they
// were made. A change is on disk (fsynced, its folder too) before the operation that made it
// returns, so it survives `kill -9` and a power loss; workers carry the changes out (each name's
// in order), each with a precondition naming the generation it was based on, so nothing is
// overwritten or deleted that the change did not see. While the server cannot be reached the
// changes wait; a new mount of the same bucket and staging folder picks them up.
//
// A change whose base moved on the server is not forced: an upload goes beside the object under
// a conflict name (`NAME.conflict-YYYYMMDDTHHMMSSZ`), a delete is dropped; both are logged.
import Foundation
import StorageCore
import Synchronization

package final class WriteBackQueue: Sendable {
  /// What a name looks like from the changes still queued for it.
  enum LocalView: Sendable, Equatable {
    case file(dataPath: String, size: Int64, mtime: Double)
    /// A version the server will copy here; its bytes are the source object's.
    case copied(PendingChange.Source, mtime: Double)
    case folder
    case deleted

    /// Size and modification time of a file the queue puts there.
    var fileAttributes: (size: Int64, mtime: Double)? {
      switch self {
      case .file(_, let size, let mtime): (size, mtime)
      case .copied(let source, let mtime): (source.size, mtime)
      case .folder, .deleted: nil
      }
    }
  }

  /// How a wait for a change ended.
  enum Outcome: Sendable, Equatable {
    case applied
    /// Our bytes went beside the object (`conflictName`).
    case conflict
    case failed(String)
    /// The server cannot be reached; the change is safe on disk and waits.
    case waiting(String)
  }

  private struct State {
    var changes: [UInt64: PendingChange] = [:]
    var next: UInt64 = 1
    /// Why the change at the head last failed to go out (the server gone, say).
    var lastError: String?
    var applied = 0
    var conflicts = 0
    /// What the last change carried out of each name left there (nil: it went beside, a
    /// conflict), for a change based on "whatever the queue left" made after it was done.
    /// Keyed by the name's bytes: two spellings `String` takes for one are two objects.
    var produced: [[UInt8]: Int64?] = [:]
    /// The last spelling of each name (a folder's without its "/") queued by this mount, keyed
    /// by `String`, which takes canonically equal spellings for one key: how a new name finds
    /// another spelling of itself that this mount wrote, done or not.
    var spellings: [String: String] = [:]
    /// When each change queued by this mount may start (see `settle`).
    var readyAt: [UInt64: ContinuousClock.Instant] = [:]
    /// Bytes of the queued uploads.
    var bytes: Int64 = 0
    var sizes: [UInt64: Int64] = [:]
    /// How changes that left the queue ended, for a wait that looks after they left (an fsync
    /// must learn of a conflict, not take a missing record for success); the latest 10,000.
    var ended: [UInt64: Ending] = [:]
    /// What `damaged` holds; it changes only when a mount reads the queue.
    var damagedCount = 0
  }

  /// How a change left the queue.
  enum Ending: Equatable {
    case finished(Outcome)
    /// A newer upload of the name took its place before it started: wait for that one.
    case replaced(by: UInt64)
  }

  let folder: URL
  let damaged: DamagedRecords
  private let state = Mutex(State())
  private let log: @Sendable (String) -> Void
  private let onApplied = Mutex<(@Sendable (PendingChange, StorageMetadata?) -> Void)?>(nil)

  init(folder: URL, log: @escaping @Sendable (String) -> Void) throws {
    self.folder = folder
    self.damaged = DamagedRecords(queueFolder: folder)
    self.log = log
    try PrivateFolder.make(folder)
    try load()
  }

  // MARK: on disk

  private func dataPath(_ change: PendingChange) -> String { folder.appendingPathComponent(change.fileName + ".data").path }
  private func recordPath(_ change: PendingChange) -> String { folder.appendingPathComponent(change.fileName + ".json").path }

  private func load() throws {
    let fm = FileManager.default
    var changes: [UInt64: PendingChange] = [:]
    // An upload's bytes wait under NNN.data.tmp until its record is on disk: with the record,
    // the close got as far as its last rename, which is finished here; without, it never
    // queued anything, and the bytes go.
    for file in (try? fm.contentsOfDirectory(atPath: folder.path)) ?? [] where file.hasSuffix(".data.tmp") {
      let stem = String(file.dropLast(".data.tmp".count))
      let path = folder.appendingPathComponent(file).path
      if fm.fileExists(atPath: folder.appendingPathComponent(stem + ".json").path) {
        _ = rename(path, folder.appendingPathComponent(stem + ".data").path)
      } else {
        unlink(path)
      }
    }
    let files = (try? fm.contentsOfDirectory(atPath: folder.path)) ?? []
    func setAside(_ paths: [String], _ reason: String) {
      damaged.setAside(paths, reason: reason)
      log("write-back: \(reason); kept aside in \(damaged.folder.path), not carried out")
    }
    for file in files.sorted() {
      let path = folder.appendingPathComponent(file).path
      if file.hasSuffix(".tmp") {
        unlink(path)
        continue
      }
      guard file.hasSuffix(".json") else { continue }
      let stem = String(file.dropLast(5))
      let bytesPath = folder.appendingPathComponent(stem + ".data").path
      guard let data = fm.contents(atPath: path), let change = try? JSONDecoder().decode(PendingChange.self, from: data) else {
        setAside([path, bytesPath], "record \(file) cannot be read (truncated or damaged)")
        continue
      }
      guard change.fileName == stem else {
        setAside([path], "record \(file) is change \(change.sequence)'s (a copy of another record)")
        continue
      }
      if change.kind == .upload && change.state != .done {
        if !fm.fileExists(atPath: dataPath(change)) {
          setAside([path], "\(TerminalText.visible(change.name)) (change \(change.sequence)) lost its bytes")
          continue
        }
        if let size = change.dataSize, let crc = change.dataCRC32C,
          BlockChecksums.compute(path: dataPath(change), size: size, md5: false)?.1.value != crc
        {
          setAside([path, dataPath(change)], "the bytes of \(TerminalText.visible(change.name)) (change \(change.sequence)) are not the \(size) bytes queued")
          continue
        }
      }
      changes[change.sequence] = change
    }
    // Bytes no record owns (a record deleted by hand): kept, never uploaded under a guess.
    for file in files where file.hasSuffix(".data") {
      let stem = String(file.dropLast(5))
      if !files.contains(stem + ".json") {
        setAside([folder.appendingPathComponent(file).path], "\(file) has no record")
      }
    }
    var sizes: [UInt64: Int64] = [:]
    for change in changes.values where change.kind == .upload {
      var st = stat()
      if stat(dataPath(change), &st) == 0 { sizes[change.sequence] = Int64(st.st_size) }
    }
    let damagedCount = damaged.count
    state.withLock { s in
      s.changes = changes
      s.damagedCount = damagedCount
      s.sizes = sizes
      s.bytes = sizes.values.reduce(0, +)
      s.next = (changes.keys.max() ?? 0) + 1
      for key in changes.keys where changes[key]!.state == .started { s.changes[key]!.state = .pending }
      for change in changes.values.sorted(by: { $0.sequence < $1.sequence }) {
        s.spellings[Self.spellingKey(change.name)] = Self.spellingKey(change.name)
        if change.state == .done { s.produced[Array(change.name.utf8)] = .some(change.produced) }
      }
    }
    // Changes that were done when the last mount ended: their successors learn the generation.
    for done in changes.values.filter({ $0.state == .done }).sorted(by: { $0.sequence < $1.sequence }) {
      finish(done)
    }
    let count = state.withLock { $0.changes.count }
    if count > 0 { log("write-back: \(count) changes from an earlier mount are queued") }
  }

  /// Writes `change`'s record durably (temporary name, fsync, rename, fsync of the folder).
  private func persist(_ change: PendingChange) throws(FSError) {
    guard let data = try? JSONEncoder().encode(change) else { throw FSError(EIO) }
    let final = recordPath(change)
    // A name of this writer's own: two threads may write one change's record at once (a
    // session opened while the change finishes), and a shared temporary name lost one of them.
    let temporary = final + "." + String(UInt64.random(in: 0...UInt64.max), radix: 36) + ".tmp"
    do throws(FSError) {
      try Self.writeDurably(data, to: temporary)
    } catch {
      unlink(temporary)
      throw error
    }
    guard rename(temporary, final) == 0 else {
      let e = errno
      unlink(temporary)
      throw FSError(e)
    }
    syncFolder()
  }

  static func writeDurably(_ data: Data, to path: String) throws(FSError) {
    unlink(path)
    let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
    guard fd >= 0 else { throw FSError(errno) }
    defer { close(fd) }
    let written = data.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    guard written == data.count else { throw FSError(written < 0 ? errno : ENOSPC) }
    guard fsync(fd) == 0 else { throw FSError(errno) }
  }

  private func syncFolder() {
    let fd = open(folder.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    guard fd >= 0 else { return }
    fsync(fd)
    close(fd)
  }

  private func remove(_ change: PendingChange) {
    unlink(dataPath(change))
    unlink(recordPath(change))
    state.withLock { s in
      if let gone = s.changes.removeValue(forKey: change.sequence), s.ended[change.sequence] == nil {
        s.ended[change.sequence] = .finished(gone.conflictName == nil ? .applied : .conflict)
        if s.ended.count > 10_000, let oldest = s.ended.keys.min() { s.ended.removeValue(forKey: oldest) }
      }
      s.readyAt.removeValue(forKey: change.sequence)
      s.bytes -= s.sizes.removeValue(forKey: change.sequence) ?? 0
    }
  }

  // MARK: making changes

  private func nextSequence() -> UInt64 {
    state.withLock { s in
      defer { s.next += 1 }
      return s.next
    }
  }

  /// Queues the bytes of open file `fd` as the next version of `name`. `base` is what the change
  /// is based on when no earlier change of the name is queued (then it is the previous one's
  /// result). An upload of the name still waiting its turn is replaced: only the last bytes go.
  @discardableResult
  func upload(
    _ name: String, from fd: Int32, contentType: String, mtime: Double?, custom: [String: String]? = nil, base: PendingChange.Base
  ) throws(FSError) -> UInt64 {
    let sequence = nextSequence()
    var change = PendingChange(sequence: sequence, kind: .upload, name: name, base: base, contentType: contentType, mtime: mtime, custom: custom)
    let data = dataPath(change)
    let temporary = data + ".tmp"
    let size = try Self.copyDurably(from: fd, to: temporary)
    // Read back from the page cache, so that the record vouches for the bytes on disk.
    guard let crc = BlockChecksums.compute(path: temporary, size: size, md5: false)?.1.value else {
      unlink(temporary)
      throw FSError(EIO)
    }
    change.dataSize = size
    change.dataCRC32C = crc
    try add(&change, size: size, bytesAt: temporary)
    return sequence
  }

  /// Queues a server-side copy of `source` as the next version of `name` (a rename where the
  /// bucket copies): nothing local is needed, so it works with the server away too.
  @discardableResult
  func copy(
    _ name: String, from source: PendingChange.Source, contentType: String?, mtime: Double?, custom: [String: String]?, base: PendingChange.Base
  ) throws(FSError) -> UInt64 {
    var change = PendingChange(
      sequence: nextSequence(), kind: .copy, name: name, base: base, contentType: contentType, mtime: mtime, custom: custom)
    change.source = source
    try add(&change)
    return change.sequence
  }

  /// Queues the placeholder of folder `path` (an empty object named `path/`), with `custom`
  /// entries (the folder's mode, owner and times); one that is there already gets them instead.
  func folder(_ path: String, custom: [String: String] = [:]) throws(FSError) {
    let empty = open("/dev/null", O_RDONLY | O_CLOEXEC)
    guard empty >= 0 else { throw FSError(errno) }
    defer { close(empty) }
    try upload(path + "/", from: empty, contentType: "application/x-directory", mtime: nil, custom: custom.isEmpty ? nil : custom, base: .generation(0))
  }

  /// Queues `custom` entries for folder `path`'s placeholder, which is made if there is none
  /// (a folder that only has objects under it): chmod, chown and times of a folder.
  @discardableResult
  func folderMetadata(_ path: String, custom: [String: String]) throws(FSError) -> UInt64 {
    try metadata(path + "/", contentType: nil, custom: custom, base: .any)
  }

  /// Queues new metadata (content type, custom entries) for `name` as it is in the bucket.
  @discardableResult
  func metadata(_ name: String, contentType: String?, custom: [String: String], base: PendingChange.Base) throws(FSError) -> UInt64 {
    let sequence = nextSequence()
    var change = PendingChange(sequence: sequence, kind: .metadata, name: name, base: base, contentType: contentType, custom: custom)
    try add(&change)
    return sequence
  }

  /// Queues the deletion of `name` (a folder placeholder when it ends with "/").
  @discardableResult
  func delete(_ name: String, base: PendingChange.Base) throws(FSError) -> UInt64 {
    let sequence = nextSequence()
    var change = PendingChange(sequence: sequence, kind: .delete, name: name, base: base)
    try add(&change)
    return sequence
  }

  /// Adds `change` to the queue: its record on disk, then (an upload) its bytes under their final
  /// name, then the queue's view. In that order, bytes under a final name always have a record:
  /// a crash before the record leaves only a temporary file, removed at the next mount, and one
  /// between the two renames is finished there.
  private func add(_ change: inout PendingChange, size: Int64 = 0, bytesAt temporary: String? = nil) throws(FSError) {
    // An earlier upload of the name that has not started is replaced by this change, which
    // takes over its base; any other earlier change of the name is this one's base.
    let (replaced, hasEarlier) = state.withLock { s -> (PendingChange?, Bool) in
      let earlier = s.changes.values.filter { Namespace.sameBytes($0.name, change.name) && $0.sequence < change.sequence }
      guard let last = earlier.max(by: { $0.sequence < $1.sequence }) else {
        // Based on a change that is done by now: on what it left.
        if change.base == .previous, let left = s.produced[Array(change.name.utf8)], let generation = left { change.base = .generation(generation) }
        return (nil, false)
      }
      if last.kind.putsVersion && last.state == .pending && change.kind.putsVersion {
        s.changes[last.sequence]!.state = .done  // taken: the worker must not start it now
        s.ended[last.sequence] = .replaced(by: change.sequence)
        return (last, earlier.count > 1)
      }
      return (nil, true)
    }
    if let replaced {
      change.base = replaced.base
    } else if hasEarlier {
      change.base = .previous
    }
    do throws(FSError) {
      try persist(change)
      if let temporary {
        guard rename(temporary, dataPath(change)) == 0 else {
          let e = errno
          unlink(recordPath(change))
          throw FSError(e)
        }
        syncFolder()
      }
    } catch {
      if let replaced {
        state.withLock { s in
          s.changes[replaced.sequence]?.state = .pending
          s.ended.removeValue(forKey: replaced.sequence)
        }
      }
      if let temporary { unlink(temporary) }
      throw error
    }
    state.withLock { s in
      s.changes[change.sequence] = change
      s.spellings[Self.spellingKey(change.name)] = Self.spellingKey(change.name)
      s.readyAt[change.sequence] = .now + Self.settle
      s.sizes[change.sequence] = size
      s.bytes += size
    }
    if let replaced { remove(replaced) }
  }

  /// Bytes of the queued uploads (they count against the staging folder's size and are never
  /// evicted).
  var queuedBytes: Int64 { state.withLock { $0.bytes } }

  /// Copies what `fd` holds into a new file at `path`, fsynced; returns its size.
  @discardableResult
  static func copyDurably(from fd: Int32, to path: String) throws(FSError) -> Int64 {
    unlink(path)
    let out = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
    guard out >= 0 else { throw FSError(errno) }
    defer { close(out) }
    let size: Int64
    do throws(FSError) {
      size = try copyAll(from: fd, to: out)
    } catch {
      unlink(path)
      throw error
    }
    guard fsync(out) == 0 else {
      let e = errno
      unlink(path)
      throw FSError(e)
    }
    return size
  }

  /// Everything `input` holds into `output` from its start (in the kernel: sendfile); returns
  /// how many bytes that was.
  @discardableResult
  static func copyAll(from input: Int32, to output: Int32) throws(FSError) -> Int64 {
    var st = stat()
    guard fstat(input, &st) == 0 else { throw FSError(errno) }
    guard ftruncate(output, 0) == 0, lseek(output, 0, SEEK_SET) == 0 else { throw FSError(errno) }
    var offset = off_t(0)
    var left = Int64(st.st_size)
    while left > 0 {
      let n = sendfile(output, input, &offset, Int(min(left, 1 << 30)))
      if n < 0 && errno == EINTR { continue }
      guard n > 0 else { throw FSError(n < 0 ? errno : EIO) }
      left -= Int64(n)
    }
    return Int64(st.st_size)
  }

  // MARK: what the mount shows

  private static func spellingKey(_ name: String) -> String { name.hasSuffix("/") ? String(name.dropLast()) : name }

  /// A spelling of `name` with other bytes that `String` takes for the same (canonically
  /// equal), queued by this mount: nil when there is none.
  func otherSpelling(of name: String) -> String? {
    state.withLock { s in s.spellings[name].flatMap { Namespace.sameBytes($0, name) ? nil : $0 } }
  }

  /// `name` as the queued changes leave it: nil when no change of it is queued.
  func view(_ name: String) -> LocalView? {
    let found = state.withLock { s -> (PendingChange, Int64)? in
      s.changes.values.filter {
        Namespace.sameBytes($0.name, name) && $0.state != .done && $0.conflictName == nil && $0.kind != .metadata
      }
      .max(by: { $0.sequence < $1.sequence }).map { ($0, s.sizes[$0.sequence] ?? 0) }
    }
    guard let (last, size) = found else { return nil }
    if last.kind == .delete { return .deleted }
    if name.hasSuffix("/") { return .folder }
    if let source = last.source { return .copied(source, mtime: last.mtime ?? 0) }
    return .file(dataPath: dataPath(last), size: size, mtime: last.mtime ?? 0)
  }

  /// The content type and custom metadata the last queued upload of `name` goes with.
  func queuedMetadata(_ name: String) -> (contentType: String?, custom: [String: String]?)? {
    state.withLock { s in
      s.changes.values.filter { Namespace.sameBytes($0.name, name) && $0.kind.putsVersion && $0.state != .done }.max { $0.sequence < $1.sequence }
        .map { ($0.contentType, $0.custom) }
    }
  }

  /// What the metadata changes still queued for `name` set (in queue order): an edit that
  /// starts from the bucket's object starts from these too, or its upload would undo them.
  func pendingMetadata(_ name: String) -> (contentType: String?, custom: [String: String]) {
    state.withLock { s in
      var out: (contentType: String?, custom: [String: String]) = (nil, [:])
      for change in s.changes.values.sorted(by: { $0.sequence < $1.sequence })
      where change.kind == .metadata && change.state != .done && Namespace.sameBytes(change.name, name) {
        if let type = change.contentType { out.contentType = type }
        out.custom.merge(change.custom ?? [:]) { _, new in new }
      }
      return out
    }
  }

  /// Whether some name under `prefix` is last changed by an upload (a file or placeholder this
  /// mount is putting there).
  func hasUploads(under prefix: String) -> Bool {
    state.withLock { s in
      var last: [String: PendingChange] = [:]
      for change in s.changes.values where change.name.hasPrefix(prefix) && change.state != .done && change.kind != .metadata {
        if let other = last[change.name], other.sequence > change.sequence { continue }
        last[change.name] = change
      }
      return last.values.contains { $0.kind.putsVersion && $0.conflictName == nil }
    }
  }

  /// Names with queued changes directly in folder `dir` ("" or ending in "/").
  func names(in dir: String) -> Set<String> {
    state.withLock { s in
      var out = Set<String>()
      // A metadata change leaves a name as it is.
      for change in s.changes.values where change.name.hasPrefix(dir) && change.state != .done && change.kind != .metadata {
        let rest = change.name.dropFirst(dir.count)
        guard let first = rest.split(separator: "/", omittingEmptySubsequences: false).first, !first.isEmpty else { continue }
        // "a/b" in dir "" makes folder "a" appear; "a/" is the placeholder of folder "a".
        out.insert(rest.contains("/") ? String(first) + "/" : String(first))
      }
      return out
    }
  }

  /// `user.sync_state` of `name`: nil when nothing of it is queued (synced).
  func syncState(_ name: String) -> (state: String, error: String?)? {
    state.withLock { s in
      let mine = s.changes.values.filter { Namespace.sameBytes($0.name, name) && $0.state != .done }
      guard let last = mine.max(by: { $0.sequence < $1.sequence }) else { return nil }
      if last.state == .failed { return ("failed", last.error) }
      if mine.contains(where: { $0.state == .started }) { return ("uploading", nil) }
      let head = s.changes.values.filter { $0.state == .pending || $0.state == .started }.min(by: { $0.sequence < $1.sequence })
      return ("pending", head.map { Namespace.sameBytes($0.name, name) } == true ? s.lastError : nil)
    }
  }

  /// Changes queued (not failed), their bytes, those that failed for good, and the records set
  /// aside as damaged.
  var totals: QueueTotals {
    let (changes, applied, conflicts, bytes, damaged) = state.withLock {
      ($0.changes.values.filter { $0.state != .done }, $0.applied, $0.conflicts, $0.bytes, $0.damagedCount)
    }
    let failed = changes.filter { $0.state == .failed }.count
    return QueueTotals(changes: changes.count - failed, bytes: bytes, failed: failed, applied: applied, conflicts: conflicts, damaged: damaged)
  }

  /// What is left, one line per change, for `bucketfs sync`.
  func describe() -> String {
    let (changes, lastError) = state.withLock { ($0.changes.values.filter { $0.state != .done }.sorted { $0.sequence < $1.sequence }, $0.lastError) }
    var lines: [String] = []
    for (i, c) in changes.enumerated() {
      // One change a line whatever its name holds (a record from before names with line breaks
      // were refused; escapes that would retitle or clear a terminal).
      var line = "\(c.kind.rawValue)\t\(TerminalText.visible(c.name))\t\(c.state.rawValue)"
      if let error = c.error ?? (i == 0 ? lastError : nil) { line += "\t" + TerminalText.visible(error) }
      lines.append(line)
    }
    return lines.joined(separator: "\n") + (lines.isEmpty ? "" : "\n")
  }

  /// Waits until change `sequence` is carried out, fails, or cannot be for lack of a server.
  func wait(for first: UInt64, within seconds: Double) async -> Outcome {
    let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
    var sequence = first
    while true {
      let (ending, change, lastError, isHead) = state.withLock { s -> (Ending?, PendingChange?, String?, Bool) in
        let head = s.changes.values.filter { $0.state != .done && $0.state != .failed }.min { $0.sequence < $1.sequence }
        return (s.ended[sequence], s.changes[sequence], s.lastError, head?.sequence == sequence)
      }
      switch ending {
      case .finished(let outcome): return outcome
      case .replaced(let newer):
        sequence = newer
        continue
      case nil: break
      }
      // Neither queued nor ended here: carried out by an earlier mount.
      guard let change else { return .applied }
      // No worker (an offline mount): nothing will carry it out while this mount lives.
      if onApplied.withLock({ $0 == nil }) { return .waiting("the mount is offline") }
      switch change.state {
      case .done: return change.conflictName == nil ? .applied : .conflict
      case .failed: return .failed(change.error ?? "refused")
      default: break
      }
      // The server is away (the last attempt said so): the change is safe on disk, and waits.
      if let lastError, isHead || change.state == .pending { return .waiting(lastError) }
      if ContinuousClock.now >= deadline { return .waiting(lastError ?? "not carried out yet") }
      try? await Task.sleep(for: .milliseconds(20))
    }
  }

  // MARK: carrying changes out

  /// Starts the worker. `applied` is told each change carried out (with the object's new
  /// attributes after an upload), so that the mount's caches show the bucket as it is now.
  func start(client: any ObjectClient, applied: @escaping @Sendable (PendingChange, StorageMetadata?) -> Void) {
    onApplied.withLock { $0 = applied }
    // They live as long as the mount's process.
    for _ in 0..<Self.workers {
      Task.detached { [self] in
        var backoff = 0.25
        while !Task.isCancelled {
          guard let change = takeNext() else {
            try? await Task.sleep(for: .milliseconds(25))
            continue
          }
          switch await carryOut(change, client: client) {
          case .applied:
            backoff = 0.25
            state.withLock { $0.lastError = nil }
          case .retryLater(let reason):
            state.withLock { s in
              s.changes[change.sequence]?.state = .pending
              s.lastError = reason
            }
            try? await Task.sleep(for: .milliseconds(Int(backoff * 1000)))
            backoff = min(backoff * 2, 15)
          }
        }
      }
    }
  }

  /// How long a new upload waits before it may start: a shell's `>` closes the file once before
  /// the command writes it, and an editor may close it twice; a newer copy queued within this
  /// time replaces the waiting one, so such a file goes up once.
  static let settle: Duration = .milliseconds(50)

  /// Changes carried out at once: a bucket 20 ms away takes a round trip or more per change, so
  /// one at a time would leave a folder copied into the mount waiting for minutes (as many as
  /// `bucketfs cp -r` uploads at once).
  static let workers = 16

  /// The oldest change that can go now, marked started. Changes of one name go in order, and
  /// uploads and deletes do not pass each other (a rename is an upload, then a delete, and the
  /// old name must not go before the new one is there); uploads of different names go at once,
  /// and so do deletes.
  private func takeNext() -> PendingChange? {
    state.withLock { s in
      let unfinished = s.changes.values.filter { $0.state == .pending || $0.state == .started }.sorted { $0.sequence < $1.sequence }
      var names = Set<String>()
      var uploadBefore = false
      var deleteBefore = false
      let now = ContinuousClock.now
      for change in unfinished {
        let free = !names.contains(change.name) && (change.kind.putsVersion ? !deleteBefore : !uploadBefore)
        let settled = s.readyAt[change.sequence].map { $0 <= now } ?? true
        if change.state == .pending && free && settled {
          s.readyAt.removeValue(forKey: change.sequence)
          s.changes[change.sequence]!.state = .started
          return s.changes[change.sequence]
        }
        names.insert(change.name)
        if change.kind.putsVersion { uploadBefore = true } else { deleteBefore = true }
        if uploadBefore && deleteBefore { break }
      }
      return nil
    }
  }

  /// How one try at a change ended, for its worker: carried out (or given up on for good and
  /// recorded), or to be tried again after a pause.
  private enum Carried {
    case applied(StorageMetadata?)
    case retryLater(String)
  }

  private func carryOut(_ change: PendingChange, client: any ObjectClient) async -> Carried {
    if change.name.hasSuffix("/") && change.kind == .metadata { return await carryOutFolderMetadata(change, client: client) }
    let base: Int64?
    var toConflict = false
    switch change.base {
    case .generation(let g): base = g
    case .any: base = nil
    case .previous:
      // What the previous change of the name left (it may have finished just before this one
      // was added); nothing, when it went beside the object: then this one follows it there.
      if let left = state.withLock({ $0.produced[Array(change.name.utf8)] }), let generation = left {
        base = generation
      } else {
        base = nil
        toConflict = true
      }
    }
    do throws(BucketError) {
      // Based on a change that went beside the object: this one is not carried out on it.
      if toConflict && change.kind.putsVersion { return try await conflict(change, client: client) }
      if toConflict { return try done(change, produced: nil, skipped: "it changed on the server since it was read") }
      switch change.kind {
      case .upload:
        var custom = change.custom ?? [:]
        if let mtime = change.mtime { custom["mtime"] = Self.rfc3339(mtime) }
        // The session goes on disk with the change as soon as the server opens it.
        let session = UploadSession(url: change.sessionURL) { [self] url in
          var kept = change
          kept.sessionURL = url
          kept.state = .pending
          try? persist(kept)
          state.withLock { $0.changes[change.sequence]?.sessionURL = url }
        }
        let m = try await client.upload(
          change.name, file: dataPath(change), contentType: change.contentType ?? ContentType.infer(fromName: change.name),
          custom: custom, ifGenerationMatch: base, session: session)
        return try done(change, produced: m.generation, metadata: m)
      case .copy:
        let m = try await copied(change, to: change.name, ifGenerationMatch: base, client: client)
        return try done(change, produced: m.generation, metadata: m)
      case .metadata:
        let m = try await client.updateMetadata(change.name, contentType: change.contentType, custom: change.custom ?? [:], ifGenerationMatch: base)
        return try done(change, produced: m.generation, metadata: m)
      case .delete:
        if let copy = failedCopy(of: change.name) {
          // A rename whose copy the bucket refused: the old name keeps the only bytes there are.
          return try done(change, produced: nil, skipped: "its copy to \(copy.name.debugDescription) was refused, so it stays")
        }
        do throws(BucketError) {
          try await client.delete(change.name, ifGenerationMatch: base)
        } catch where error.code == .objectNotFound {
          // Gone already: what the change wanted.
        }
        return try done(change, produced: 0)
      }
    } catch where error.code == .objectNotFound && change.kind == .copy {
      let source = change.source.map { "\($0.name.debugDescription) (generation \($0.generation))" } ?? "the source"
      return failedOrLater(
        change, BucketError(code: .objectNotFound, object: change.name, detail: "\(source) is no longer in the bucket: it changed or was deleted there"))
    } catch where error.code == .preconditionFailed {
      if change.name.hasSuffix("/") {
        // A folder placeholder someone else made (or removed) meanwhile: the folder is as
        // wanted, and gets the entries this one carried.
        guard change.kind == .upload, let custom = change.custom, !custom.isEmpty else { return (try? done(change, produced: nil)) ?? .applied(nil) }
        var asMetadata = change
        asMetadata.kind = .metadata
        return await carryOutFolderMetadata(asMetadata, client: client)
      }
      if change.kind == .copy, let found = try? await client.metadata(of: change.name), found.holdsBytes(of: change.source) {
        // A retried copy whose first try went through: the name holds what the copy put there.
        let m = await keepTime(change, found, at: change.name, client: client)
        return (try? done(change, produced: m.generation, metadata: m)) ?? .applied(m)
      }
      if change.kind == .upload, let found = try? await client.metadata(of: change.name),
        found.holdsBytes(ofFile: dataPath(change))
      {
        // An upload whose answer was lost (a reset, a stall, kill -9 before the answer): the
        // retry's precondition fails on the version the first try made. The name holds our
        // bytes, so it is done, not a conflict.
        return (try? done(change, produced: found.generation, metadata: found)) ?? .applied(found)
      }
      if !change.kind.putsVersion {
        return (try? done(change, produced: nil, skipped: "it changed on the server since it was read")) ?? .applied(nil)
      }
      do throws(BucketError) {
        return try await conflict(change, client: client)
      } catch {
        return failedOrLater(change, error)
      }
    } catch {
      return failedOrLater(change, error)
    }
  }

  /// A folder's mode, owner or times (`change.custom`) on its placeholder, whatever version is
  /// there (a placeholder has no bytes to lose); a folder without one gets one. A placeholder
  /// removed or made meanwhile is tried again the other way.
  private func carryOutFolderMetadata(_ change: PendingChange, client: any ObjectClient) async -> Carried {
    let custom = change.custom ?? [:]
    var lastError = BucketError(code: .internalError, object: change.name, detail: "the placeholder kept changing")
    for _ in 0..<3 {
      do throws(BucketError) {
        let m = try await client.updateMetadata(change.name, contentType: nil, custom: custom, ifGenerationMatch: nil)
        return (try? done(change, produced: m.generation, metadata: m)) ?? .applied(m)
      } catch where error.code == .objectNotFound {
        lastError = error
      } catch {
        return failedOrLater(change, error)
      }
      // The placeholder's (empty) bytes beside the record, removed with it.
      let empty = open(dataPath(change), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
      guard empty >= 0 else { return failedOrLater(change, BucketError(code: .unknown, object: change.name, detail: "cannot write to the queue: errno \(errno)")) }
      close(empty)
      do throws(BucketError) {
        let m = try await client.upload(
          change.name, file: dataPath(change), contentType: "application/x-directory", custom: custom, ifGenerationMatch: 0, session: nil)
        return (try? done(change, produced: m.generation, metadata: m)) ?? .applied(m)
      } catch where error.code == .preconditionFailed {
        lastError = error
      } catch {
        return failedOrLater(change, error)
      }
    }
    return failedOrLater(change, lastError)
  }

  /// A copy from `name` that failed for good, if any.
  private func failedCopy(of name: String) -> PendingChange? {
    state.withLock { s in s.changes.values.first { $0.kind == .copy && $0.state == .failed && $0.source.map { Namespace.sameBytes($0.name, name) } == true } }
  }

  /// `change` is carried out (or, with `skipped`, given up on with a log line saying why).
  private func done(
    _ change: PendingChange, produced: Int64?, metadata: StorageMetadata? = nil, skipped: String? = nil
  ) throws(BucketError) -> Carried {
    if let skipped {
      let what = change.kind == .delete ? "\(change.name.debugDescription) not deleted" : "metadata of \(change.name.debugDescription) not changed"
      log("write-back: \(what): \(skipped)")
    }
    var record = change
    record.produced = produced
    try finishDurably(record, metadata)
    return .applied(metadata)
  }

  /// Our bytes beside the object, whose version in the bucket was not the one they were based on.
  private func conflict(_ change: PendingChange, client: any ObjectClient) async throws(BucketError) -> Carried {
    var custom = change.custom ?? [:]
    custom["bucketfs-conflict-of"] = change.name
    if let mtime = change.mtime { custom["mtime"] = Self.rfc3339(mtime) }
    let stamped = Self.conflictName(change.name, at: Date())
    // The stamped name, else (taken by a conflict in the same second) one more random suffix.
    var target = stamped
    var m: StorageMetadata
    while true {
      do throws(BucketError) {
        if change.kind == .copy {
          m = try await copied(change, to: target, ifGenerationMatch: 0, client: client)
        } else {
          m = try await client.upload(
            target, file: dataPath(change), contentType: change.contentType ?? ContentType.infer(fromName: change.name), custom: custom,
            ifGenerationMatch: 0, session: nil)
        }
        break
      } catch where error.code == .preconditionFailed && target == stamped {
        target += "-" + String(UInt32.random(in: 0...UInt32.max), radix: 36)
      }
    }
    log("write-back: \(change.name.debugDescription) changed on the server since it was read; our version is \(target.debugDescription)")
    var done = change
    done.produced = nil
    done.conflictName = target
    state.withLock { $0.conflicts += 1 }
    try? finishDurably(done, m)
    return .applied(m)
  }

  /// Carries out the server-side copy of `change` to `target`. The copy takes the source's
  /// metadata; a source that kept no time of its own gets the one the mount showed.
  private func copied(_ change: PendingChange, to target: String, ifGenerationMatch: Int64?, client: any ObjectClient) async throws(BucketError)
    -> StorageMetadata
  {
    guard let source = change.source else { throw BucketError(code: .internalError, object: change.name, detail: "a copy without a source") }
    let m = try await client.copy(source.name, generation: source.generation, to: target, ifGenerationMatch: ifGenerationMatch)
    return await keepTime(change, m, at: target, client: client)
  }

  /// A copy whose source kept no time of its own gets the one the mount showed (best effort:
  /// the bytes are in place either way).
  private func keepTime(_ change: PendingChange, _ m: StorageMetadata, at target: String, client: any ObjectClient) async -> StorageMetadata {
    guard let mtime = change.mtime, m.customMetadata?["mtime"] == nil else { return m }
    return (try? await client.updateMetadata(target, contentType: nil, custom: ["mtime": Self.rfc3339(mtime)], ifGenerationMatch: m.generation)) ?? m
  }

  private func failedOrLater(_ change: PendingChange, _ error: BucketError) -> Carried {
    // The server's word on the request itself (a refused name, a denied write) is final; the
    // server away, a transient status or a broken connection is not.
    // StorageCore's one rule for statuses a retry may cure, and 401 (fresh credentials may).
    let transient = error.httpStatus.map { Backoff.isRetryable(status: $0) || $0 == 401 } ?? true
    if ErrnoMapping.isServerGone(error) || (transient && (error.code == .unknown || error.code == .unauthenticated)) {
      return .retryLater(error.detail)
    }
    var failed = change
    failed.state = .failed
    failed.error = error.detail
    try? persist(failed)
    state.withLock { $0.changes[change.sequence] = failed }
    log("write-back: \(change.kind.rawValue) of \(change.name.debugDescription) refused: \(error.detail); kept in \(folder.path)")
    return .applied(nil)
  }

  private func finishDurably(_ done: PendingChange, _ metadata: StorageMetadata? = nil) throws(BucketError) {
    var record = done
    record.state = .done
    do throws(FSError) {
      try persist(record)
    } catch {
      // The bucket has the change; only the record of it could not be written.
      log("write-back: cannot record that \(done.name.debugDescription) was written: errno \(error.errno)")
    }
    // The mount's caches learn the bucket's answer before the queue stops showing the change.
    if let applied = onApplied.withLock({ $0 }) { applied(record, metadata) }
    state.withLock { s in
      // Under one lock: a change of the same name may start as soon as this one reads as done,
      // and must find what it left.
      s.changes[done.sequence] = record
      s.produced[Array(done.name.utf8)] = .some(done.produced)
    }
    finish(record)
  }

  /// A done change: the changes of the same name based on it get its generation, then it goes.
  private func finish(_ done: PendingChange) {
    let successors = state.withLock { s -> [PendingChange] in
      s.applied += 1
      guard let next = s.changes.values.filter({ Namespace.sameBytes($0.name, done.name) && $0.sequence > done.sequence && $0.state != .done })
        .min(by: { $0.sequence < $1.sequence }), next.base == .previous
      else { return [] }
      return [next]
    }
    for var next in successors {
      if let produced = done.produced {
        next.base = .generation(produced)
        try? persist(next)
        state.withLock { $0.changes[next.sequence]?.base = next.base }
      }
      // No generation (a conflict): `.previous` stays, and sends the change beside the object too.
    }
    remove(done)
  }

  static func conflictName(_ name: String, at date: Date) -> String {
    let f = DateFormatter()
    f.locale = Locale(identifier: "en_US_POSIX")
    f.timeZone = TimeZone(identifier: "UTC")
    f.dateFormat = "yyyyMMdd'T'HHmmss'Z'"
    return name + ".conflict-" + f.string(from: date)
  }

  static func rfc3339(_ seconds: Double) -> String {
    // RFC 3339 has four-digit years; a time set past them (touch -d @9223372036854775807) is
    // kept as the nearest one it can write, never a crash on the conversion.
    let seconds = seconds.isFinite ? min(max(seconds, -62_135_596_800), 253_402_300_799) : 0
    let whole = Int(seconds.rounded(.down))
    let nanos = Int(((seconds - Double(whole)) * 1e9).rounded())
    var t = time_t(whole)
    var parts = tm()
    gmtime_r(&t, &parts)
    return String(
      format: "%04d-%02d-%02dT%02d:%02d:%02d.%09dZ", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday, parts.tm_hour,
      parts.tm_min, parts.tm_sec, nanos)
  }
}
