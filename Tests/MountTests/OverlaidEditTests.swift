import Foundation
import StorageCore
import StorageEmulator
import TestSupport
import Testing

/// Opening a large object that is not staged to change a few bytes: the edit is an overlay
/// (`EditOverlay`), so the open and the close return without reading the object, and its other
/// bytes come from the bucket afterwards. Every download is held by the emulator while the
/// program writes, which a download at the open or the close would wait on for ever.
@Suite(.serialized) struct OverlaidEditTests {
  static let size = 24 << 20
  static let at = 10 << 20

  /// Holds every download (media GET) until the faults are set again.
  func holdDownloads(_ fx: MountFixture) {
    var faults = Faults()
    faults.hold = true
    faults.pathFilter = "alt=media"
    fx.emulator!.setFaults(faults)
  }

  /// Writes `patch` at `at` into `path` (open, pwrite, close): what `dd conv=notrunc` does.
  func patch(_ path: String, _ patch: Data, at offset: Int) -> (wrote: Int, closed: Int32) {
    let fd = open(path, O_WRONLY)
    guard fd >= 0 else { return (-Int(errno), -1) }
    let n = patch.withUnsafeBytes { pwrite(fd, $0.baseAddress, patch.count, off_t(offset)) }
    return (n, close(fd))
  }

  func inBucket(_ fx: MountFixture, _ name: String) async throws -> Data {
    try await fx.storage.reference().object(named: name).data(maxSize: Int64(Self.size) + 1)
  }

  @Test func aFewBytesIntoALargeObjectReturnBeforeItIsRead() async throws {
    try await MountFixture.scope { fx in
      var expected = randomData(Self.size, seed: 5050)
      _ = try await fx.put("big.bin", expected)
      let m = try fx.mount(options: ["writable"], extra: ["--api", "gcs"])
      #expect(FileManager.default.fileExists(atPath: m.path("big.bin")))
      holdDownloads(fx)
      let bytes = randomData(4096, seed: 5051)
      // Returns though no byte of the object can be read.
      let (wrote, closed) = patch(m.path("big.bin"), bytes, at: Self.at)
      #expect(wrote == 4096)
      #expect(closed == 0)
      expected.replaceSubrange(Self.at..<Self.at + 4096, with: bytes)
      var st = stat()
      #expect(stat(m.path("big.bin"), &st) == 0 && st.st_size == Self.size)

      fx.emulator!.setFaults(Faults())
      // Read through the mount while its upload is pending or done: the whole object, changed.
      #expect(try sha256(readFile(m.path("big.bin")).get()) == sha256(expected))
      let (synced, output) = runTool(bucketfsBinary, ["sync", m.mountpoint.path, "--timeout", "120"])
      #expect(synced == 0, "\(output)")
      #expect(sha256(try await inBucket(fx, "big.bin")) == sha256(expected))
      m.unmount()
    }
  }

  /// Killed after the close and before a byte of the base was read: the next mount reads what
  /// the edit did not write from the bucket and uploads the whole, changed object.
  @Test func anEditKilledBeforeItsBaseWasReadLandsAfterTheNextMount() async throws {
    try await MountFixture.scope { fx in
      var expected = randomData(Self.size, seed: 6060)
      _ = try await fx.put("big.bin", expected)
      let m = try fx.mount(options: ["writable"])
      #expect(FileManager.default.fileExists(atPath: m.path("big.bin")))
      holdDownloads(fx)
      let first = randomData(5000, seed: 6061)
      let last = randomData(3000, seed: 6062)
      #expect(patch(m.path("big.bin"), first, at: 1234) == (5000, 0))
      #expect(patch(m.path("big.bin"), last, at: Self.size - 3000) == (3000, 0))
      expected.replaceSubrange(1234..<1234 + 5000, with: first)
      expected.replaceSubrange(Self.size - 3000..<Self.size, with: last)
      m.process.send(SIGKILL)
      m.process.wait()
      m.unmount()
      fx.emulator!.setFaults(Faults())

      let next = try fx.mount(options: ["writable"], name: "next")
      let (synced, output) = runTool(bucketfsBinary, ["sync", next.mountpoint.path, "--timeout", "120"])
      #expect(synced == 0, "\(output)\n\(next.log)")
      #expect(sha256(try await inBucket(fx, "big.bin")) == sha256(expected))
      #expect(try sha256(readFile(next.path("big.bin")).get()) == sha256(expected))
      next.unmount()
    }
  }

  /// Appends `line` as `>>` does (O_APPEND, one write, close); true when every step worked.
  func append(_ line: String, to path: String) -> Bool {
    let fd = open(path, O_WRONLY | O_APPEND)
    guard fd >= 0 else { return false }
    let bytes = Array(line.utf8)
    let n = write(fd, bytes, bytes.count)
    return close(fd) == 0 && n == bytes.count
  }

