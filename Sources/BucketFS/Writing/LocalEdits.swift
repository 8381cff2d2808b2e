import Foundation
import StorageCore
import Synchronization

/// The staging folder's room that files open for writing take beyond the queue's own bytes:
/// each edit's length, or, while the kernel writes one (which the daemon cannot refuse write
/// by write), the room set aside for it. `staging_size` bounds the two together.
final class StagingRoom: Sendable {
  private let taken = Atomic<Int64>(0)
  var bytes: Int64 { taken.load(ordering: .relaxed) }
  func add(_ delta: Int64) { if delta != 0 { taken.add(delta, ordering: .relaxed) } }
}

/// Files open for writing. Each is a private local file in the queue's folder that every handle
/// of the name shares; a close queues a copy of its bytes (`WriteBackQueue.upload`), and the
/// last close removes it. The map's lock and an edit's own are never held together.
final class LocalEdits: Sendable {
  final class Edit: Sendable {
    /// The edit's private file, and whether its bytes were handed to the queue (linked there at
    /// a close, no copy made): then the next write or truncation first moves the edit to a copy
    /// of its own (copy-on-write), so the queued bytes never change.
    private struct Backing {
      var file: FileDescriptor
      var path: String
      var handedOver = false
      /// The file is an overlay (`EditOverlay`) whose holes this fill makes whole.
      var fill: BaseFill? = nil
    }
    private let backing: Mutex<Backing>
    /// The queue's disk: the copies this edit makes of its file are made through it.
    private let disk: any QueueDisk
    var file: FileDescriptor { backing.withLock { $0.file } }
    var path: String { backing.withLock { $0.path } }
    /// The fill of the file's holes while it is an overlay over its base version.
    var fill: BaseFill? { backing.withLock { $0.fill } }
    /// Held while the bytes are queued: two closes of one file at once must queue them in the
    /// order they were taken, or an older version could land last. Held across disk I/O
    /// (docs/design.md, "Locks"); only closes of this file wait on it.
    let closing = Mutex(())
    /// Held while a write or truncation changes the bytes (an `O_APPEND` write finds the end and
    /// writes there, so two appenders never write at the same end), and while a close hands
    /// them to the queue, so that no write lands in bytes being handed over. Taken after
    /// `closing`, never before it.
    let writing = Mutex(())

    private struct State {
      var name: String
      var base: PendingChange.Base
      /// Where it stands with the queue: changed, queued, failed, gone (`EditPhase`).
      var phase: EditPhase
      var mtime: Timestamp?
      var contentType: String?
      var custom: [String: String] = [:]
      /// The bytes' CRC32C as their writes gave it, while it can be known.
      var checksum = WrittenChecksum.unknown
      /// What it counts against `staging_size` in `room` now.
      var counted: Int64 = 0
      var writers = Writers.daemon
      /// Whether the writes only appended, and to what (`AppendWatch`); the queued change
      /// the edit opened on, if any.
      var appends = AppendWatch(startLength: nil)
      var startedOn: UInt64?
      /// The watch as it was before the last take, for `undoTake`.
      var appendsBeforeTake: AppendWatch?
    }

    /// Who writes the file: the daemon, a request per write; or the kernel itself, by
    /// passthrough into this very file (a new file's creator, `BucketFilesystem.create`), so
    /// that the daemon sees no write and knows the bytes only by reading the file.
    enum Writers {
      case daemon
      /// `handles`: the handles that may write while the kernel does (the creator's, and writers
      /// that joined it); `uploads`: those whose record holds this very file while they write
      /// (closes made them; no worker takes them until the last writer is gone); `current`: the
      /// one a close rewrites (nil after a rename or an fsync's copy: the next close queues anew).
      case kernel(handles: Int, uploads: [UInt64], current: UInt64?)
    }

    /// What a close queues: the name, its base, and the metadata the bytes go with.
    struct Changes {
      var name: String
      var base: PendingChange.Base
      var mtime: Timestamp?
      var contentType: String?
      var custom: [String: String]

      /// The content type the upload goes with: the one set, else the name's.
      var uploadContentType: String { contentType ?? ContentType.infer(fromName: name) }
      /// The custom metadata the upload goes with (nil: none).
      var uploadCustom: [String: String]? { custom.isEmpty ? nil : custom }
    }

