@testable import BucketFS
import Foundation
import Synchronization
import Testing

/// The queue's file operations, recorded as they are made (`QueueDisk`), and every state a power
/// loss could leave replayed from them: what an fsync covered is there, and of what it did not,
/// any prefix in the order it was made. A new queue is opened on each state, as a remount
/// would: every change whose call returned is there with its exact bytes, no name would be
/// uploaded twice as two versions, and no damaged record is read as good.
@Suite struct CrashStateTests {
  /// One file operation, by path, and by the file (inode) it touched.
  enum Operation: Equatable {
    case create(path: String, file: Int)
    /// The file's whole contents after a write or a copy.
    case contents(file: Int, Data)
    case fsync(file: Int)
    case rename(from: String, to: String)
    /// A second name for the file `from` names.
    case link(from: String, to: String)
    case unlink(path: String)
    case syncFolder(String)
    /// A folder made (`rmdir` is an unlink of its path): what is in it lasts only with it.
    case makeFolder(String)
  }

  /// `SystemDisk`, recording what it does; its folder syncs fail while `failFolderSyncs` is set.
  final class RecordingDisk: QueueDisk, @unchecked Sendable {
    private struct State {
      var operations: [Operation] = []
      var files: [String: Int] = [:]
      var descriptors: [Int32: Int] = [:]
      var nextFile = 1
      var failFolderSyncs = false
    }
    private let state = Mutex(State())
    private let system = SystemDisk()

    var operations: [Operation] { state.withLock { $0.operations } }
    func failFolderSyncs(_ fail: Bool) { state.withLock { $0.failFolderSyncs = fail } }

    private func contents(_ fd: Int32) -> Data {
      var out = Data()
      var buffer = [UInt8](repeating: 0, count: 1 << 16)
      var offset: off_t = 0
      while true {
        let n = pread(fd, &buffer, buffer.count, offset)
        if n <= 0 { return out }
        out.append(contentsOf: buffer[0..<n])
        offset += off_t(n)
      }
    }

    func open(_ path: String, _ flags: Int32, _ mode: mode_t) -> Int32 {
      let existed = access(path, F_OK) == 0
      // Read too, so that what a write left can be recorded.
      let fd = system.open(path, flags & O_ACCMODE == O_WRONLY ? (flags & ~O_ACCMODE) | O_RDWR : flags, mode)
      guard fd >= 0 else { return fd }
      state.withLock { s in
        if !existed || s.files[path] == nil {
          let file = s.nextFile
          s.nextFile += 1
          s.files[path] = file
          s.operations.append(.create(path: path, file: file))
        }
        s.descriptors[fd] = s.files[path]
        if flags & O_TRUNC != 0, let file = s.files[path] { s.operations.append(.contents(file: file, Data())) }
      }
      return fd
    }