  /// A large `big.log` the writable mount has looked up and not read; every download held.
  func bigLogWithDownloadsHeld(_ fx: MountFixture, api: String, seed: UInt64) async throws -> MountedBucket {
    _ = try await fx.put("big.log", randomData(Self.size, seed: seed))
    let m = try fx.mount(options: ["writable"], extra: ["--api", api])
    #expect(FileManager.default.fileExists(atPath: m.path("big.log")))
    holdDownloads(fx)
    return m
  }

  /// An append to a large object the mount had not read, queued, then the mount killed and
  /// the object replaced by another writer before its old bytes were read: the holes cannot be
  /// filled any more, but an append does not need them. The next mount carries what was
  /// appended onto the version that replaced it (it was refused for good, with every later
  /// append of the name behind it: adversary G10 lost 141 of 151 lines that way).
  @Test(arguments: ["firebase", "gcs"]) func anAppendKilledBeforeItsBaseWasReadGoesOntoTheVersionThatReplacedIt(api: String) async throws {
    try await MountFixture.scope { fx in
      let m = try await bigLogWithDownloadsHeld(fx, api: api, seed: 8080)
      #expect(append("ours-1\n", to: m.path("big.log")))
      #expect(append("ours-2\n", to: m.path("big.log")))
      m.process.send(SIGKILL)
      m.process.wait()
      m.unmount()
      let theirs = Data("theirs, written while the mount was down\n".utf8)
      _ = try await fx.put("big.log", theirs)
      fx.emulator!.setFaults(Faults())

      let next = try fx.mount(options: ["writable"], extra: ["--api", api], name: "next")
      #expect(append("ours-3\n", to: next.path("big.log")), "\(next.log)")
      let (synced, output) = runTool(bucketfsBinary, ["sync", next.mountpoint.path, "--timeout", "120"])
      #expect(synced == 0, "\(output)\n\(next.log)")
      let expected = theirs + Data("ours-1\nours-2\nours-3\n".utf8)
      #expect(try await inBucket(fx, "big.log") == expected, "\(next.log)")
      #expect(try readFile(next.path("big.log")).get() == expected)
      next.unmount()
    }
  }

  /// The same without the kill: the base replaced while the mount still waits to read it.
  @Test(arguments: ["firebase", "gcs"]) func anAppendWhoseBaseWasReplacedBeforeItWasReadGoesOntoTheNewVersion(api: String) async throws {
    try await MountFixture.scope { fx in
      let m = try await bigLogWithDownloadsHeld(fx, api: api, seed: 8181)
      #expect(append("ours\n", to: m.path("big.log")))
      let theirs = Data("theirs\n".utf8)
      _ = try await fx.put("big.log", theirs)
      fx.emulator!.setFaults(Faults())
      let (synced, output) = runTool(bucketfsBinary, ["sync", m.mountpoint.path, "--timeout", "120"])
      #expect(synced == 0, "\(output)\n\(m.log)")
      #expect(try await inBucket(fx, "big.log") == theirs + Data("ours\n".utf8), "\(m.log)")
      m.unmount()
    }
  }

  /// The version the edit started from is replaced in the bucket before its bytes were read:
  /// they cannot be had any more, so the upload is refused for good, loudly, with the written
  /// bytes kept in the queue; a read of the file is an error, never the edit's holes as zeros,
  /// and the other writer's version stays.
  @Test func aBaseReplacedBeforeItWasReadFailsTheUploadAndNeverReadsAsZeros() async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("big.bin", randomData(Self.size, seed: 7070))
      let m = try fx.mount(options: ["writable"], extra: ["--api", "gcs"])
      #expect(FileManager.default.fileExists(atPath: m.path("big.bin")))
      holdDownloads(fx)
      #expect(patch(m.path("big.bin"), randomData(4096, seed: 7071), at: Self.at) == (4096, 0))
      let theirs = randomData(1000, seed: 7072)
      _ = try await fx.put("big.bin", theirs)
      fx.emulator!.setFaults(Faults())

      #expect(await eventually { (try? getxattr(m.path("big.bin"), "user.sync_state").get()) == "failed" }, "\(m.log)")
      let why = (try? getxattr(m.path("big.bin"), "user.sync_error").get()) ?? ""
      #expect(why.contains("left the bucket"), "\(why)")
      #expect(m.log.contains("left the bucket"), "\(m.log)")
      switch readFile(m.path("big.bin")) {
      case .success(let data): Issue.record("read \(data.count) bytes of an edit whose base is gone")
      case .failure(let e): #expect(e.code == ESTALE, "\(e)")
      }
      #expect(try await inBucket(fx, "big.bin") == theirs)
      m.unmount()
    }
  }
}