    private let state: Mutex<State>
    private let room: StagingRoom

    init(
      file: FileDescriptor, path: String, name: String, base: PendingChange.Base, dirty: Bool, fill: BaseFill? = nil, disk: any QueueDisk,
      room: StagingRoom = StagingRoom()
    ) {
      backing = Mutex(Backing(file: file, path: path, fill: fill))
      self.disk = disk
      state = Mutex(State(name: name, base: base, phase: .open(changed: dirty)))
      self.room = room
    }

    /// The edit started from `length` bytes of what it is based on (nil: it cut them, `O_TRUNC`),
    /// those of queued change `startedOn` when it opened on one.
    func watchAppends(startLength: Int64?, startedOn: UInt64?) {
      state.withLock { s in
        s.appends = AppendWatch(startLength: startLength)
        s.startedOn = startedOn
      }
    }

    /// A handle that may write opened the edit (`appending`: with `O_APPEND`).
    func writerOpened(appending: Bool) { state.withLock { $0.appends.writerOpened(appending: appending) } }

    /// What this edit counts against `staging_size` now.
    var countedBytes: Int64 { state.withLock { $0.counted } }

    /// Counts the file's length now (after a write or a truncation); while the kernel writes
    /// it, the room set aside for that stays counted instead.
    func countLength() {
      let size = self.size
      let delta = state.withLock { s -> Int64 in
        if case .kernel = s.writers { return 0 }
        defer { s.counted = size }
        return size - s.counted
      }
      room.add(delta)
    }

    /// Counts `bytes` (the room the kernel's writes may take), or nothing (the bytes are the
    /// queue's, or the edit is done with).
    private func count(_ bytes: Int64, _ s: inout State) {
      room.add(bytes - s.counted)
      s.counted = bytes
    }

    /// The last handle let go: the edit takes no room any more.
    func countNothing() { state.withLock { count(0, &$0) } }

    /// Hands the bytes to the queue (`take` links the file there): held against writes while it
    /// runs; once it returned, the file is the queue's and a write goes to a copy first.
    func handOver<T>(_ take: (_ file: FileDescriptor, _ path: String, _ fill: BaseFill?) throws(FSError) -> T) throws(FSError) -> T {
      try writing.withLock { _ throws(FSError) -> T in
        let (file, path, fill) = backing.withLock { ($0.file, $0.path, $0.fill) }
        let result = try take(file, path, fill)
        // While the kernel writes the file, no copy may take its place: its writes would miss
        // it. The queue holds the bytes back until then (`leaveWriter`).
        if !writtenByKernel { backing.withLock { $0.handedOver = true } }
        return result
      }
    }

    /// From now on the kernel writes the file by passthrough (a new, empty edit's creator):
    /// what the writes made is known only by reading it.
    func beginKernelWrites(room reserved: Int64) -> Bool {
      state.withLock { s in
        guard case .daemon = s.writers else { return false }
        s.writers = .kernel(handles: 1, uploads: [], current: nil)
        s.checksum = .unknown
        s.appends.kernelWrites()
        count(reserved, &s)
        return true
      }
    }

    /// The kernel would not write the file after all (`beginKernelWrites` undone, before any
    /// write or close).
    func endKernelWrites() {
      state.withLock { s in
        s.writers = .daemon
        count(0, &s)
      }
    }

    var writtenByKernel: Bool { state.withLock { if case .kernel = $0.writers { true } else { false } } }

    /// Runs `change` (times, metadata) while the kernel's writers hold the file, under `closing`:
    /// the last writer's release takes it with the bytes, as a close does. False, and nothing
    /// run, when none is left (the caller queues the change itself).
    func whileKernelWrites(_ change: () -> Void) -> Bool {
      closing.withLock { _ in
        guard writtenByKernel else { return false }
        change()
        return true
      }
    }

    /// A writer joins while the kernel writes the file: false when it does not (the writer
    /// writes through the daemon, as any other).
    func joinKernelWriters() -> Bool {
      state.withLock { s in
        guard case .kernel(let n, let uploads, let current) = s.writers else { return false }
        s.writers = .kernel(handles: n + 1, uploads: uploads, current: current)
        return true
      }
    }

