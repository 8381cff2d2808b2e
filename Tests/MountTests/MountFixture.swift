import Foundation
import ChildProcess
import TestSupport
import StorageCore
import StorageEmulator
import Testing

/// The built `bucketfs` binary, beside the test bundle.
let bucketfsBinary: String = {
  let dir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
  for candidate in [dir, dir.deletingLastPathComponent()] {
    let path = candidate.appendingPathComponent("bucketfs").path
    if FileManager.default.isExecutableFile(atPath: path) { return path }
  }
  return dir.appendingPathComponent("bucketfs").path
}()

/// An emulator on 127.0.0.1, a client for it, and temporary folders for mounts and staging.
final class MountFixture: @unchecked Sendable {
  let root: URL
  var emulator: StorageEmulator?
  let storage: Storage
  let bucket = "mnt-bucket"
  let port: Int
  var mounts: [MountedBucket] = []

  /// The bucket has a hierarchical namespace (folders of its own).
  let hierarchical: Bool

  init(token: String? = nil, tokens: TokenAuthority.Configuration? = nil, movesObjects: Bool = true, hierarchical: Bool = false) throws {
    self.hierarchical = hierarchical
    root = URL(fileURLWithPath: "/tmp").appendingPathComponent("bucketfs-mount-\(UUID().uuidString.prefix(8))")
    try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
    var config = StorageEmulator.Configuration(root: root.appendingPathComponent("server"))
    config.port = 0
    config.requiredToken = token
    config.movesObjects = movesObjects
    if hierarchical { config.hierarchicalBuckets = [bucket] }
    if let tokens {
      config.tokens = tokens
      config.requireOAuth = true
    }
    let emulator = try StorageEmulator(config)
    self.emulator = emulator
    port = emulator.port
    storage = Storage(bucket: bucket)
    storage.useEmulator(host: "127.0.0.1", port: port)
    storage.retryInitialDelay = 0.02
    if let token { storage.setAuthToken(token) }
  }

  var address: String { "127.0.0.1:\(port)" }

  func put(_ name: String, _ data: Data, contentType: String? = nil, custom: [String: String]? = nil) async throws
    -> StorageMetadata
  {
    var m = StorageMetadata()
    m.contentType = contentType
    m.customMetadata = custom
    return try await storage.reference().object(named: name).putDataAsync(data, metadata: m)
  }

  /// Objects `names`, each holding its own name's bytes, sixteen uploads at a time.
  func putAll(_ names: [String]) async throws {
    try await withThrowingTaskGroup(of: Void.self) { group in
      var next = 0
      while next < names.count {
        for name in names[next..<min(next + 16, names.count)] { group.addTask { _ = try await self.put(name, Data(name.utf8)) } }
        try await group.waitForAll()
        next += 16
      }
    }
  }

  func folder(_ name: String) throws -> URL {
    let url = root.appendingPathComponent(name)
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
  }

  /// Mounts `gs://bucket[/prefix]` in the foreground as a child process and waits until it is up.
  func mount(
    prefix: String = "", options: [String] = [], extra: [String] = [], name: String = "mnt", environment: [String: String] = [:]
  ) throws -> MountedBucket {
    let mountpoint = try folder(name + "-\(mounts.count)")
    let staging = root.appendingPathComponent("staging")
    let opts = (["staging_dir=\(staging.path)", "metadata_ttl=2", "read_timeout=3"] + options).joined(separator: ",")
    let url = "gs://\(bucket)" + (prefix.isEmpty ? "" : "/\(prefix)")
    let m = try MountedBucket(
      arguments: ["mount", url, mountpoint.path, "-f", "-o", opts, "--emulator", address] + extra,
      mountpoint: mountpoint, home: root, environment: environment)
    mounts.append(m)
    return m
  }

  func stopEmulator() {
    emulator?.stop()
    emulator = nil
  }

  /// The server back after `stopEmulator`, on the same port, with the objects it had.
  func startEmulator() throws {
    var config = StorageEmulator.Configuration(root: root.appendingPathComponent("server"))
    config.port = port
    if hierarchical { config.hierarchicalBuckets = [bucket] }
    emulator = try StorageEmulator(config)
  }

