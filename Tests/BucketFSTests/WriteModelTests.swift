@testable import BucketFS
import Foundation
import StorageCore
import Synchronization
import TestSupport
import Testing

/// Random sequences of writes, renames, unlinks and folders through a writable filesystem, with
/// no kernel: each answer is checked against a model of what the mount must show, reads and
/// listings included, while the queue carries the changes out against the in-memory bucket
/// (with its generation preconditions), sometimes with the server away. At the end the queue
/// empties and the bucket holds exactly the model's files. The shape of mountpoint-s3's
/// reference-model tests, for the write side. `BUCKETFS_MODEL_SEED` replays one seed.
@Suite struct WriteModelTests {
  static let folders = ["", "p", "p/q", "r"]
  static let leaves = ["f1", "f2", "g.txt", "h"]

  /// What the mount must show: files by path, and folders made here (a folder also exists while
  /// a file is under it).
  struct Model {
    var files: [String: Data] = [:]
    var made: Set<String> = [""]

    func isFolder(_ path: String) -> Bool {
      made.contains(path) || files.keys.contains { $0.hasPrefix(path + "/") } || made.contains { $0.hasPrefix(path + "/") }
    }

    func children(_ folder: String) -> Set<String> {
      let prefix = folder.isEmpty ? "" : folder + "/"
      var out = Set<String>()
      for path in Array(files.keys) + Array(made) where path.hasPrefix(prefix) && path != folder {
        let rest = path.dropFirst(prefix.count)
        out.insert(String(rest.split(separator: "/", maxSplits: 1)[0]))
      }
      return out
    }
  }