    /// A writer the kernel writes for closed (or fsynced) the file: what it wrote is not seen
    /// here, so the bytes count as changed. A time set on them stays theirs (the kernel's writes
    /// may be older than it).
    func mayHaveChangedByKernel() { state.withLock { $0.phase.change() } }

    /// The upload a close of the file the kernel writes rewrites, if any.
    var openUpload: UInt64? { state.withLock { if case .kernel(_, _, let current) = $0.writers { current } else { nil } } }

    /// `sequence` holds the file while the kernel writes it, and later closes rewrite it (nil:
    /// the next close queues anew).
    func setOpenUpload(_ sequence: UInt64?) {
      state.withLock { s in
        guard case .kernel(let n, var uploads, _) = s.writers else { return }
        if let sequence, !uploads.contains(sequence) { uploads.append(sequence) }
        s.writers = .kernel(handles: n, uploads: uploads, current: sequence)
      }
    }

    /// A writer that joined the kernel's writes is gone. The last one ends them: the file is the
    /// queue's from now on (a write copies it first), and the uploads that hold it are
    /// returned (and the one closes rewrote), for the queue to take what the file holds and let
    /// them go; nil while other writers are left.
    func leaveWriter() -> (uploads: [UInt64], current: UInt64?)? {
      writing.withLock { _ in
        let left = state.withLock { s -> (uploads: [UInt64], current: UInt64?)? in
          guard case .kernel(let n, let uploads, let current) = s.writers else { return nil }
          if n > 1 {
            s.writers = .kernel(handles: n - 1, uploads: uploads, current: current)
            return nil
          }
          // What the kernel wrote was never seen here: a later write must not extend a CRC
          // that leaves it out.
          s.writers = .daemon
          s.checksum = .unknown
          // Its bytes are the queue's now (sealed there), counted as queued bytes.
          count(0, &s)
          return (uploads, current)
        }
        if let left, !left.uploads.isEmpty { backing.withLock { $0.handedOver = true } }
        return left
      }
    }

    /// The file to change, with `writing` held: the edit's own, made by copying the queued one
    /// (or empty, `keeping` false) when the bytes were handed over.
    func ownFile(keeping: Bool = true) throws(FSError) -> FileDescriptor {
      let current = backing.withLock { $0 }
      guard current.handedOver else { return current.file }
      // Beside the file it copies: that folder is there while the file is.
      let (file, path) = try LocalEdits.newFile(in: (current.path as NSString).deletingLastPathComponent, disk: disk)
      var fill: BaseFill? = nil
      if keeping {
        do throws(FSError) {
          // An overlay's copy is one too: its holes come from the queued file's as they fill.
          if let overlaid = current.fill { fill = try overlaid.copy(into: file.fd) } else { _ = try disk.copyAll(from: current.file.fd, to: file.fd) }
        } catch {
          _ = disk.unlink(path)
          throw error
        }
      }
      backing.withLock { $0 = Backing(file: file, path: path, fill: fill) }
      // The queue holds its own link to the old file.
      _ = disk.unlink(current.path)
      return file
    }

    /// Truncates (or extends) the bytes to `size`, copy-on-write.
    func truncate(to size: Int64) throws(FSError) {
      try writing.withLock { _ throws(FSError) in
        let file = try ownFile(keeping: size > 0)
        let cut = { ftruncate(file.fd, off_t(size)) == 0 }
        let done = try fill.map { fill throws(FSError) in
          try fill.change { overlay in
            guard cut() else { return false }
            overlay.truncated(to: size)
            return true
          }
        } ?? cut()
        state.withLock { $0.appends.touched(from: size) }
        guard done else {
          state.withLock { $0.checksum = .unknown }
          throw FSError(errno)
        }
        state.withLock { $0.checksum.truncated(to: size) }
      }
      changed()
      countLength()
    }

