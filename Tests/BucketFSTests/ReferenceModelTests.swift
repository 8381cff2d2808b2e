import BucketFS
import Foundation
import TestSupport
import StorageCore
import Testing

/// Random operation sequences against the filesystem, each answer checked against a simple model
/// of the bucket (the shape of mountpoint-s3's reference-model tests), with a client that fails,
/// resets, delays and returns short reads on purpose. Every answer must be exactly right or an
/// error; no read may return bytes of another generation or fewer bytes than the object has.
/// `BUCKETFS_MODEL_STEPS` runs longer, `BUCKETFS_MODEL_SEED` replays one seed.
@Suite struct ReferenceModelTests {
  static let names = ["a", "a/x", "a.object", "a.object/y", "b.txt", "d/e/f", "d/g", "d/e.object", "empty"]
  static let folders = ["", "a", "a.object", "d", "d/e"]

  struct OpenFile {
    var handle: UInt64
    var object: String
    var bytes: Data
    var generation: Int64
    /// A read of the handle was answered: until then, a version replaced since the open may be
    /// swapped for the newest one, which a program that read nothing cannot tell from opening later.
    var answered = false
  }

  /// The model: object name → (bytes, generation).
  struct Model {
    var objects: [String: (Data, Int64)] = [:]

    func isFolder(_ path: String) -> Bool {
      path.isEmpty || objects.keys.contains { $0.hasPrefix(path + "/") }
    }

    /// Sub-folders and objects directly in `folder`.
    func children(_ folder: String) -> (folders: Set<String>, objects: Set<String>) {
      let prefix = folder.isEmpty ? "" : folder + "/"
      var folders = Set<String>()
      var objects = Set<String>()
      for name in self.objects.keys where name.hasPrefix(prefix) {
        let rest = name.dropFirst(prefix.count)
        if let slash = rest.firstIndex(of: "/") { folders.insert(String(rest[..<slash])) } else { objects.insert(name) }
      }
      return (folders, objects)
    }
  }