  /// Runs `body` with a new fixture, which lives until `body` returns; then every mount it made
  /// is unmounted and its emulator stopped, also when `body` throws.
  static func scope(
    token: String? = nil, tokens: TokenAuthority.Configuration? = nil, movesObjects: Bool = true, hierarchical: Bool = false,
    _ body: (MountFixture) async throws -> Void
  ) async throws {
    try await TestSupport.scope(MountFixture(token: token, tokens: tokens, movesObjects: movesObjects, hierarchical: hierarchical), body)
  }

  deinit {
    for m in mounts { m.unmount() }
    emulator?.stop()
    try? FileManager.default.removeItem(at: root)
  }
}

extension MountFixture {
  /// Object `name`'s bytes as the server has them, asked directly (nil when it has none).
  func object(_ name: String) async -> Data? {
    try? await storage.reference(withPath: name).data(maxSize: 64 << 20)
  }
}

/// A `bucketfs mount -f` child process; unmounted and ended (by pid) in `unmount()`.
final class MountedBucket: @unchecked Sendable {
  let process: ChildProcess
  let mountpoint: URL
  let stderrFile: URL
  /// The FUSE connection's number (the mount's device minor), as /sys/fs/fuse/connections
  /// names it; learned once mounted, so that it can be aborted after the mount is detached.
  private(set) var connection: String?

  init(arguments: [String], mountpoint: URL, home: URL, environment: [String: String] = [:]) throws {
    self.mountpoint = mountpoint
    stderrFile = home.appendingPathComponent("mount-\(UUID().uuidString.prefix(6)).log")
    FileManager.default.createFile(atPath: stderrFile.path, contents: nil)
    var env = ProcessInfo.processInfo.environment
    env["HOME"] = home.path
    for (k, v) in environment { env[k] = v }
    let logFile = try FileHandle(forWritingTo: stderrFile)
    defer { try? logFile.close() }
    process = try ChildProcess(bucketfsBinary, arguments, environment: env, errors: .descriptor(logFile.fileDescriptor))
    let deadline = Date().addingTimeInterval(20)
    while Date() < deadline {
      if let device = mountedDevice {
        connection = device.split(separator: ":").last.map(String.init)
        return
      }
      if !process.isRunning { break }
      Thread.sleep(forTimeInterval: 0.05)
    }
    if !isMounted {
      unmount()
      throw MountFailure(log: log)
    }
  }

  struct MountFailure: Error, CustomStringConvertible {
    let log: String
    var description: String { "mount did not come up: \(log)" }
  }

  var log: String { (try? String(contentsOf: stderrFile, encoding: .utf8)) ?? "" }

  var isMounted: Bool { mountedDevice != nil }