    /// Writes `bytes` at `offset` into the edit's own file (with `writing` held): with the fill
    /// held off while the file is an overlay, whose written ranges it notes. What `pwrite` returned.
    func put(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(FSError) -> Int {
      let file = try ownFile()
      let write = { pwrite(file.fd, bytes.baseAddress, bytes.count, off_t(offset)) }
      guard let fill else { return write() }
      return try fill.change { overlay in
        let n = write()
        if n > 0 { overlay.wrote(offset..<offset + Int64(n)) }
        return n
      }
    }

    /// `bytes` were written at `offset` (with `writing` held): the running CRC32C follows.
    /// While the kernel writes the file too, its writes are not seen here: the CRC stays
    /// unknown (a writer that joined it writes through the daemon beside them).
    func wrote(_ bytes: UnsafeRawBufferPointer, at offset: Int64) {
      let size = { [self] in self.size }
      state.withLock { s in
        s.appends.touched(from: offset)
        if case .kernel = s.writers {
          s.checksum = .unknown
        } else {
          s.checksum.wrote(bytes, at: offset, sizeAfter: size)
        }
      }
    }

    /// The CRC32C of the bytes, when their writes gave it and the file is still `size` long.
    func writtenCRC32C(size: Int64) -> UInt32? { state.withLock { $0.checksum.value(forSize: size) } }

    var name: String { state.withLock { $0.name } }
    var mtime: Timestamp? { state.withLock { $0.mtime } }
    /// The custom metadata the bytes will go with.
    var custom: [String: String] { state.withLock { $0.custom } }
    var lastQueued: UInt64? { state.withLock { $0.phase.lastQueued } }
    /// What the edit's next queued bytes are based on: the version it started from, or (once
    /// it queued bytes) the queue's last change of its name.
    var base: PendingChange.Base { state.withLock { $0.base } }
    /// The edit's file is still the one its last close handed to the queue: no write or
    /// truncation since (either would have made it a file of its own first).
    var bytesAreQueued: Bool { backing.withLock { $0.handedOver } }
    /// Something of it is not queued yet (bytes, a time, metadata).
    var isDirty: Bool { state.withLock { $0.phase.isChanged } }
    /// The bytes changed: their time is the file's own again (a time set before is past).
    func changed() {
      state.withLock { s in
        s.phase.change()
        s.mtime = nil
      }
    }
    func setMtime(_ t: Timestamp) {
      state.withLock { s in
        s.mtime = t
        s.phase.change()
      }
    }
    /// `user.content_type` / `user.meta.KEY` set while the bytes are local: they go with them.
    func setMetadata(contentType: String?, custom: [String: String]) {
      state.withLock { s in
        if let contentType { s.contentType = contentType }
        s.custom.merge(custom) { _, new in new }
        s.phase.change()
      }
    }
    /// Metadata the edit started from (a queued version's), kept unless set again.
    func startMetadata(contentType: String?, custom: [String: String]?, mtime: Timestamp? = nil) {
      state.withLock { s in
        s.contentType = contentType
        s.custom = custom ?? [:]
        if let mtime { s.mtime = mtime }
      }
    }
    /// Unlinked while open: its bytes are queued no more.
    func unlinked() { state.withLock { $0.phase.unlinked() } }
    /// Renamed while open: later closes queue its bytes under the new name, based on what the
    /// rename queued there.
    func renamed(to name: String) {
      state.withLock { s in
        s.name = name
        s.base = .previous
        // The upload under the old name still holds the file (sealed with the rest at the
        // end, then deleted by the rename); the next close queues one under the new name.
        if case .kernel(let n, let uploads, _) = s.writers { s.writers = .kernel(handles: n, uploads: uploads, current: nil) }
      }
    }
    /// What a close would queue now, left to be taken.
    var pendingChanges: Changes? {
      state.withLock { s in
        guard s.phase.isChanged else { return nil }
        return Changes(name: s.name, base: s.base, mtime: s.mtime, contentType: s.contentType, custom: s.custom)
      }
    }

    /// What to queue now, if anything changed since the last time.
    func takeChanges() -> Changes? {
      state.withLock { s in
        guard s.phase.take() else { return nil }
        s.appendsBeforeTake = nil
        return Changes(name: s.name, base: s.base, mtime: s.mtime, contentType: s.contentType, custom: s.custom)
      }
    }

    /// Where the bytes a close hands to the queue count as appended from. Called with `writing`
    /// held (in `handOver`'s hand-over), so that no write falls between what is measured and
    /// what is queued.
    func takeAppended() -> AppendedBytes {
      let length = size
      return state.withLock { s in
        s.appendsBeforeTake = s.appends
        var appended = s.appends.take(length: length)
        appended.startedOn = s.startedOn
        appended.lastQueued = s.phase.lastQueued
        return appended
      }
    }

    func undoTake() {
      state.withLock { s in
        s.phase.untake()
        if let before = s.appendsBeforeTake { s.appends = before }
      }
    }
    /// A write to the file failed with `errno`.
    func writeFailed(_ errno: Int32) {
      state.withLock { s in
        s.phase.writeFailed(errno)
        s.checksum = .unknown
      }
    }
    var failedWrite: Int32? { state.withLock { $0.phase.failure } }
    /// After a failed write: the upload to take back, so that the version before stays (none
    /// once an fsync of the file returned: what it returned is kept).
    var withdrawable: UInt64? { state.withLock { $0.phase.withdrawable } }
    /// An fsync of the file returned.
    func fsynced() { state.withLock { $0.phase.fsynced() } }
    func queued(_ sequence: UInt64) { state.withLock { $0.phase.queued(sequence) } }

    /// The file's status, its descriptor held meanwhile (a write may move the edit to a copy
    /// of its own and close this one: by number alone, another file's).
    private var status: stat? {
      let file = self.file
      var st = stat()
      return withExtendedLifetime(file) { fstat(file.fd, &st) == 0 ? st : nil }
    }

    var size: Int64 { status.map { Int64($0.st_size) } ?? 0 }
    var modified: Timestamp {
      if let m = mtime { return m }
      guard let st = status else { return Timestamp.now() }
      return Timestamp(st.st_mtim)
    }
  }