    func write(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Int {
      let n = system.write(fd, bytes)
      let now = contents(fd)
      state.withLock { s in if let file = s.descriptors[fd] { s.operations.append(.contents(file: file, now)) } }
      return n
    }

    func pwrite(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, at offset: Int64) -> Int {
      let n = system.pwrite(fd, bytes, at: offset)
      let now = contents(fd)
      state.withLock { s in if let file = s.descriptors[fd] { s.operations.append(.contents(file: file, now)) } }
      return n
    }

    func truncate(_ fd: Int32, to size: Int64) -> Int32 {
      let result = system.truncate(fd, to: size)
      let now = contents(fd)
      state.withLock { s in if let file = s.descriptors[fd] { s.operations.append(.contents(file: file, now)) } }
      return result
    }

    func makeFolder(_ path: String, _ mode: mode_t) -> Int32 {
      let result = system.makeFolder(path, mode)
      if result == 0 { state.withLock { $0.operations.append(.makeFolder(path)) } }
      return result
    }

    func removeFolder(_ path: String) -> Int32 {
      let result = system.removeFolder(path)
      if result == 0 { state.withLock { $0.operations.append(.unlink(path: path)) } }
      return result
    }

    func lock(_ fd: Int32) -> Int32 { system.lock(fd) }

    func copyAll(from input: Int32, to output: Int32) throws(FSError) -> Int64 {
      let n = try system.copyAll(from: input, to: output)
      let now = contents(output)
      state.withLock { s in if let file = s.descriptors[output] { s.operations.append(.contents(file: file, now)) } }
      return n
    }

    func fsync(_ fd: Int32) -> Int32 {
      let result = system.fsync(fd)
      if result == 0 { state.withLock { s in if let file = s.descriptors[fd] { s.operations.append(.fsync(file: file)) } } }
      return result
    }

    func close(_ fd: Int32) {
      state.withLock { _ = $0.descriptors.removeValue(forKey: fd) }
      system.close(fd)
    }

    func rename(_ from: String, _ to: String) -> Int32 {
      let result = system.rename(from, to)
      if result == 0 {
        state.withLock { s in
          s.files[to] = s.files.removeValue(forKey: from)
          s.operations.append(.rename(from: from, to: to))
        }
      }
      return result
    }

    func link(_ from: String, _ to: String) -> Int32 {
      let result = system.link(from, to)
      if result == 0 {
        state.withLock { s in
          s.files[to] = s.files[from]
          s.operations.append(.link(from: from, to: to))
        }
      }
      return result
    }

    func unlink(_ path: String) -> Int32 {
      let result = system.unlink(path)
      if result == 0 {
        state.withLock { s in
          s.files.removeValue(forKey: path)
          s.operations.append(.unlink(path: path))
        }
      }
      return result
    }

    func syncFolder(_ dir: String) throws(FSError) {
      if state.withLock({ $0.failFolderSyncs }) { throw FSError(EIO) }
      try system.syncFolder(dir)
      state.withLock { $0.operations.append(.syncFolder(dir)) }
    }
  }

  /// The states a power loss after the first `cut` operations could leave: the operations an
  /// fsync (of the file, or of the folder for names) covered before the cut, and of the others
  /// any prefix of the names' operations (creates, renames, unlinks) with any prefix of the
  /// files' contents, each in the order it was made: a file system may make a rename last
  /// before the bytes written ahead of it. Each distinct state once, as the folder's files by
  /// name relative to `folder`, with its cut.
  ///
  /// `onlyCovered`: for each cut only the state that keeps what fsyncs covered and nothing else.
  static func crashStates(_ ops: [Operation], folder: String, onlyCovered: Bool = false) -> [(cut: Int, files: [String: Data])] {
    let cover = Cover(ops)
    var states: [(Int, [String: Data])] = []
    for cut in 0...ops.count {
      // The same files after another cut are checked again: a later cut promises more.
      var seen = Set<[String: Data]>()
      let loose = cover.loose(cut: cut)
      for keptNames in 0...(onlyCovered ? 0 : loose.names.count) {
        for keptData in 0...(onlyCovered ? 0 : loose.data.count) {
          let files = cover.state(cut: cut, keptNames: keptNames, keptData: keptData, folder: folder)
          if seen.insert(files).inserted { states.append((cut, files)) }
        }
      }
    }
    return states
  }

  /// When each operation of a recording came to last: the first later fsync of its file (its
  /// contents), or of its folder (a name: a create, a rename in both folders, a link, an
  /// unlink, a folder made). One state after a cut is what was covered before it, and prefixes
  /// of what was not (`loose`); a test that cannot try them all picks some (`state`).
  struct Cover {
    let ops: [Operation]
    /// For each operation, the index of the operation that made it last (`Int.max`: none).
    let lastsAt: [Int]
    /// The file a rename or link moved or named again, as it was when it was made: a name's
    /// file outlasts the name it had (an edit's file, made in its own folder and linked into
    /// the queue's, is there when the queue's folder lasts, whatever became of its first name).
    let moved: [Int: Int]

