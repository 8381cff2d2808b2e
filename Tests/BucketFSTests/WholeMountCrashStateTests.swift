@testable import BucketFS
import ChildProcess
import Foundation
import StorageCore
import StorageEmulator
import Synchronization
import TestSupport
import Testing

/// Crash states of a whole writable mount (issue 53, "proof without a power switch"): a real
/// mount against the emulator records its queue's disk operations (`RecordedQueueDisk`) through
/// a replace-then-delete, a rename, an overlay's fill, a file the kernel writes by passthrough
/// with a second writer joining, metadata set after a close and a large upload whose session
/// goes into the journal at once, with changes carried out in between. From the recording come
/// the states a power loss could leave of the staging folder (`CrashStateTests.Cover`); a sample
/// of them is put in a fresh staging folder, and a new mount is started on each against an
/// emulator that holds exactly what the first one held at that moment (its folder copied at
/// every change, `StorageEmulator.Configuration.onChange`), and `bucketfs sync` run. Then:
/// - nothing goes up that no writer wrote: every version the server takes of a name is one a
///   writer made (or the server's before);
/// - nothing replaced, withdrawn or carried out comes back: no version the server takes is
///   older than what it had at the cut, and no conflict copy appears (there is one writer);
/// - what an fsync or `bucketfs sync` returned before the cut is there.
///
/// The server is the one of the cut: a change the server made while the daemon made an
/// operation on another thread counts as made before that operation (the emulator is told of
/// its own changes in order, and reads how many operations were written down by then).
/// Upload sessions live in the server's memory only, so a session in a replayed journal is
/// unknown to the new server, as an expired one is: the upload starts again.
@Suite(.serialized) struct WholeMountCrashStateTests {
  static let bucket = "whole-crash"

  static let binary: String = {
    let dir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    for candidate in [dir, dir.deletingLastPathComponent()] {
      let path = candidate.appendingPathComponent("bucketfs").path
      if FileManager.default.isExecutableFile(atPath: path) { return path }
    }
    return dir.appendingPathComponent("bucketfs").path
  }()

  static func isMounted(_ path: String) -> Bool {
    let mounts = (try? String(contentsOfFile: "/proc/mounts", encoding: .utf8)) ?? ""
    return mounts.split(separator: "\n").contains { $0.split(separator: " ").dropFirst().first == Substring(path) }
  }

  // MARK: The recording

  /// A mount's recording read back: the operations, and how many of them the first n lines held.
  struct Recording {
    var ops: [CrashStateTests.Operation] = []
    var opsAfterLines: [Int] = [0]
  }

  static func read(_ recordingFile: String) throws -> Recording {
    let text = try String(contentsOfFile: recordingFile, encoding: .utf8)
    var recording = Recording()
    var blobs: [String: Data] = [:]
    for line in text.split(separator: "\n", omittingEmptySubsequences: false) where !line.isEmpty {
      let fields = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(line)")
      let op = fields["op"] as? String ?? ""
      let path = fields["path"] as? String ?? ""
      let file = fields["file"] as? Int ?? 0
      switch op {
      case "create": recording.ops.append(.create(path: path, file: file))
      case "contents":
        let hash = fields["sha256"] as? String ?? ""
        if blobs[hash] == nil { blobs[hash] = try Data(contentsOf: URL(fileURLWithPath: recordingFile + ".blobs/" + hash)) }
        recording.ops.append(.contents(file: file, blobs[hash]!))
      case "fsync": recording.ops.append(.fsync(file: file))
      case "rename": recording.ops.append(.rename(from: fields["from"] as? String ?? "", to: fields["to"] as? String ?? ""))
      case "link": recording.ops.append(.link(from: fields["from"] as? String ?? "", to: fields["to"] as? String ?? ""))
      case "unlink", "rmdir": recording.ops.append(.unlink(path: path))
      case "mkdir": recording.ops.append(.makeFolder(path))
      case "syncFolder": recording.ops.append(.syncFolder(path))
      default: break
      }
      recording.opsAfterLines.append(recording.ops.count)
    }
    return recording
  }