  private struct Open {
    /// Keyed by the name's bytes: two spellings `String` takes for one are two objects, two edits.
    var byName: [[UInt8]: Edit] = [:]
    /// The name each edit in `byName` is under.
    var names: [ObjectIdentifier: [UInt8]] = [:]
    /// Handles open on each edit, those detached from their name too.
    var handles: [ObjectIdentifier: Int] = [:]

    mutating func unname(_ edit: Edit) {
      guard let key = names.removeValue(forKey: ObjectIdentifier(edit)) else { return }
      if byName[key] === edit { byName.removeValue(forKey: key) }
    }
  }
  private let open = Mutex(Open())
  let folder: URL
  /// The room the open edits take beyond the queue's bytes.
  let room = StagingRoom()

  /// The queue's disk (`QueueDisk`): edit files are made, copied and removed through it.
  let disk: any QueueDisk

  private let folders: EditFolders

  /// Whether an edit's file can be linked into the queue's folder (the same file system, one
  /// that has hard links). Where it cannot, a close copies the bytes, so an edit is never an
  /// overlay (`EditOverlay`): its holes would have to be filled, from the bucket, before the
  /// close could copy them, and a close never waits on the network.
  let linksIntoQueue: Bool

  init(folder: URL, disk: any QueueDisk) {
    self.folder = folder
    self.disk = disk
    folders = EditFolders(in: folder, disk: disk)
    linksIntoQueue = Self.canLink(from: folders, into: folder.path, disk: disk)
  }

  private static func canLink(from folders: EditFolders, into queue: String, disk: any QueueDisk) -> Bool {
    guard let (file, path) = try? newFile(in: folders.next(), disk: disk) else { return false }
    defer { _ = disk.unlink(path) }
    _ = file
    let probe = queue + "/link-probe-\(getpid())"
    _ = disk.unlink(probe)
    guard disk.link(path, probe) == 0 else { return false }
    _ = disk.unlink(probe)
    return true
  }

  subscript(name: String) -> Edit? { open.withLock { $0.byName[Array(name.utf8)] } }

  /// Every edit open under a name.
  var all: [Edit] { open.withLock { Array($0.byName.values) } }

  /// Whether a file whose name starts with `prefix` is open for writing.
  func anyOpen(under prefix: String) -> Bool {
    let key = Array(prefix.utf8)
    return open.withLock { $0.byName.keys.contains { $0.starts(with: key) } }
  }

  /// The edit of `name` with one more handle, if it is open.
  func join(_ name: String) -> Edit? {
    open.withLock { o in
      guard let edit = o.byName[Array(name.utf8)] else { return nil }
      o.handles[ObjectIdentifier(edit), default: 0] += 1
      return edit
    }
  }