    init(_ ops: [Operation]) {
      self.ops = ops
      var current: [String: Int] = [:]
      var moved: [Int: Int] = [:]
      for (i, op) in ops.enumerated() {
        switch op {
        case .create(let path, let file): current[path] = file
        case .rename(let from, let to):
          if let file = current.removeValue(forKey: from) {
            current[to] = file
            moved[i] = file
          }
        case .link(let from, let to):
          if let file = current[from] {
            current[to] = file
            moved[i] = file
          }
        case .unlink(let path): current.removeValue(forKey: path)
        case .contents, .fsync, .syncFolder, .makeFolder: break
        }
      }
      self.moved = moved
      func parent(_ path: String) -> String { URL(fileURLWithPath: path).deletingLastPathComponent().path }
      var nextFsync: [Int: Int] = [:]
      var nextFolderSync: [String: Int] = [:]
      var lastsAt = [Int](repeating: Int.max, count: ops.count)
      for i in ops.indices.reversed() {
        switch ops[i] {
        case .contents(let file, _): lastsAt[i] = nextFsync[file] ?? .max
        case .create(let path, _), .unlink(let path), .makeFolder(let path), .link(_, let path):
          lastsAt[i] = nextFolderSync[parent(path)] ?? .max
        case .rename(let from, let to):
          lastsAt[i] = max(nextFolderSync[parent(from)] ?? .max, nextFolderSync[parent(to)] ?? .max)
        case .fsync(let file):
          lastsAt[i] = i
          nextFsync[file] = i
        case .syncFolder(let dir):
          lastsAt[i] = i
          nextFolderSync[URL(fileURLWithPath: dir).path] = i
        }
      }
      self.lastsAt = lastsAt
    }

    /// The operations before `cut` that no fsync before it covered: names' and contents', each in order.
    func loose(cut: Int) -> (names: [Int], data: [Int]) {
      var names: [Int] = []
      var data: [Int] = []
      for i in 0..<cut where lastsAt[i] >= cut {
        if case .contents = ops[i] { data.append(i) } else { names.append(i) }
      }
      return (names, data)
    }

    /// The files under `folder` (relative paths) after a power loss after the first `cut`
    /// operations that kept what fsyncs covered, the first `keptNames` loose names' operations
    /// and the first `keptData` loose contents. A file in a folder that did not last is gone.
    func state(cut: Int, keptNames: Int, keptData: Int, folder: String) -> [String: Data] {
      let loose = loose(cut: cut)
      let lasting = Set(loose.names.prefix(keptNames) + loose.data.prefix(keptData))
      var names: [String: Int] = [:]
      var bytes: [Int: Data] = [:]
      var made = Set<String>()
      var folders = Set<String>()
      for i in 0..<cut {
        if case .makeFolder(let path) = ops[i] { made.insert(path) }
        guard lastsAt[i] < cut || lasting.contains(i) else { continue }
        switch ops[i] {
        case .create(let path, let file): names[path] = file
        case .contents(let file, let data): bytes[file] = data
        case .rename(let from, let to):
          if let file = names.removeValue(forKey: from) ?? moved[i] { names[to] = file }
        case .link(let from, let to):
          if let file = moved[i] ?? names[from] { names[to] = file }
        case .unlink(let path):
          names.removeValue(forKey: path)
          folders.remove(path)
        case .makeFolder(let path): folders.insert(path)
        case .fsync, .syncFolder: break
        }
      }
      func inLastingFolder(_ path: String) -> Bool {
        var dir = URL(fileURLWithPath: path).deletingLastPathComponent().path
        while dir.hasPrefix(folder + "/") {
          if made.contains(dir) && !folders.contains(dir) { return false }
          dir = URL(fileURLWithPath: dir).deletingLastPathComponent().path
        }
        return true
      }
      var files: [String: Data] = [:]
      for (path, file) in names where path.hasPrefix(folder + "/") && inLastingFolder(path) {
        files[String(path.dropFirst(folder.count + 1))] = bytes[file] ?? Data()
      }
      return files
    }
  }

  func temporaryFolder(_ label: String) throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("crash-\(label)-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
  }

  /// A file outside the queue holding `data`, open for reading, as an edit's is.
  func source(_ data: Data, in folder: URL) throws -> Int32 {
    let url = folder.appendingPathComponent(UUID().uuidString)
    try data.write(to: url)
    return open(url.path, O_RDONLY | O_CLOEXEC)
  }

  typealias Step = (name: String, bytes: Data?, base: PendingChange.Base)