  /// How many whole lines a file being appended to holds, read on from where the last call stopped.
  final class LineCounter: @unchecked Sendable {
    let path: String
    private let state = Mutex<(offset: off_t, lines: Int)>((0, 0))
    init(_ path: String) { self.path = path }

    var lines: Int {
      state.withLock { s in
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return s.lines }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
          let n = pread(fd, &buffer, buffer.count, s.offset)
          guard n > 0 else { break }
          // Only whole lines: one being written is counted once it ends.
          guard let last = buffer[0..<n].lastIndex(of: 0x0A) else { break }
          s.lines += buffer[0...last].filter { $0 == 0x0A }.count
          s.offset += off_t(last + 1)
        }
        return s.lines
      }
    }
  }

  // MARK: The server at every moment

  /// The emulator's folder, copied at each change (data and side files linked: the emulator
  /// never changes one in place; its index log copied), with how many recorded lines preceded it.
  final class ServerHistory: @unchecked Sendable {
    let root: URL
    let snapshots: URL
    let counter: LineCounter
    private let taken = Mutex<[(lines: Int, folder: URL)]>([])

    init(root: URL, snapshots: URL, counter: LineCounter) {
      self.root = root
      self.snapshots = snapshots
      self.counter = counter
    }

    var all: [(lines: Int, folder: URL)] { taken.withLock { $0 } }

    func changed() {
      taken.withLock { t in
        let folder = snapshots.appendingPathComponent("\(t.count)")
        ServerHistory.copy(root, to: folder)
        t.append((counter.lines, folder))
      }
    }

    /// An emulator's folder (its buckets' folders and the files beside them) copied to `to`.
    static func copy(_ from: URL, to: URL) {
      let fm = FileManager.default
      try? fm.createDirectory(at: to, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
      for name in (try? fm.contentsOfDirectory(atPath: from.path)) ?? [] where name != ".tmp" {
        let source = from.appendingPathComponent(name)
        var isFolder: ObjCBool = false
        guard fm.fileExists(atPath: source.path, isDirectory: &isFolder) else { continue }
        if isFolder.boolValue {
          guard name.hasPrefix("b-") else { continue }
          let target = to.appendingPathComponent(name)
          try? fm.createDirectory(at: target, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
          for file in (try? fm.contentsOfDirectory(atPath: source.path)) ?? [] {
            let path = source.appendingPathComponent(file).path
            let copy = target.appendingPathComponent(file).path
            if file.hasSuffix(".bin") || file.hasSuffix(".json") {
              if link(path, copy) != 0, let data = fm.contents(atPath: path) { _ = fm.createFile(atPath: copy, contents: data) }
            } else if let data = fm.contents(atPath: path) {
              _ = fm.createFile(atPath: copy, contents: data, attributes: [.posixPermissions: 0o600])
            }
          }
        } else if let data = fm.contents(atPath: source.path) {
          _ = fm.createFile(atPath: to.appendingPathComponent(name).path, contents: data, attributes: [.posixPermissions: 0o600])
        }
      }
    }

    /// The objects an emulator's folder holds: bytes and custom metadata by name.
    static func objects(in folder: URL) -> [String: (Data, [String: String])] {
      let fm = FileManager.default
      var out: [String: (Data, [String: String])] = [:]
      for bucketFolder in (try? fm.contentsOfDirectory(atPath: folder.path)) ?? [] where bucketFolder.hasPrefix("b-") {
        let dir = folder.appendingPathComponent(bucketFolder)
        for file in (try? fm.contentsOfDirectory(atPath: dir.path)) ?? [] where file.hasSuffix(".json") {
          guard let side = fm.contents(atPath: dir.appendingPathComponent(file).path),
            let record = try? JSONSerialization.jsonObject(with: side) as? [String: Any],
            let name = record["name"] as? String, let dataFile = record["dataFile"] as? String,
            let data = fm.contents(atPath: dir.appendingPathComponent(dataFile).path)
          else { continue }
          out[name] = (data, record["metadata"] as? [String: String] ?? [:])
        }
      }
      return out
    }
  }

  // MARK: What writers made

  /// A version of a name: its bytes (nil: absent), and, where it matters, custom metadata `x`.
  struct Version: CustomStringConvertible {
    var bytes: Data?
    var x: String? = nil
    var checksX = false

    func matches(_ object: (Data, [String: String])?) -> Bool {
      guard let object else { return bytes == nil }
      return bytes == object.0 && (!checksX || object.1["x"] == x)
    }

    var description: String {
      guard let bytes else { return "absent" }
      let text = bytes.count <= 40 ? "\"\(String(decoding: bytes, as: UTF8.self).replacingOccurrences(of: "\n", with: "\\n"))\"" : "\(bytes.count) bytes"
      return checksX ? "\(text) x=\(x ?? "none")" : text
    }
  }

  static func show(_ object: (Data, [String: String])?) -> String {
    guard let object else { return "absent" }
    let text = object.0.count <= 40 ? "\"\(String(decoding: object.0, as: UTF8.self).replacingOccurrences(of: "\n", with: "\\n"))\"" : "\(object.0.count) bytes"
    return text + (object.1["x"].map { " x=\($0)" } ?? "")
  }

  /// The earliest place at or after `from` in `versions` that `object` is.
  static func place(of object: (Data, [String: String])?, in versions: [Version], from: Int) -> Int? {
    (from..<versions.count).first { versions[$0].matches(object) }
  }

  /// A state of the staging folder to replay: a cut, and how many of its loose operations lasted.
  struct Pick: CustomStringConvertible {
    let cut: Int
    let keptNames: Int
    let names: Int
    let keptData: Int
    let data: Int
    var description: String { "cut \(cut), \(keptNames) of \(names) loose names' operations kept, \(keptData) of \(data) loose contents kept" }
  }

  // MARK: A mount

  final class Mount: @unchecked Sendable {
    let process: ChildProcess
    let mountpoint: URL
    let logPath: URL

    init(root: URL, staging: URL, port: Int, api: String, environment: [String: String] = [:], options: [String] = []) async throws {
      mountpoint = root.appendingPathComponent("mnt")
      try FileManager.default.createDirectory(at: mountpoint, withIntermediateDirectories: true)
      logPath = root.appendingPathComponent("mount.log")
      _ = FileManager.default.createFile(atPath: logPath.path, contents: nil)
      let logFile = try FileHandle(forWritingTo: logPath)
      defer { try? logFile.close() }
      var env = ProcessInfo.processInfo.environment
      env["HOME"] = root.path
      env.removeValue(forKey: "BUCKETFS_RECORD_QUEUE_DISK")
      for (k, v) in environment { env[k] = v }
      process = try ChildProcess(
        WholeMountCrashStateTests.binary,
        [
          "mount", "gs://\(WholeMountCrashStateTests.bucket)", mountpoint.path, "-f", "--emulator", "127.0.0.1:\(port)", "--api",
          api, "-o", (["writable", "staging_dir=\(staging.path)", "metadata_ttl=2"] + options).joined(separator: ","),
        ],
        environment: env, errors: .descriptor(logFile.fileDescriptor))
      let path = mountpoint.path
      let up = await eventually(timeout: .seconds(30)) { WholeMountCrashStateTests.isMounted(path) || !self.process.isRunning }
      guard up && WholeMountCrashStateTests.isMounted(path) else {
        unmount()
        throw MountFailure(log: log)
      }
    }

    struct MountFailure: Error, CustomStringConvertible {
      let log: String
      var description: String { "the mount did not come up: \(log)" }
    }

    var log: String { (try? String(contentsOf: logPath, encoding: .utf8)) ?? "" }

    func shell(_ script: String) -> (Int32, String) {
      runTool("/bin/sh", ["-c", "set -e; cd '\(mountpoint.path)'; " + script], timeout: .seconds(120))
    }

    func sync() -> (Int32, String) {
      runTool(WholeMountCrashStateTests.binary, ["sync", mountpoint.path, "--timeout", "60"], timeout: .seconds(120))
    }

    /// Unmounted, and the daemon ended (by its pid), also when a test fails.
    func unmount() {
      if WholeMountCrashStateTests.isMounted(mountpoint.path) {
        _ = runTool("/bin/fusermount3", ["-u", "-z", mountpoint.path], timeout: .seconds(30))
      }
      if process.wait(timeout: .seconds(20)) == nil {
        process.send(SIGKILL)
        process.wait()
      }
    }

    deinit { unmount() }
  }

  static func python(_ code: String) -> String {
    "python3 -c '\(code.replacingOccurrences(of: "'", with: "'\\''"))'"
  }

  // MARK: The test

  /// Over the GCS API (renames are moves on the server) and the Firebase one (an upload, then
  /// a delete). `BUCKETFS_CRASH_SEED` and `BUCKETFS_CRASH_STATES` pick other states, or more.
  @Test(arguments: ["gcs", "firebase"]) func sampledCrashStatesOfAWholeMountKeepTheContract(api: String) async throws {
    let environment = ProcessInfo.processInfo.environment
    let seed = environment["BUCKETFS_CRASH_SEED"].flatMap { UInt64($0) } ?? 53
    let sample = environment["BUCKETFS_CRASH_STATES"].flatMap { Int($0) } ?? 60
    let work = URL(fileURLWithPath: "/tmp").appendingPathComponent("whole-crash-\(UUID().uuidString.prefix(8))")
    try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    var keep = false
    defer { if !keep { try? FileManager.default.removeItem(at: work) } }

    // What the writers make, every version distinct.
    let p0 = randomData(8 << 20, seed: 5301)
    var p1 = p0
    p1.replaceSubrange((1 << 20)..<((1 << 20) + 5), with: Data("HELLO".utf8))
    let a = randomData(120_000, seed: 5302)
    let b = Data("a second writer joined\n".utf8)
    let c = Data("the creator again\n".utf8)
    let large = randomData(3 << 20, seed: 5303)
    let largeSource = work.appendingPathComponent("large.src")
    try large.write(to: largeSource)
    func v(_ text: String) -> Version { Version(bytes: Data(text.utf8)) }
    let versions: [String: [Version]] = [
      "f": [Version(bytes: nil), v(""), v("v1\n"), v(""), v("v2\n"), Version(bytes: nil)],
      "r": [Version(bytes: nil), v(""), v("r1\n"), Version(bytes: nil)],
      "r2": [Version(bytes: nil), v("r1\n")],
      "big.bin": [Version(bytes: p0), Version(bytes: p1)],
      "large.bin": [Version(bytes: nil), v(""), Version(bytes: large)],
      "k": [Version(bytes: nil), v(""), Version(bytes: a), Version(bytes: a + b), Version(bytes: a + b + c)],
      "meta": [
        Version(bytes: nil), Version(bytes: Data(), checksX: true), Version(bytes: Data("m1\n".utf8), checksX: true),
        Version(bytes: Data("m1\n".utf8), x: "1", checksX: true),
      ],
    ]

    // The recorded run.
    let recorded = work.appendingPathComponent("recorded")
    let staging = recorded.appendingPathComponent("staging")
    try FileManager.default.createDirectory(at: recorded, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    let recordingPath = work.appendingPathComponent("queue-disk.jsonl").path
    let counter = LineCounter(recordingPath)
    let serverRoot = recorded.appendingPathComponent("server")
    let history = ServerHistory(root: serverRoot, snapshots: work.appendingPathComponent("snapshots"), counter: counter)
    var config = StorageEmulator.Configuration(root: serverRoot)
    config.port = 0
    config.onChange = { history.changed() }
    let emulator = try StorageEmulator(config)
    defer { emulator.stop() }
    let storage = Storage(bucket: Self.bucket)
    storage.useEmulator(host: "127.0.0.1", port: emulator.port)
    _ = try await storage.reference().object(named: "big.bin").putDataAsync(p0)
    func object(_ name: String) async -> Data? { try? await storage.reference().object(named: name).data(maxSize: 64 << 20) }

    /// Promises: from this many recorded lines on, the name is at this place of its versions or later.
    var promises: [(name: String, place: Int, lines: Int)] = []
    do {
      let m = try await Mount(root: recorded, staging: staging, port: emulator.port, api: api, environment: ["BUCKETFS_RECORD_QUEUE_DISK": recordingPath], options: ["commit=30"])
      defer { m.unmount() }
      var (status, output) = m.shell("echo v1 > f; echo v2 > f")
      #expect(status == 0, "\(output)")
      #expect(await eventually { await object("f") == Data("v2\n".utf8) }, "v2 never reached the bucket")
      (status, output) = m.shell("rm f")
      #expect(status == 0, "\(output)")
      #expect(await eventually { await object("f") == nil }, "the delete never reached the bucket")
      (status, output) = m.shell("echo r1 > r")
      #expect(status == 0, "\(output)")
      #expect(await eventually { await object("r") == Data("r1\n".utf8) })
      (status, output) = m.shell("mv r r2")
      #expect(status == 0, "\(output)")
      #expect(
        await eventually {
          let (old, new) = (await object("r"), await object("r2"))
          return old == nil && new == Data("r1\n".utf8)
        }, "the rename never reached the bucket")
      // An overlay: 5 bytes at 1 MiB into an 8 MB object that is not staged.
      (status, output) = m.shell(Self.python("f = open(\"big.bin\", \"r+b\"); f.seek(1 << 20); f.write(b\"HELLO\"); f.close()"))
      #expect(status == 0, "\(output)")
      #expect(await eventually { await object("big.bin") == p1 }, "the overlaid edit never reached the bucket")
      // A large upload (its session goes into the journal at once) while a new file is written
      // by the kernel: closed through a dup, a second writer joins and appends, the creator
      // appends again, then an fsync through a reader's descriptor.
      let passthrough = """
        import os
        fd = os.open("k", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, open("\(work.appendingPathComponent("a").path)", "rb").read())
        d = os.dup(fd); os.close(fd)
        w = os.open("k", os.O_WRONLY | os.O_APPEND); os.write(w, \(Self.pythonBytes(b))); os.close(w)
        os.lseek(d, 0, os.SEEK_END); os.write(d, \(Self.pythonBytes(c))); os.close(d)
        r = os.open("k", os.O_RDONLY); os.fsync(r); os.close(r)
        """
      try a.write(to: work.appendingPathComponent("a"))
      (status, output) = m.shell("cp '\(largeSource.path)' large.bin; " + Self.python(passthrough))
      #expect(status == 0, "\(output)")
      promises.append(("k", 4, counter.lines))
      // Metadata after a close, made to last by an fsync of a reader's descriptor.
      (status, output) = m.shell(
        "echo m1 > meta; setfattr -n user.meta.x -v 1 meta; chmod 600 meta; " + Self.python("import os; r = os.open(\"meta\", os.O_RDONLY); os.fsync(r); os.close(r)"))
      #expect(status == 0, "\(output)")
      promises.append(("meta", 3, counter.lines))
      let stats = runTool("/usr/bin/getfattr", ["--only-values", "-n", "user.bucketfs.stats", m.mountpoint.path]).1
      #expect(stats.contains("files written by passthrough\t") && !stats.contains("files written by passthrough\t0\n"), "no file was written by passthrough: \(stats)")
      (status, output) = m.sync()
      #expect(status == 0, "\(output)")
      for (name, list) in versions { promises.append((name, list.count - 1, counter.lines)) }
      m.unmount()
      #expect(!m.process.isRunning)
    }
    let finalServer = ServerHistory.objects(in: serverRoot)
    for (name, list) in versions {
      #expect(list.last!.matches(finalServer[name]), "the recorded run itself: \(name) ends as \(Self.show(finalServer[name]))")
    }

    // The crash states.
    let recording = try Self.read(recordingPath)
    let ops = recording.ops
    let queueFolder = staging.appendingPathComponent(String(StagingIndex.hash(Self.bucket).prefix(16))).appendingPathComponent("queue").path
    #expect(ops.contains { if case .fsync = $0 { true } else { false } } && ops.count > 50, "\(ops.count) operations recorded")
    let cover = CrashStateTests.Cover(ops)
    // Each snapshot of the server, and where each name was in its versions then: the earliest
    // place at or after the one before that holds what the server held (an absent name is
    // absent before it is made and after it is deleted).
    var snapshots: [(ops: Int, folder: URL, places: [String: Int])] = []
    var places = versions.mapValues { _ in 0 }
    for taken in history.all {
      let held = ServerHistory.objects(in: taken.folder)
      for (name, list) in versions { places[name] = Self.place(of: held[name], in: list, from: places[name]!) ?? places[name]! }
      snapshots.append((recording.opsAfterLines[min(taken.lines, recording.opsAfterLines.count - 1)], taken.folder, places))
    }
    let promised = promises.map { (name: $0.name, place: $0.place, ops: recording.opsAfterLines[min($0.lines, recording.opsAfterLines.count - 1)]) }
    // Cuts: just after each change the server made (where a carried-out change's record is
    // being removed), and spread evenly over the rest, the end among them.
    var generator = SeededGenerator(seed: seed)
    var cuts = Set<Int>()
    let afterChanges = snapshots.map(\.ops).filter { $0 > 0 && $0 < ops.count }
    for cut in afterChanges.shuffled(using: &generator).prefix(sample / 2) { cuts.insert(cut + Int.random(in: 0...3, using: &generator)) }
    var step = 0
    while cuts.count < sample - 1 {
      cuts.insert(Int.random(in: 1..<ops.count, using: &generator))
      step += 1
      if step > 10 * sample { break }
    }
    cuts.insert(ops.count)
    var picks: [Pick] = []
    for (i, cut) in cuts.sorted().enumerated() {
      let loose = cover.loose(cut: min(cut, ops.count))
      let (n, d) = (loose.names.count, loose.data.count)
      // What fsyncs covered only; everything; every name but no loose bytes; and most often a
      // random mix (a journal whose page cache reached the disk in part: where the server has
      // moved past what its records say).
      let kept: (Int, Int) =
        switch i % 6 {
        case 0: (0, 0)
        case 1: (n, d)
        case 2: (n, 0)
        default: (Int.random(in: 0...n, using: &generator), Int.random(in: 0...d, using: &generator))
        }
      picks.append(Pick(cut: min(cut, ops.count), keptNames: kept.0, names: n, keptData: kept.1, data: d))
    }

    var violations: [String] = []
    for (index, pick) in picks.enumerated() {
      let files = cover.state(cut: pick.cut, keptNames: pick.keptNames, keptData: pick.keptData, folder: queueFolder)
      let server = snapshots.last { $0.ops <= pick.cut }
      let atCut = server.map { ServerHistory.objects(in: $0.folder) } ?? [:]
      let label = "\(api) API, seed \(seed), state \(index) (\(pick); \(files.keys.sorted().map { "\($0) \(files[$0]!.count)" }))"
      let root = work.appendingPathComponent("state-\(index)")
      let found = try await replay(
        files, server: server?.folder, root: root, api: api, label: label, versions: versions, atCut: atCut,
        places: server?.places ?? versions.mapValues { _ in 0 }, promised: promised.filter { $0.ops <= pick.cut })
      if !found.isEmpty {
        keep = true
        violations += found.map { "\($0) [kept in \(root.path)]" }
      } else {
        try? FileManager.default.removeItem(at: root)
      }
    }
    for violation in violations { Issue.record(Comment(rawValue: violation)) }
    if keep { print("whole-mount crash states: \(violations.count) violations; the recording and states are in \(work.path)") }
  }

  static func pythonBytes(_ data: Data) -> String {
    "bytes([" + data.map { String($0) }.joined(separator: ",") + "])"
  }

  /// `files` as a fresh staging folder's queue, a mount started on it against an emulator that
  /// holds what `server` held, `bucketfs sync`: what broke the contract, if anything.
  func replay(
    _ files: [String: Data], server: URL?, root: URL, api: String, label: String, versions: [String: [Version]],
    atCut: [String: (Data, [String: String])], places: [String: Int], promised: [(name: String, place: Int, ops: Int)]
  ) async throws -> [String] {
    let staging = root.appendingPathComponent("staging")
    let queue = staging.appendingPathComponent(String(StagingIndex.hash(Self.bucket).prefix(16))).appendingPathComponent("queue")
    try FileManager.default.createDirectory(at: queue, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    for folder in [root, staging, queue.deletingLastPathComponent()] { chmod(folder.path, 0o700) }
    for (name, data) in files {
      let url = queue.appendingPathComponent(name)
      try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
      try data.write(to: url)
    }
    // What the state's queue holds, for the report (read from a copy: a queue that loads tidies).
    let copy = root.appendingPathComponent("copy")
    try FileManager.default.createDirectory(at: copy, withIntermediateDirectories: true)
    for (name, data) in files where !name.contains("/") { try data.write(to: copy.appendingPathComponent(name)) }
    let described = (try? WriteBackQueue(folder: copy) { _ in }.describe()) ?? "(unreadable)"
    try? FileManager.default.removeItem(at: copy)

    let serverRoot = root.appendingPathComponent("server")
    if let server { ServerHistory.copy(server, to: serverRoot) }
    // Every version the server takes while the state is carried out, not only the last.
    let taken = Mutex<[(String, (Data, [String: String])?)]>([])
    let seen = Mutex<[String: (Data, [String: String])]>(ServerHistory.objects(in: serverRoot))
    var config = StorageEmulator.Configuration(root: serverRoot)
    config.port = 0
    config.onChange = {
      let now = ServerHistory.objects(in: serverRoot)
      seen.withLock { before in
        for (name, object) in now where before[name].map({ $0.0 != object.0 || $0.1 != object.1 }) ?? true { taken.withLock { $0.append((name, object)) } }
        for name in before.keys where now[name] == nil { taken.withLock { $0.append((name, nil)) } }
        before = now
      }
    }
    let emulator = try StorageEmulator(config)
    defer { emulator.stop() }
    let m = try await Mount(root: root, staging: staging, port: emulator.port, api: api)
    let (synced, output) = m.sync()
    m.unmount()
    let final = ServerHistory.objects(in: serverRoot)
    let context = "\(label)\n  queue: \(described.replacingOccurrences(of: "\n", with: "\n    "))\n  server at the cut: \(atCut.keys.sorted().map { "\($0)=\(Self.show(atCut[$0]))" })\n  sync: \(synced) \(output.trimmingCharacters(in: .whitespacesAndNewlines))"
    var found: [String] = []
    if !(synced == 0 || (synced == 1 && output.contains("0 changes waiting, 0 failed"))) {
      found.append("\(context)\n  VIOLATION: not carried out\n  log: \(m.log.suffix(2000))")
    }
    for (name, object) in taken.withLock({ $0 }) {
      guard let list = versions[name] else {
        found.append("\(context)\n  VIOLATION: \(name) was written (\(Self.show(object))): no writer wrote that name (a conflict copy?)")
        continue
      }
      guard list.contains(where: { $0.matches(object) }) else {
        found.append("\(context)\n  VIOLATION: \(name) took \(Self.show(object)), which no writer wrote")
        continue
      }
      let floor = places[name] ?? 0
      if Self.place(of: object, in: list, from: floor) == nil {
        found.append("\(context)\n  VIOLATION: \(name) went back to \(Self.show(object)); the server had \(Self.show(atCut[name])) at the cut")
      }
    }
    for (name, list) in versions {
      let floor = places[name] ?? 0
      let promise = promised.filter { $0.name == name }.map(\.place).max() ?? 0
      guard let at = Self.place(of: final[name], in: list, from: 0) else { continue }  // reported above
      if Self.place(of: final[name], in: list, from: max(floor, promise)) == nil {
        let fsynced = promise > 0 ? ", and version \(promise) was fsynced (or synced) before it" : ""
        found.append("\(context)\n  VIOLATION: \(name) ends as \(Self.show(final[name])) (version \(at) of \(list)); the server had version \(floor) at the cut\(fsynced)")
      }
    }
    return found
  }
}