  func run(seed: UInt64, steps: Int) async throws {
    var rng = SeededGenerator(seed: seed)
    let client = MemoryObjectClient()
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("write-model-\(seed)-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: folder) }
    let staging = try StagingArea(folder: folder, bucket: client.bucket, sizeLimit: 64 << 20, maxFile: 8 << 20, log: { _ in })
    var options = MountOptions()
    options.cacheSize = 2 << 20
    options.writable = true
    options.readTimeout = 10
    let trace = ProcessInfo.processInfo.environment["BUCKETFS_MODEL_TRACE"] != nil
    let fs = BucketFilesystem(client: client, prefix: "", options: options, staging: staging, log: { if trace { print("log: \($0)") } })
    var model = Model()
    var checks = 0
    func at(_ step: Int) -> String { "seed \(seed), step \(step)" }

    for step in 0..<steps {
      await Task.yield()
      let dir = Self.folders.randomElement(using: &rng)!
      let path = dir.isEmpty ? Self.leaves.randomElement(using: &rng)! : dir + "/" + Self.leaves.randomElement(using: &rng)!
      let name = String(path.split(separator: "/").last!)
      var op = ""
      do {
      switch Int.random(in: 0..<100, using: &rng) {
      case 0..<8:
        // The server goes away for a few writes: the changes wait and go later.
        client.writesToRefuse.store(Int.random(in: 1...6, using: &rng), ordering: .relaxed)
      case 8..<15:
        guard !dir.isEmpty, !model.isFolder(dir), model.isFolder(parentOf(dir)) else { continue }
        guard model.files[dir] == nil else { continue }
        op = "mkdir"
        let parent = try await fs.folderIno(parentOf(dir))
        _ = try await fs.mkdir(parent: parent, name: String(dir.split(separator: "/").last!))
        model.made.insert(dir)
      case 15..<45:
        // Write a file whole (create or truncate), in one or two writes, and close it.
        guard model.isFolder(dir), !model.isFolder(path) else { continue }
        op = "write"
        let bytes = randomData([0, 1, 5000, 70_000].randomElement(using: &rng)!, using: &rng)
        let parent = try await fs.folderIno(dir)
        let (_, handle, _) = try await fs.create(parent: parent, name: name, flags: O_WRONLY | O_CREAT | O_TRUNC)
        let half = bytes.count / 2
        for (offset, piece) in [(0, bytes.prefix(half)), (half, bytes.suffix(from: half))] where !piece.isEmpty {
          let n = try Data(piece).withUnsafeBytes { raw throws(FSError) in try fs.write(handle: handle, offset: Int64(offset), data: raw) }
          #expect(n == piece.count, "\(at(step)): short write")
        }
        try fs.flush(handle: handle)
        fs.release(handle: handle)
        model.files[path] = bytes
      case 45..<55:
        op = "unlink"
        guard model.isFolder(dir) else { continue }
        let parent = try await fs.folderIno(dir)
        do {
          try await fs.unlink(parent: parent, name: name)
          #expect(model.files.removeValue(forKey: path) != nil, "\(at(step)): unlinked \(path), which is not there")
        } catch {
          #expect(model.files[path] == nil && (error.errno == ENOENT || error.errno == EISDIR), "\(at(step)): unlink \(path): \(error.errno)")
        }
      case 55..<67:
        // Rename a file to another name (in another folder, maybe over a file).
        guard let source = model.files.keys.sorted().randomElement(using: &rng) else { continue }
        guard model.isFolder(dir), !model.isFolder(path), source != path else { continue }
        op = "rename"
        let from = try await fs.folderIno(parentOf(source))
        let to = try await fs.folderIno(dir)
        try await fs.rename(parent: from, name: String(source.split(separator: "/").last!), newParent: to, newName: name, flags: 0)
        model.files[path] = model.files.removeValue(forKey: source)
        if trace { print("step \(step): rename \(source) -> \(path)") }
      case 67..<85:
        // What the mount shows now, before the bucket has it: the bytes of a file.
        guard let file = model.files.keys.sorted().randomElement(using: &rng) else { continue }
        op = "read"
        let parent = try await fs.folderIno(parentOf(file))
        let attrs = try await fs.lookup(parent: parent, name: String(file.split(separator: "/").last!))
        let expected = model.files[file]!
        #expect(attrs.size == Int64(expected.count), "\(at(step)): size of \(file)")
        let (handle, _) = try await fs.open(attrs.ino, flags: O_RDONLY)
        let data = try await fs.read(handle: handle, offset: 0, count: expected.count + 10).data()
        fs.release(handle: handle)
        #expect(data == expected, "\(at(step)): \(file) read \(data?.count ?? -1) bytes, not its \(expected.count)")
        checks += 1
      default:
        guard model.isFolder(dir) else { continue }
        op = "list"
        let shown = Set(try await fs.listing(dir).map(\.name))
        let merged = try await fs.mergedListing(dir) { () async throws(FSError) in try await fs.listing(dir) }
        #expect(
          Set(merged.map(\.name)) == model.children(dir),
          "\(at(step)): listing of \(dir): \(merged.map(\.name)) (listed: \(shown) \((fs.namespace.listings.current(dir) ?? []).map { "\($0.name)=\($0.objectName ?? "-")@\($0.metadata?.generation ?? -1)" }); in the bucket: \(client.objects.withLock { $0.keys.sorted() }); queued: \(fs.queueText()))")
        checks += 1
      }
      } catch {
        Issue.record("\(at(step)): \(op) \(path) (in \(dir)) failed: \(error)")
        return
      }
      if trace, !op.isEmpty { print("step \(step): \(op) \(path) -> files \(model.files.keys.sorted())") }
    }
    // The queue empties once the server answers; the bucket then holds the model's files exactly.
    client.writesToRefuse.store(0, ordering: .relaxed)
    let left = await fs.writeBack!.queue.waitUntilEmpty(within: 60)
    #expect(left.changes == 0 && left.failed == 0 && left.conflicts == 0, "seed \(seed): \(left)")
    let bucket = client.objects.withLock { $0 }
    let files = bucket.filter { !$0.key.hasSuffix("/") }.mapValues(\.0)
    #expect(files == model.files, "seed \(seed): the bucket has \(files.keys.sorted()), the model \(model.files.keys.sorted())")
    for made in model.made where !made.isEmpty && model.isFolder(made) {
      let underIt = files.keys.contains { $0.hasPrefix(made + "/") } || bucket.keys.contains { $0.hasPrefix(made + "/") }
      #expect(underIt, "seed \(seed): folder \(made) is gone from the bucket")
    }
    #expect(checks > steps / 10, "seed \(seed): only \(checks) checks ran")
  }

  func parentOf(_ path: String) -> String {
    path.contains("/") ? String(path[..<path.lastIndex(of: "/")!]) : ""
  }


  static var seeds: [UInt64] {
    if let seed = ProcessInfo.processInfo.environment["BUCKETFS_MODEL_SEED"].flatMap(UInt64.init) { return [seed] }
    return [1, 2, 3]
  }

  @Test(arguments: seeds) func writesRenamesAndUnlinksMatchTheModel(seed: UInt64) async throws {
    try await run(seed: seed, steps: ProcessInfo.processInfo.environment["BUCKETFS_MODEL_STEPS"].flatMap(Int.init) ?? 400)
  }
}