  func run(seed: UInt64, steps: Int, faults: FaultyObjectClient.Faults) async throws {
    var rng = SeededGenerator(seed: seed)
    let client = FaultyObjectClient(seed: seed &* 31, faults: faults)
    let stagingDir = FileManager.default.temporaryDirectory.appendingPathComponent("model-\(seed)-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: stagingDir) }
    let staging = try StagingArea(folder: stagingDir, bucket: client.bucket, sizeLimit: 64 << 20, maxFile: 8 << 20, log: { _ in })
    var options = MountOptions()
    options.cacheSize = 2 << 20
    options.metadataTTL = -1  // no caching: every answer must match the model as it is now
    options.readTimeout = 5
    let fs = BucketFilesystem(client: client, prefix: "", options: options, staging: staging, log: { _ in })
    var model = Model()
    var open: [OpenFile] = []
    /// Every version written, by generation: a handle that moved reads one of them.
    var versions: [Int64: Data] = [:]
    var goodReads = 0
    var goodListings = 0
    func where_(_ step: Int) -> String { "seed \(seed), step \(step)" }

    for step in 0..<steps {
      // The in-memory client answers without suspending: without a yield a run holds its pool
      // thread for seconds, and the tests beside it (two threads on two cores) wait that long.
      await Task.yield()
      switch Int.random(in: 0..<100, using: &rng) {
      case 0..<18:
        let name = Self.names.randomElement(using: &rng)!
        let size = [0, 1, 1000, 131_072, 131_073, 300_000, 700_000].randomElement(using: &rng)!
        let bytes = randomData(size, using: &rng)
        let generation = client.put(name, bytes)
        model.objects[name] = (bytes, generation)
        versions[generation] = bytes
      case 18..<24:
        let name = Self.names.randomElement(using: &rng)!
        client.delete(name)
        model.objects.removeValue(forKey: name)
      case 24..<44:
        let folder = Self.folders.randomElement(using: &rng)!
        let entries: [DirectoryEntry]
        do {
          entries = try await fs.listing(folder)
        } catch {
          #expect(error.errno == EIO, "\(where_(step)): listing \(folder) failed with \(error.errno)")
          continue
        }
        goodListings += 1
        let names = entries.map(\.name)
        #expect(Set(names).count == names.count, "\(where_(step)): duplicate names in \(folder): \(names)")
        let expected = model.children(folder)
        #expect(Set(entries.filter(\.isDirectory).map(\.name)) == expected.folders, "\(where_(step)): folders of \(folder)")
        let files = entries.filter { !$0.isDirectory }
        #expect(Set(files.compactMap(\.objectName)) == expected.objects, "\(where_(step)): objects of \(folder): \(files.map(\.name))")
        #expect(Set(files.compactMap(\.objectName)).count == files.count, "\(where_(step)): an object shown twice in \(folder)")
        for file in files {
          guard let object = file.objectName, let (bytes, generation) = model.objects[object] else { continue }
          // Names first: a listing of names only carries no attributes; those it carries are right.
          if let m = file.metadata {
            #expect(m.size == Int64(bytes.count) && m.generation == generation, "\(where_(step)): \(file.name)")
          }
          // The shown name resolves to the same object.
          let folderIno: UInt64
          do {
            folderIno = try await fs.folderIno(folder)
            let attrs = try await fs.lookup(parent: folderIno, name: file.name)
            #expect(!attrs.isDirectory && attrs.size == Int64(bytes.count), "\(where_(step)): lookup of \(file.name) in \(folder)")
          } catch {
            #expect(error.errno == EIO, "\(where_(step)): lookup of \(file.name) failed with \(error.errno)")
          }
        }
      case 44..<52:
        // Names that exist nowhere are ENOENT (or EIO under faults), never something else.
        let folder = Self.folders.randomElement(using: &rng)!
        guard model.isFolder(folder) else { continue }
        let ghost = ["ghost", "ghost.object", "x.object.1"].randomElement(using: &rng)!
        do {
          let ino = try await fs.folderIno(folder)
          let attrs = try await fs.lookup(parent: ino, name: ghost)
          Issue.record("\(where_(step)): \(folder)/\(ghost) exists: \(attrs)")
        } catch {
          #expect(error.errno == ENOENT || error.errno == EIO, "\(where_(step)): ghost lookup gave \(error.errno)")
        }
      case 52..<64:
        // Open an object the model has, through its shown name.
        guard let object = model.objects.keys.sorted().randomElement(using: &rng) else { continue }
        let folder = object.contains("/") ? String(object[..<object.lastIndex(of: "/")!]) : ""
        do {
          let entries = try await fs.listing(folder)
          guard let entry = entries.first(where: { $0.objectName == object }) else {
            Issue.record("\(where_(step)): \(object) is not in the listing of \(folder)")
            continue
          }
          let ino = try await fs.folderIno(folder)
          var attrs = try await fs.lookup(parent: ino, name: entry.name)
          let handle: UInt64
          do {
            handle = try await fs.open(attrs.ino, flags: O_RDONLY).handle
          } catch where error.errno == ESTALE {
            // Sent to an inode of its own (other opens of the inode read another version): as
            // the kernel does, the name is looked up again and that inode opened, once.
            attrs = try await fs.lookup(parent: ino, name: entry.name)
            handle = try await fs.open(attrs.ino, flags: O_RDONLY).handle
          }
          let (bytes, generation) = model.objects[object]!
          open.append(OpenFile(handle: handle, object: object, bytes: bytes, generation: generation))
        } catch {
          #expect(error.errno == EIO, "\(where_(step)): opening \(object) failed with \(error.errno)")
        }
      case 64..<92:
        guard !open.isEmpty else { continue }
        let index = Int.random(in: 0..<open.count, using: &rng)
        var file = open[index]
        if !file.answered {
          // Nothing read yet: the handle may move to the newest version at its first read (a
          // new open must not fail for a change it could not see); then it reads that one.
          // Until one is answered (an injected fault fails some): the move happens at most once.
          var probe: Data?? = nil
          for _ in 0..<10 {
            do {
              probe = try await fs.read(handle: file.handle, offset: 0, count: 1).data()
              break
            } catch where error.errno == EIO {
              continue
            } catch {
              break
            }
          }
          if let g = fs.handleGeneration(file.handle), g != file.generation {
            #expect(g > file.generation && versions[g] != nil, "\(where_(step)): \(file.object) moved to generation \(g)")
            file.bytes = versions[g] ?? file.bytes
            file.generation = g
          }
          if let probe {
            file.answered = true
            #expect(probe == file.bytes.prefix(1), "\(where_(step)): first byte of \(file.object)")
          }
          open[index] = file
          guard file.answered else { continue }
        }
        let changed = model.objects[file.object]?.1 != file.generation
        let size = file.bytes.count
        let offset = Int.random(in: 0...(size + 10), using: &rng)
        let count = [1, 4096, 131_072, 200_000, 1 << 20].randomElement(using: &rng)!
        do {
          let data = try await fs.read(handle: file.handle, offset: Int64(offset), count: count).data()
          file.answered = true
          open[index] = file
          let end = min(size, offset + count)
          let expected = offset < end ? file.bytes.subdata(in: offset..<end) : Data()
          #expect(data == expected, "\(where_(step)): read \(offset)+\(count) of \(file.object) (gen \(file.generation)) gave \(data?.count ?? -1) wrong bytes")
          goodReads += 1
        } catch {
          // A replaced object may fail with ESTALE; anything else only as EIO (injected faults).
          #expect(error.errno == EIO || (changed && error.errno == ESTALE), "\(where_(step)): read failed with \(error.errno)")
        }
      default:
        guard !open.isEmpty else { continue }
        let file = open.remove(at: Int.random(in: 0..<open.count, using: &rng))
        fs.release(handle: file.handle)
      }
    }
    for file in open { fs.release(handle: file.handle) }
    // The run exercised the filesystem, not only its error paths.
    #expect(goodReads > steps / 20, "seed \(seed): only \(goodReads) reads succeeded")
    #expect(goodListings > steps / 20, "seed \(seed): only \(goodListings) listings succeeded")
  }


  static var seeds: [UInt64] {
    if let seed = ProcessInfo.processInfo.environment["BUCKETFS_MODEL_SEED"].flatMap(UInt64.init) { return [seed] }
    return [1, 2, 3]
  }

  static var steps: Int { ProcessInfo.processInfo.environment["BUCKETFS_MODEL_STEPS"].flatMap(Int.init) ?? 1500 }

  @Test(arguments: seeds) func wellBehavedBucket(seed: UInt64) async throws {
    try await run(seed: seed, steps: Self.steps, faults: FaultyObjectClient.Faults())
  }

  @Test(arguments: seeds) func misbehavingBucket(seed: UInt64) async throws {
    let faults = FaultyObjectClient.Faults(errorRate: 0.05, shortReadRate: 0.05, resetRate: 0.05, delayRate: 0.2)
    try await run(seed: seed &+ 1000, steps: Self.steps, faults: faults)
  }
}
