@testable import BucketFS
import ChildProcess
import Foundation
import StorageCore
import StorageEmulator
import TestSupport
import Testing

/// Crash states as a user meets them: the queue a power loss could leave (replayed from the
/// recorded file operations, as `CrashStateTests` does) put in a staging folder, and a real
/// writable mount started on it, against the emulator: `bucketfs sync` empties the queue, the
/// bucket holds for each name what the queue showed of it, and so does the mount.
@Suite(.serialized) struct CrashStateMountTests {
  /// New objects only (based on generation 0, an empty bucket), so that every state starts
  /// from a new emulator; a rename-like delete of one of them after its upload.
  static let steps: [CrashStateTests.Step] = [
    ("a", Data("a, first version\n".utf8), .generation(0)),
    ("b", Data("b, only version\n".utf8), .generation(0)),
    ("a", Data("a, second version, longer\n".utf8), .generation(0)),
    ("b", nil, .generation(0)),
    ("a", Data("a3\n".utf8), .generation(0)),
  ]

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

  @Test func sampledCrashStatesMountAndLandAsTheQueueShowedThem() async throws {
    let work = FileManager.default.temporaryDirectory.appendingPathComponent("crash-mount-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: work) }
    // The operations of the steps, linked as edits' files are, with a group commit after the
    // first upload of a and after the delete.
    let queueFolder = work.appendingPathComponent("recorded/queue")
    let disk = CrashStateTests.RecordingDisk()
    let queue = try WriteBackQueue(folder: queueFolder, disk: disk, commit: 3600) { _ in }
    for (i, step) in Self.steps.enumerated() {
      try CrashStateTests.perform(step, as: i, on: queue, disk: disk)
      if i == 0 || i == 3 { try queue.commit() }
    }
    let states = CrashStateTests.crashStates(disk.operations, folder: queueFolder.path)
    // Eight states spread over the cuts, the last (everything) among them.
    let picked = Array(Set(stride(from: 0, to: states.count, by: max(1, states.count / 7)).map { $0 } + [states.count - 1])).sorted()
    #expect(picked.count >= 6, "\(states.count) states")
    let bucket = "crash-bucket"
    for index in picked {
      let (cut, files) = states[index]
      let label = "state \(index) (cut \(cut): \(files.keys.sorted()))"
      let root = work.appendingPathComponent("state-\(index)")
      // What the queue shows of each name in this state, read from a copy of it.
      let copy = root.appendingPathComponent("copy")
      try FileManager.default.createDirectory(at: copy, withIntermediateDirectories: true)
      for (name, data) in files { try data.write(to: copy.appendingPathComponent(name)) }
      var shown: [String: Data?] = [:]
      let view = try WriteBackQueue(folder: copy) { _ in }
      for name in Set(Self.steps.map(\.name)) {
        switch view.view(name) {
        case .file(let path, _, _)?: shown[name] = .some(FileManager.default.contents(atPath: path))
        case .deleted?: shown[name] = .some(nil)
        default: break
        }
      }
      // The state as a mount's staging folder holds it.
      let staging = root.appendingPathComponent("staging")
      let stateQueue = staging.appendingPathComponent(String(StagingIndex.hash(bucket).prefix(16))).appendingPathComponent("queue")
      try FileManager.default.createDirectory(at: stateQueue, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
      for folder in [staging, stateQueue.deletingLastPathComponent()] { chmod(folder.path, 0o700) }
      for (name, data) in files { try data.write(to: stateQueue.appendingPathComponent(name)) }

      var config = StorageEmulator.Configuration(root: root.appendingPathComponent("server"))
      config.port = 0
      let emulator = try StorageEmulator(config)
      defer { emulator.stop() }
      let mountpoint = root.appendingPathComponent("mnt")
      try FileManager.default.createDirectory(at: mountpoint, withIntermediateDirectories: true)
      let log = root.appendingPathComponent("mount.log")
      _ = FileManager.default.createFile(atPath: log.path, contents: nil)
      let logFile = try FileHandle(forWritingTo: log)
      let mount = try ChildProcess(
        Self.binary,
        ["mount", "gs://\(bucket)", mountpoint.path, "-f", "--emulator", "127.0.0.1:\(emulator.port)", "-o", "writable,staging_dir=\(staging.path)"],
        environment: ProcessInfo.processInfo.environment.merging(["HOME": root.path]) { _, new in new },
        errors: .descriptor(logFile.fileDescriptor))
      try? logFile.close()
      defer {
        if Self.isMounted(mountpoint.path) { _ = runTool("/bin/fusermount3", ["-u", "-z", mountpoint.path], timeout: .seconds(30)) }
        if mount.wait(timeout: .seconds(10)) == nil {
          mount.send(SIGKILL)
          mount.wait()
        }
      }
      #expect(await eventually(timeout: .seconds(30)) { Self.isMounted(mountpoint.path) || !mount.isRunning }, "\(label)")
      try #require(Self.isMounted(mountpoint.path), "\(label): \((try? String(contentsOf: log, encoding: .utf8)) ?? "")")
      // Everything carried out. (Bytes whose record a power loss took, a close not committed,
      // are kept aside, not uploaded: then sync says so and exits 1.)
      let (synced, output) = runTool(Self.binary, ["sync", mountpoint.path, "--timeout", "60"])
      #expect(synced == 0 || (synced == 1 && output.contains("0 changes waiting, 0 failed")), "\(label): \(output)")

      let storage = Storage(bucket: bucket)
      storage.useEmulator(host: "127.0.0.1", port: emulator.port)
      for name in Set(Self.steps.map(\.name)) {
        let inBucket = try? await storage.reference().object(named: name).data(maxSize: 1 << 20)
        let expected: Data? = shown[name] ?? nil
        #expect(inBucket == expected, "\(label): \(name) in the bucket")
        let throughMount = FileManager.default.contents(atPath: mountpoint.appendingPathComponent(name).path)
        #expect(throughMount == expected, "\(label): \(name) through the mount")
      }
      let objects = try await storage.reference().listAll().items.map(\.name)
      #expect(Set(objects).isSubset(of: ["a", "b"]), "\(label): \(objects)")
    }
  }
}