  /// The mount's device ("0:N", from /proc/self/mountinfo), nil when nothing is mounted there.
  private var mountedDevice: String? {
    let mounts = (try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8)) ?? ""
    for line in mounts.split(separator: "\n") {
      let fields = line.split(separator: " ")
      if fields.count > 4, fields[4] == Substring(mountpoint.path) { return String(fields[2]) }
    }
    return nil
  }

  func path(_ relative: String) -> String { mountpoint.appendingPathComponent(relative).path }

  /// `script` run by /bin/sh (with `set -e`) in the mount's root: its status and output.
  func shell(_ script: String) -> (Int32, String) {
    runTool("/bin/sh", ["-c", "set -e; cd '\(mountpoint.path)'; " + script])
  }

  /// `bucketfs sync` of this mount: its status and what it said.
  func sync(timeout: Int = 30) -> (Int32, String) {
    runTool(bucketfsBinary, ["sync", mountpoint.path, "--timeout", String(timeout)])
  }

  /// A line of `bucketfs stats` (the root's stats attribute), by its name.
  func stat(_ name: String) -> String? {
    guard let text = try? getxattr(mountpoint.path, "user.bucketfs.stats").get() else { return nil }
    for line in text.split(separator: "\n") {
      let parts = line.split(separator: "\t", maxSplits: 1)
      if parts.count == 2 && parts[0] == name { return String(parts[1]) }
    }
    return nil
  }

  /// Changes that went beside an object changed elsewhere, as conflict copies ("…, N conflicts"
  /// on the stats' write-back line); nil when the mount has no write-back queue.
  var conflicts: Int? {
    count("write-back queue", "conflicts")
  }

  /// A count from a stats line of "N what, M other" parts: the N before `what`.
  func count(_ line: String, _ what: String) -> Int? {
    stat(line)?.split(separator: ", ").lazy.compactMap { part -> Int? in
      let words = part.split(separator: " ", maxSplits: 1)
      return words.count == 2 && words[1] == what ? Int(words[0]) : nil
    }.first
  }

  /// The write-back queue's changes carried out, and refused for good, since the mount started.
  var queueDone: Int? { count("write-back queue", "done") }
  var queueFailed: Int? { count("write-back queue", "failed") }
  /// Staged copies evicted, and dropped as damaged, since the mount started.
  var stagedEvicted: Int? { count("staged copies", "evicted") }
  var stagedDropped: Int? { count("staged copies", "dropped as damaged") }

  /// Requests to the bucket that failed so far ("N (F failed)" in the stats).
  var failedRequests: Int {
    guard let line = stat("requests to the bucket"), let failed = line.split(separator: "(").last?.split(separator: " ").first else { return 0 }
    return Int(failed) ?? 0
  }

  /// Detaches the mount and ends the daemon. A daemon that `SIGKILL` cannot end (a thread of it
  /// left waiting in the kernel) has its connection aborted, so that no test waits for it for ever.
  func unmount() {
    if isMounted {
      _ = runTool("/bin/fusermount3", ["-u", "-z", mountpoint.path], timeout: .seconds(30))
    }
    if process.wait(timeout: .seconds(10)) == nil {
      process.send(SIGKILL)
      if process.wait(timeout: .seconds(30)) == nil {
        abortConnection()
        process.wait(timeout: .seconds(30))
      }
    }
  }

  /// Aborts the FUSE connection (`echo 1 > /sys/fs/fuse/connections/N/abort`): every request
  /// waiting in it fails at once (ECONNABORTED), and whatever waited in the kernel for one of
  /// them, a killed daemon's thread included, goes on. fusectl is mounted at its usual place
  /// when it is not. Never a forced unmount: that also unmounts when nothing is busy, and a
  /// program still working in the mount goes on in the folder under it.
  func abortConnection() {
    guard let connection else { return }
    let folder = "/sys/fs/fuse/connections"
    let mounts = (try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8)) ?? ""
    if !mounts.contains(" \(folder) ") {
      _ = runTool("/bin/mount", ["-t", "fusectl", "fusectl", folder], timeout: .seconds(10))
    }
    // None when the connection ended already.
    guard let abort = FileHandle(forWritingAtPath: "\(folder)/\(connection)/abort") else { return }
    try? abort.write(contentsOf: Data("1".utf8))
    try? abort.close()
  }

  /// Where each of the daemon's threads is in the kernel (/proc/PID/task/*/stack): what a
  /// daemon that would not end was waiting for.
  var kernelStacks: String {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(process.pid)/task")) ?? []
    return tasks.sorted().map { task in
      let dir = "/proc/\(process.pid)/task/\(task)"
      let name = (try? String(contentsOfFile: dir + "/comm", encoding: .utf8)) ?? "?"
      let stack = (try? String(contentsOfFile: dir + "/stack", encoding: .utf8)) ?? "?"
      return "thread \(task) (\(name.trimmingCharacters(in: .whitespacesAndNewlines))):\n\(stack)"
    }.joined(separator: "\n")
  }
}

func sha256(_ data: Data) -> String {
  let d = Digest(.sha256)
  d.update(data)
  return Digest.hex(d.finalize())
}

/// Reads a whole file with read(2); returns the bytes or the errno.
func readFile(_ path: String, chunk: Int = 128 * 1024) -> Result<Data, Errno> {
  let fd = open(path, O_RDONLY)
  guard fd >= 0 else { return .failure(Errno(errno)) }
  defer { close(fd) }
  var out = Data()
  var buffer = [UInt8](repeating: 0, count: chunk)
  while true {
    let n = read(fd, &buffer, chunk)
    if n < 0 { return .failure(Errno(errno)) }
    if n == 0 { return .success(out) }
    out.append(contentsOf: buffer[0..<n])
  }
}