  /// The edit of `name`, joined (one more handle) if open, else made by `make`. Nil, and
  /// nothing kept, when none is open and `current` says the new one's start went stale (asked
  /// under the map's lock, so that no other edit of the name can come and go in between).
  func open(_ name: String, current: () -> Bool = { true }, make: () throws(FSError) -> Edit) throws(FSError) -> Edit? {
    if let edit = join(name) { return edit }
    let key = Array(name.utf8)
    let edit = try make()
    let winner = open.withLock { o -> Edit? in
      if let other = o.byName[key] {
        o.handles[ObjectIdentifier(other), default: 0] += 1
        return other
      }
      guard current() else { return nil }
      o.byName[key] = edit
      o.names[ObjectIdentifier(edit)] = key
      o.handles[ObjectIdentifier(edit), default: 0] += 1
      return edit
    }
    if winner !== edit { _ = disk.unlink(edit.path) }
    return winner
  }

  /// Whether more than one handle has `edit` open.
  func isShared(_ edit: Edit) -> Bool { open.withLock { ($0.handles[ObjectIdentifier(edit)] ?? 0) > 1 } }

  /// A new private file for an edit.
  func newFile() throws(FSError) -> (FileDescriptor, String) { try Self.newFile(in: folders.next(), disk: disk) }

  /// A new private file in folder `folder` (an `EditFolders` one, or the queue's).
  static func newFile(in folder: String, disk: any QueueDisk) throws(FSError) -> (FileDescriptor, String) {
    // Named by this process and a count, not a UUID (which read /dev/urandom for every file);
    // O_EXCL makes a name left by an earlier process, with the same number, be passed over.
    let prefix = folder + "/edit-\(getpid())-"
    while true {
      let path = prefix + String(editFiles.add(1, ordering: .relaxed).newValue)
      let fd = disk.open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
      if fd < 0 && errno == EEXIST { continue }
      guard fd >= 0 else { throw FSError(errno) }
      return (FileDescriptor(fd), path)
    }
  }

  private static let editFiles = Atomic<Int>(0)

  /// The handle is closed; the last one removes the edit.
  func close(_ edit: Edit) {
    let last = open.withLock { o -> Bool in
      let id = ObjectIdentifier(edit)
      let left = (o.handles[id] ?? 1) - 1
      guard left <= 0 else {
        o.handles[id] = left
        return false
      }
      o.handles.removeValue(forKey: id)
      o.unname(edit)
      return true
    }
    guard last else { return }
    edit.countNothing()
    // Its file's holes are filled for the queue only: none of its bytes went there.
    if edit.lastQueued == nil { edit.fill?.abandon() }
    _ = disk.unlink(edit.path)
  }

  /// The name was unlinked while the file is still open (a process's close reaches us before
  /// its release): the edit leaves the map at once, so the name shows as gone and a new file of
  /// that name starts anew; the open handles keep writing to the edit's own file.
  func detach(_ edit: Edit) {
    edit.unlinked()
    open.withLock { $0.unname(edit) }
  }

  /// The edit of `from`, open elsewhere too, follows a rename to `to`: its later closes queue
  /// under the new name.
  func move(_ edit: Edit, from: String, to: String) {
    guard open.withLock({ $0.byName[Array(from.utf8)] === edit }) else { return }
    edit.renamed(to: to)
    open.withLock { o in
      guard o.byName[Array(from.utf8)] === edit else { return }
      o.byName.removeValue(forKey: Array(from.utf8))
      o.byName[Array(to.utf8)] = edit
      o.names[ObjectIdentifier(edit)] = Array(to.utf8)
    }
  }

  /// A name being edited whose bytes differ from `name`'s but that `String` takes for the same
  /// (canonically equal): nil when there is none.
  func otherSpelling(of name: String) -> String? {
    open.withLock { o in
      o.byName.keys.lazy.map { String(decoding: $0, as: UTF8.self) }.first { $0 == name && !Namespace.sameBytes($0, name) }
    }
  }

  /// Names with an edit directly in folder `dir` ("" or ending in "/").
  func names(in dir: String) -> [ObjectName: Edit] {
    open.withLock { o in
      var out: [ObjectName: Edit] = [:]
      for (key, edit) in o.byName where key.starts(with: dir.utf8) {
        let rest = key.dropFirst(dir.utf8.count)
        if !rest.contains(UInt8(ascii: "/")) { out[ObjectName(String(decoding: rest, as: UTF8.self))] = edit }
      }
      return out
    }
  }
}