  /// Uploads queued one after another, each replacing the waiting one of its name (and so
  /// removing its record), a delete between them.
  static let steps: [Step] = [
    ("a", Data("a, first version\n".utf8), .generation(5)),
    ("b", Data("b, only version\n".utf8), .generation(0)),
    ("a", Data("a, second version, longer\n".utf8), .generation(5)),
    ("c", nil, .generation(3)),
    ("a", Data("a3\n".utf8), .generation(5)),
  ]

  /// Runs `steps` on a queue over a recording disk, with a group commit after the steps in
  /// `commitsAfter` (nil: no group commit, each close fsyncs), then replays every crash state
  /// and opens a queue on each: the last change of each name that had lasted (its call returned;
  /// with a group commit, a commit after it returned) shows with its exact bytes, or one made
  /// after it; no name is queued twice; a record whose bytes did not last is never read as good.
  ///
  /// `linking`: each upload's bytes are a file in the queue's folder (as an edit's are) that the
  /// queue links instead of copying.
  func replayEveryCrashState(_ steps: [Step], commitsAfter: Set<Int>?, linking: Bool = false) async throws {
    let work = try temporaryFolder("work")
    defer { try? FileManager.default.removeItem(at: work) }
    let queueFolder = work.appendingPathComponent("queue")
    let disk = RecordingDisk()
    // A commit interval no test waits for: the commits are the ones asked for.
    let queue = try WriteBackQueue(folder: queueFolder, disk: disk, commit: commitsAfter == nil ? 0 : 3600) { _ in }
    // When each call was made, and when what it did lasted, in operations recorded.
    var issued: [Int] = []
    var lasted: [Int?] = []
    for (i, step) in steps.enumerated() {
      issued.append(disk.operations.count)
      if let bytes = step.bytes, !linking {
        let fd = try source(bytes, in: work)
        defer { close(fd) }
        try queue.upload(step.name, from: fd, contentType: "text/plain", mtime: nil, base: step.base)
      } else {
        try Self.perform(step, as: i, on: queue, disk: disk)
      }
      lasted.append(commitsAfter == nil ? disk.operations.count : nil)
      if let commitsAfter, commitsAfter.contains(i) {
        try queue.commit()
        for j in lasted.indices where lasted[j] == nil { lasted[j] = disk.operations.count }
      }
    }
    let ops = disk.operations
    let states = Self.crashStates(ops, folder: queueFolder.path)
    #expect(states.count > ops.count, "\(states.count) states from \(ops.count) operations")
    // What fsyncs made last and nothing more: a record there never lacks its bytes.
    let covered = Set(Self.crashStates(ops, folder: queueFolder.path, onlyCovered: true).map(\.files))
    var checked = 0
    for (cut, files) in states {
      let replay = work.appendingPathComponent("state-\(checked)")
      try FileManager.default.createDirectory(at: replay, withIntermediateDirectories: true)
      defer { try? FileManager.default.removeItem(at: replay) }
      for (name, data) in files { try data.write(to: replay.appendingPathComponent(name)) }
      let said = Mutex<[String]>([])
      let reopened = try WriteBackQueue(folder: replay) { line in said.withLock { $0.append(line) } }
      let label = "state \(checked) (after \(cut) of \(ops.count) operations: \(files.keys.sorted())) \(said.withLock { $0 })"
      // Where only what fsyncs covered is left, a record never lasts without its bytes: none
      // is set aside as damaged (a power loss after an fsync reports no damage that is not there).
      if covered.contains(files) {
        #expect(reopened.totals.damaged == 0, "\(label): \(reopened.totals.damaged) records set aside as damaged")
      }
      // What the reopened queue shows of each name: bytes to upload, a delete, or nothing.
      var shownBy: [String: Data?] = [:]
      for name in Set(steps.map(\.name)) {
        let mine = steps.indices.filter { steps[$0].name == name }
        // The last change of the name that lasted before the cut must show, or one made after
        // it whose call had begun (it may or may not last).
        let lastLasting = mine.last { lasted[$0].map { $0 <= cut } ?? false }
        let later = mine.filter { $0 > (lastLasting ?? -1) && issued[$0] < cut }
        let allowed = (lastLasting.map { [$0] } ?? []) + later
        let shown: Data?? =
          switch reopened.view(name) {
          case .file(let path, _, _)?: .some(FileManager.default.contents(atPath: path))
          case .deleted?: .some(nil)
          case nil, .folder?, .copied?: nil
          }
        if let shown { shownBy[name] = .some(shown) }
        if let shown {
          let text = shown.map { String(decoding: $0, as: UTF8.self) } ?? "deleted"
          #expect(allowed.contains { steps[$0].bytes == shown }, "\(label): \(name) shows \(text)")
        } else {
          #expect(lastLasting == nil, "\(label): \(name), whose change lasted, is not in the queue")
        }
      }
      // Nothing goes up twice as two versions: one change per name at most (all of them
      // wait, none started, so each replaced the one before).
      let queued = reopened.describe().split(separator: "\n").map { $0.split(separator: "\t")[1] }
      #expect(Set(queued).count == queued.count, "\(label): \(reopened.describe())")
      // Carried out by the queue's workers, as the next mount does, into a bucket that holds
      // the versions the steps were based on: each name ends as the queue showed it (a change
      // that lasted is in the bucket with its exact bytes), written once at most, and nothing
      // goes beside it as a conflict.
      let bucket = Self.bucketOfTheBases(steps)
      let seeded = bucket.objects.withLock { $0.mapValues(\.0) }
      reopened.start(client: bucket) { _, _ in }
      let left = await reopened.waitUntilEmpty(within: 30)
      #expect(left.changes == 0, "\(label): not carried out: \(reopened.describe())")
      let (objects, writes) = (bucket.objects.withLock { $0.mapValues(\.0) }, bucket.writes.withLock { $0 })
      for name in Set(steps.map(\.name)) {
        // Not in the queue: the bucket keeps its version.
        let expected: Data? = shownBy.keys.contains(name) ? shownBy[name]! : seeded[name]
        #expect(objects[name] == expected, "\(label): \(name) in the bucket")
        #expect(writes.filter { $0.hasSuffix(" " + name) }.count <= 1, "\(label): \(writes)")
      }
      #expect(!objects.keys.contains { $0.contains(".conflict-") }, "\(label): \(objects.keys.sorted())")
      checked += 1
    }
    #expect(checked == states.count)
  }

