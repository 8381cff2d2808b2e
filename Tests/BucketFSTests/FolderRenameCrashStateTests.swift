@testable import BucketFS
import Foundation
import StorageCore
import StorageEmulator
import Synchronization
import TestSupport
import Testing

/// A folder rename through a mount on a flat bucket is one step of the write-back queue (issue
/// 56): after `kill -9` at any point, the queue a new mount loads holds the move of every file
/// in the folder or of none, each with its old name's delete. Before, each file's move was an
/// append of its own, and a cut between two left the folder split between its names. A power
/// loss before the group commit may lose the bytes a moved file's record names (Firebase: the
/// new name is an upload); then that file keeps its old name (its delete is dropped), never none.
///
/// An offline mount (nothing is carried out, so the queue holds what the rename made) records
/// its queue's disk operations (`RecordedQueueDisk`) through a write and the rename;
/// every cut of the recording is tried, with none, all or some of the operations no fsync
/// covered, and the queue of each state is loaded as a new mount would.
@Suite(.serialized) struct FolderRenameCrashStateTests {
  @Test(arguments: ["gcs", "firebase"]) func aFolderRenameIsQueuedWholeOrNotAtAll(api: String) async throws {
    let work = URL(fileURLWithPath: "/tmp").appendingPathComponent("rename-crash-\(UUID().uuidString.prefix(8))")
    try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    var keep = false
    defer { if !keep { try? FileManager.default.removeItem(at: work) } }

    var config = StorageEmulator.Configuration(root: work.appendingPathComponent("server"))
    config.port = 0
    let emulator = try StorageEmulator(config)
    defer { emulator.stop() }
    let storage = Storage(bucket: WholeMountCrashStateTests.bucket)
    storage.useEmulator(host: "127.0.0.1", port: emulator.port)
    var files = (0..<24).map { "d/f\($0)" } + (0..<6).map { "d/sub/g\($0)" }
    for name in files { _ = try await storage.reference().object(named: name).putDataAsync(Data(name.utf8)) }

    // Pinned online: offline, the folder is known whole (a rename moves all of it or refuses).
    let staging = work.appendingPathComponent("staging")
    do {
      let online = try await WholeMountCrashStateTests.Mount(root: work, staging: staging, port: emulator.port, api: api)
      defer { online.unmount() }
      let (status, output) = online.shell("'\(WholeMountCrashStateTests.binary)' pin d")
      #expect(status == 0, "\(output)")
    }
    // Offline, nothing is carried out: the queue holds what the rename made.
    let recordingPath = work.appendingPathComponent("queue-disk.jsonl").path
    let m = try await WholeMountCrashStateTests.Mount(
      root: work, staging: staging, port: emulator.port, api: api, environment: ["BUCKETFS_RECORD_QUEUE_DISK": recordingPath],
      options: ["offline"])
    defer { m.unmount() }
    // A file written here and not yet uploaded moves with the rest (its bytes, not a copy).
    let (status, output) = m.shell("echo edited > d/edited; mv d e; test -f e/sub/g5 && test -f e/edited && ! test -e d")
    #expect(status == 0, "\(output)\n\(m.log.suffix(3000))")
    files.append("d/edited")
    m.unmount()

    let recording = try WholeMountCrashStateTests.read(recordingPath)
    let ops = recording.ops
    let cover = CrashStateTests.Cover(ops)
    let queueFolder = staging.appendingPathComponent(String(StagingIndex.hash(WholeMountCrashStateTests.bucket).prefix(16))).appendingPathComponent("queue").path
    var generator = SeededGenerator(seed: 56)
    var violations: [String] = []
    var wholeRenames = 0
    for cut in 1...ops.count {
      let loose = cover.loose(cut: cut)
      let (n, d) = (loose.names.count, loose.data.count)
      for kept in [(0, 0), (n, d), (Int.random(in: 0...n, using: &generator), Int.random(in: 0...d, using: &generator))] {
        let state = cover.state(cut: cut, keptNames: kept.0, keptData: kept.1, folder: queueFolder)
        let folder = work.appendingPathComponent("state")
        try? FileManager.default.removeItem(at: folder)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        for (name, data) in state where !name.contains("/") { try data.write(to: folder.appendingPathComponent(name)) }
        let said = Mutex<[String]>([])
        let queue = try WriteBackQueue(folder: folder) { line in said.withLock { $0.append(line) } }
        let changes = queue.queued
        let moved = Set(changes.filter { $0.kind != .delete && $0.name.hasPrefix("e/") && !$0.name.hasSuffix("/") }.map(\.name))
        let deleted = Set(changes.filter { $0.kind == .delete && $0.name.hasPrefix("d/") && !$0.name.hasSuffix("/") }.map(\.name))
        let expected = Set(files.map { "e/" + $0.dropFirst(2) })
        if moved.isEmpty && deleted.isEmpty { continue }
        if moved == expected && deleted == Set(files) {
          wholeRenames += 1
          continue
        }
        // Each file keeps exactly one name: its move and its old name's delete stand together.
        let split = files.filter { moved.contains("e/" + $0.dropFirst(2)) != deleted.contains($0) }
        // A kill keeps every operation made (only a power loss can lose the bytes a record names).
        let killed = kept == (n, d)
        guard killed || !split.isEmpty else { continue }
        violations.append(
          "cut \(cut) of \(ops.count) (\(kept.0) of \(n) loose names, \(kept.1) of \(d) loose contents kept): \(moved.count) of \(expected.count) moves queued, \(deleted.count) of \(files.count) old names' deletes; under both names or neither: \(split); the queue said \(said.withLock { $0 })\n  \(queue.describe().replacingOccurrences(of: "\n", with: "\n  "))"
        )
      }
    }
    #expect(wholeRenames > 0, "no crash state held the rename: the recording has \(ops.count) operations")
    for violation in violations.prefix(5) { Issue.record(Comment(rawValue: "\(api) API: \(violation)")) }
    if !violations.isEmpty {
      keep = true
      print("folder rename crash states: \(violations.count) split; the recording is in \(work.path)")
    }
  }
}