func pread(_ fd: Int32, offset: Int64, count: Int) -> Result<Data, Errno> {
  var buffer = [UInt8](repeating: 0, count: count)
  let n = Foundation.pread(fd, &buffer, count, off_t(offset))
  if n < 0 { return .failure(Errno(errno)) }
  return .success(Data(buffer[0..<n]))
}

struct Errno: Error, Equatable, CustomStringConvertible {
  let code: Int32
  init(_ code: Int32) { self.code = code }
  var description: String { String(cString: strerror(code)) }
}

// Glibc's module map leaves out <sys/xattr.h>; the libc functions are found at run time instead.
private typealias GetXattr = @convention(c) (UnsafePointer<CChar>, UnsafePointer<CChar>, UnsafeMutableRawPointer?, Int) -> Int
private typealias ListXattr = @convention(c) (UnsafePointer<CChar>, UnsafeMutablePointer<CChar>?, Int) -> Int
nonisolated(unsafe) private let libc = dlopen(nil, RTLD_NOW)
private let getxattrFunction = unsafeBitCast(dlsym(libc, "getxattr")!, to: GetXattr.self)
private let listxattrFunction = unsafeBitCast(dlsym(libc, "listxattr")!, to: ListXattr.self)

func getxattr(_ path: String, _ name: String, size: Int = 4096) -> Result<String, Errno> {
  var buffer = [UInt8](repeating: 0, count: max(size, 1))
  let n = buffer.withUnsafeMutableBytes { getxattrFunction(path, name, size == 0 ? nil : $0.baseAddress, size) }
  if n < 0 { return .failure(Errno(errno)) }
  if size == 0 { return .success(String(n)) }
  return .success(String(decoding: buffer[0..<n], as: UTF8.self))
}

/// Names of the extended attributes, or the errno with a buffer of `size`.
func listxattr(_ path: String, size: Int = 65536) -> Result<[String], Errno> {
  var buffer = [CChar](repeating: 0, count: size)
  let n = listxattrFunction(path, &buffer, size)
  if n < 0 { return .failure(Errno(errno)) }
  return .success(buffer[0..<n].split(separator: 0).map { String(decoding: $0.map { UInt8(bitPattern: $0) }, as: UTF8.self) })
}

/// Waits (up to 30 s: large copies on a loaded machine) until the mount says the file is staged
/// completely; records an issue if not.
func waitStaged(_ path: String) async throws {
  for _ in 0..<600 {
    if (try? getxattr(path, "user.staged").get()) == "complete" { return }
    try await Task.sleep(for: .milliseconds(50))
  }
  Issue.record("\(path) was not staged")
}

/// The port of a mount's metrics page (mounted with `metrics=127.0.0.1:0`), from its log.
func metricsPort(_ m: MountedBucket) async throws -> Int {
  for _ in 0..<100 {
    if let range = m.log.range(of: "metrics at http://127.0.0.1:"), let port = Int(m.log[range.upperBound...].prefix { $0.isNumber }) {
      return port
    }
    try await Task.sleep(for: .milliseconds(50))
  }
  Issue.record("no metrics address in the log: \(m.log)")
  return 0
}

/// The records in a write-back queue folder's journal (`changes.log`: frames of a little-endian
/// length, a CRC32C and a JSON payload; the last frame of a change wins, a removal drops it),
/// read as the mount reads them, by sequence number; the frames that were read, in order.
func queueRecords(_ queueFolder: URL) -> (live: [UInt64: [String: Any]], frames: [[String: Any]]) {
  let data = FileManager.default.contents(atPath: queueFolder.appendingPathComponent("changes.log").path) ?? Data()
  var live: [UInt64: [String: Any]] = [:]
  var frames: [[String: Any]] = []
  var at = data.startIndex
  func u32(_ i: Int) -> Int { (0..<4).reduce(0) { $0 | Int(data[i + $1]) << (8 * $1) } }
  while data.endIndex - at >= 8 {
    let length = u32(at)
    guard data.endIndex - at - 8 >= length,
      let object = try? JSONSerialization.jsonObject(with: data[(at + 8)..<(at + 8 + length)]) as? [String: Any]
    else { break }
    frames.append(object)
    if let removed = object["removed"] as? Int {
      live.removeValue(forKey: UInt64(removed))
    } else if let sequence = object["sequence"] as? Int {
      live[UInt64(sequence)] = object
    }
    at += 8 + length
  }
  return (live, frames)
}