  /// `step` (number `index`) on `queue`: a delete, or an upload of an edit's file, made and
  /// written beside the queue (never fsynced by the edit) and linked into it.
  static func perform(_ step: Step, as index: Int, on queue: WriteBackQueue, disk: RecordingDisk) throws {
    guard let bytes = step.bytes else {
      try queue.delete(step.name, base: step.base)
      return
    }
    let path = queue.folder.appendingPathComponent("edit-\(index)").path
    let fd = disk.open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
    #expect(fd >= 0)
    defer {
      disk.close(fd)
      unlink(path)
    }
    _ = bytes.withUnsafeBytes { disk.write(fd, $0) }
    try queue.upload(step.name, from: fd, linking: path, contentType: "text/plain", mtime: nil, base: step.base)
  }

  /// A bucket holding each name at the generation the steps' first change of it was based on
  /// (`MemoryObjectClient.put` counts a name's generations from 1).
  static func bucketOfTheBases(_ steps: [Step]) -> MemoryObjectClient {
    let bucket = MemoryObjectClient()
    for name in Set(steps.map(\.name)) {
      guard let first = steps.first(where: { $0.name == name }), case .generation(let g) = first.base else { continue }
      for version in 0..<g { bucket.put(name, Data("\(name), the bucket's version \(version + 1)\n".utf8)) }
    }
    return bucket
  }

  /// Without a group commit (`commit=0`), each close fsyncs: what returned lasts.
  @Test func everyCrashStateOfReplacedUploadsKeepsWhatReturned() async throws {
    try await replayEveryCrashState(Self.steps, commitsAfter: nil)
  }

  /// With a group commit: what a commit covered lasts, whatever a power loss undid after it (the
  /// records of the uploads replaced since it are removed only once their replacements last).
  @Test func everyCrashStateOfAGroupCommitKeepsWhatItCommitted() async throws {
    try await replayEveryCrashState(Self.steps, commitsAfter: [0, 1, 3])
    try await replayEveryCrashState(Self.steps, commitsAfter: [2, 4])
    try await replayEveryCrashState(Self.steps, commitsAfter: [])
  }

  /// The same with the bytes linked from the edits' files instead of copied, with a group commit
  /// and without.
  @Test func everyCrashStateOfLinkedBytesKeepsWhatLasted() async throws {
    try await replayEveryCrashState(Self.steps, commitsAfter: nil, linking: true)
    try await replayEveryCrashState(Self.steps, commitsAfter: [0, 2, 3], linking: true)
    try await replayEveryCrashState(Self.steps, commitsAfter: [4], linking: true)
  }

  /// A file the kernel still writes is queued with no CRC32C in its record (its bytes are known
  /// only once its last writer is gone), so a load cannot check them: its record must never last
  /// before them, even when something else writes a record at once (an upload session opened,
  /// a refusal) instead of waiting for the group commit. Every crash state shows the bytes
  /// written, or nothing; never a file of zeros or an empty one.
  @Test func aRecordWithoutAChecksumNeverLastsBeforeItsBytes() async throws {
    let work = try temporaryFolder("unchecked")
    defer { try? FileManager.default.removeItem(at: work) }
    let queueFolder = work.appendingPathComponent("queue")
    let disk = RecordingDisk()
    let queue = try WriteBackQueue(folder: queueFolder, disk: disk, commit: 3600) { _ in }
    let bytes = Data((0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
    let path = queueFolder.appendingPathComponent("edit-kernel").path
    let fd = disk.open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
    #expect(fd >= 0)
    defer { disk.close(fd) }
    _ = bytes.withUnsafeBytes { disk.write(fd, $0) }
    try queue.upload("k", from: fd, linking: path, stillWritten: true, contentType: "text/plain", mtime: nil, base: .generation(0))
    // A record written at once, as an upload session's is.
    try queue.journal.write(PendingChange(sequence: 900, kind: .delete, name: "other", base: .generation(3)))
    let ops = disk.operations
    let states = Self.crashStates(ops, folder: queueFolder.path)
    var showed = 0
    for (index, (cut, files)) in states.enumerated() {
      let replay = work.appendingPathComponent("state-\(index)")
      try FileManager.default.createDirectory(at: replay, withIntermediateDirectories: true)
      defer { try? FileManager.default.removeItem(at: replay) }
      for (name, data) in files { try data.write(to: replay.appendingPathComponent(name)) }
      let reopened = try WriteBackQueue(folder: replay) { _ in }
      let label = "state \(index) (after \(cut) of \(ops.count) operations: \(files.keys.sorted()))"
      if case .file(let shown, _, _)? = reopened.view("k") {
        showed += 1
        #expect(FileManager.default.contents(atPath: shown) == bytes, "\(label): k shows other bytes than were written")
      }
    }
    // The record did last in some states (after the record written at once): the check ran.
    #expect(showed > 0)
  }

  /// A folder that cannot be synced: the call says EIO (as a disk's fsync error reaches the
  /// program), and the change is kept, in the queue and on disk for the next mount.
  @Test func aFolderSyncErrorReachesTheCallerAndKeepsTheChange() throws {
    let work = try temporaryFolder("eio")
    defer { try? FileManager.default.removeItem(at: work) }
    let queueFolder = work.appendingPathComponent("queue")
    let disk = RecordingDisk()
    let queue = try WriteBackQueue(folder: queueFolder, disk: disk) { _ in }
    disk.failFolderSyncs(true)
    let fd = try source(Data("kept though unsynced\n".utf8), in: work)
    defer { close(fd) }
    #expect(throws: FSError(EIO)) { try queue.upload("x", from: fd, contentType: "text/plain", mtime: nil, base: .generation(0)) }
    guard case .file(let path, _, _)? = queue.view("x") else {
      Issue.record("the change was not kept: \(queue.describe())")
      return
    }
    #expect(FileManager.default.contents(atPath: path) == Data("kept though unsynced\n".utf8))
    let next = try WriteBackQueue(folder: queueFolder) { _ in }
    #expect(next.totals.changes == 1, "\(next.describe())")
  }
}
