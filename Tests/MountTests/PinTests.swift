import Foundation
import BucketFS
import ChildProcess
import StorageCore
import StorageEmulator
import TestSupport
import Testing

/// Issue 42: folders a user pins stay complete, fresh, never evicted, and whole offline.
@Suite(.serialized) struct PinTests {

  /// `bucketfs ARGS`: exit status and what it printed (both streams).
  private func bucketfs(_ args: [String]) -> (Int32, String) { runTool(bucketfsBinary, args, timeout: .seconds(240)) }

  /// One pin of the mount as `user.bucketfs.pins` lists it, by the path the mount shows.
  private func pinLine(_ m: MountedBucket, _ path: String) -> [String]? {
    guard case .success(let text) = getxattr(m.mountpoint.path, "user.bucketfs.pins", size: 1 << 20) else { return nil }
    return text.split(separator: "\n").map { $0.split(separator: "\t", omittingEmptySubsequences: false).map(String.init) }
      .first { $0.count >= 9 && $0[0] == path }
  }

  /// Whether the pin of `path` is kept with `files` files, all staged.
  private func isKept(_ m: MountedBucket, _ path: String, files: Int) -> Bool {
    guard let line = pinLine(m, path) else { return false }
    return line[1] == "kept" && line[2] == "\(files)" && line[3] == "\(files)"
  }

  @Test func pinnedFolderIsWholeAndReadableOnAnOfflineMount() async throws {
    try await MountFixture.scope { fx in
      var expected: [String: Data] = [:]
      for folder in 0..<10 {
        for i in 0..<30 {
          // Mostly small; every tenth large enough to be staged in ranges.
          let size = i % 10 == 0 ? 300_000 + folder * 1000 : 100 + i * 37 + folder
          expected["trip/f\(folder)/file\(i).txt"] = randomData(size, seed: UInt64(folder * 100 + i))
        }
      }
      for (name, data) in expected { _ = try await fx.put(name, data) }
      // An empty folder (a placeholder with a mode of its own) and a link.
      _ = try await fx.put("trip/empty/", Data(), custom: ["goog-reserved-posix-mode": "750"])
      _ = try await fx.put(
        "trip/latest", Data("f0/file1.txt".utf8), custom: ["goog-reserved-file-is-symlink": "true", "gcsfuse_symlink_target": "f0/file1.txt"])
      _ = try await fx.put("elsewhere.txt", Data("not pinned".utf8))

      let m = try fx.mount()
      let (status, output) = bucketfs(["pin", m.path("trip")])
      #expect(status == 0, "\(output)")
      #expect(output.contains("pinned"), "\(output)")
      #expect(isKept(m, "trip", files: 301), "\(String(describing: pinLine(m, "trip")))")
      #expect(getxattr(m.path("trip/f3/file4.txt"), "user.staged") == .success("pinned"))
      m.unmount()
      fx.stopEmulator()

      let offline = try fx.mount(options: ["offline"], name: "offline")
      let (findStatus, found) = runTool("/usr/bin/find", [offline.path("trip"), "-type", "f"])
      #expect(findStatus == 0, "\(found)")
      let files = Set(found.split(separator: "\n").map { String($0.dropFirst(offline.mountpoint.path.count + 1)) })
      #expect(files == Set(expected.keys), "\(files.symmetricDifference(expected.keys).sorted().prefix(10))")
      let (lsStatus, listing) = runTool("/bin/ls", ["-lR", offline.path("trip")])
      #expect(lsStatus == 0, "\(listing)")
      #expect(listing.contains("empty"))
      #expect(listing.contains("latest -> f0/file1.txt"), "\(listing.prefix(400))")
      // The empty folder's own mode, from its placeholder.
      #expect(listing.split(separator: "\n").contains { $0.hasPrefix("drwxr-x---") && $0.hasSuffix(" empty") }, "\(listing.prefix(600))")
      for (name, data) in expected {
        #expect(try sha256(readFile(offline.path(name)).get()) == sha256(data), "\(name)")
      }
      #expect(try sha256(readFile(offline.path("trip/latest")).get()) == sha256(expected["trip/f0/file1.txt"]!))
      // What was not pinned is not shown offline.
      #expect(readFile(offline.path("elsewhere.txt")) == .failure(Errno(ENOENT)))
      #expect(getxattr(offline.path("trip/f9/file29.txt"), "user.staged") == .success("pinned"))
      let (statusStatus, table) = bucketfs(["status", offline.mountpoint.path])
      #expect(statusStatus == 0)
      #expect(table.contains("trip") && table.contains("301/301"), "\(table)")
    }
  }

  @Test func readingALargeFileEvictsUnpinnedCopiesOnly() async throws {
    try await MountFixture.scope { fx in
      let pinned = randomData(3 << 20, seed: 1)
      let first = randomData(2_500_000, seed: 2)
      let second = randomData(2_500_000, seed: 3)
      let large = randomData(4 << 20, seed: 4)
      _ = try await fx.put("keep/a.bin", pinned)
      _ = try await fx.put("u/b.bin", first)
      _ = try await fx.put("u/c.bin", second)
      _ = try await fx.put("u/d.bin", large)
      let m = try fx.mount(options: ["staging_size=6M"])
      let (status, output) = bucketfs(["pin", m.path("keep/a.bin")])
      #expect(status == 0, "\(output)")
      #expect(getxattr(m.path("keep/a.bin"), "user.staged") == .success("pinned"))

      #expect(try sha256(readFile(m.path("u/b.bin")).get()) == sha256(first))
      try await waitStaged(m.path("u/b.bin"))
      // 3 MiB pinned + 2.5 + 2.5 is more than 6 MiB: the unpinned copy read first goes.
      #expect(try sha256(readFile(m.path("u/c.bin")).get()) == sha256(second))
      try await waitStaged(m.path("u/c.bin"))
      #expect(await eventually { getxattr(m.path("u/b.bin"), "user.staged") == .success("none") })
      #expect(getxattr(m.path("keep/a.bin"), "user.staged") == .success("pinned"))
      // A file larger than what the pin leaves is read from the server, not staged over the pin.
      #expect(try sha256(readFile(m.path("u/d.bin")).get()) == sha256(large))
      #expect(getxattr(m.path("keep/a.bin"), "user.staged") == .success("pinned"))
      #expect(getxattr(m.path("u/d.bin"), "user.staged") == .success("none"))
      #expect(try sha256(readFile(m.path("keep/a.bin")).get()) == sha256(pinned))
    }
  }

  @Test func pinConvergesAfterRefreshAndAnOpenReaderKeepsTheOldBytes() async throws {
    try await MountFixture.scope { fx in
      let oldBig = randomData(3 << 20, seed: 10)
      let newBig = randomData(3 << 20 + 5, seed: 11)
      _ = try await fx.put("conv/big.bin", oldBig)
      _ = try await fx.put("conv/same.txt", Data("same".utf8))
      _ = try await fx.put("conv/doomed.txt", Data("doomed".utf8))
      // A long metadata TTL: only the refresh makes the mount learn of the changes. Reads go
      // through the daemon, which must keep the old copy while it is open (by passthrough the
      // kernel would hold the file itself).
      let m = try fx.mount(options: ["metadata_ttl=600", "passthrough=no"])
      let (status, output) = bucketfs(["pin", m.path("conv")])
      #expect(status == 0, "\(output)")
      let refreshedBefore = pinLine(m, "conv")?[6]

      let reader = open(m.path("conv/big.bin"), O_RDONLY)
      #expect(reader >= 0)
      #expect(try pread(reader, offset: 0, count: 4096).get() == oldBig.prefix(4096))

      // Another client changes, adds and deletes.
      _ = try await fx.put("conv/big.bin", newBig)
      _ = try await fx.put("conv/new.txt", Data("new".utf8))
      try await fx.storage.reference(withPath: "conv/doomed.txt").delete()
      let (refreshStatus, refreshOutput) = bucketfs(["refresh", m.mountpoint.path])
      #expect(refreshStatus == 0, "\(refreshOutput)")
      #expect(await eventually { isKept(m, "conv", files: 3) && pinLine(m, "conv")?[6] != refreshedBefore },
        "\(String(describing: pinLine(m, "conv")))")
      #expect(try sha256(readFile(m.path("conv/big.bin")).get()) == sha256(newBig))
      #expect(getxattr(m.path("conv/big.bin"), "user.staged") == .success("pinned"))
      #expect(getxattr(m.path("conv/new.txt"), "user.staged") == .success("pinned"))
      #expect(readFile(m.path("conv/doomed.txt")) == .failure(Errno(ENOENT)))
      // The reader that had the old version open reads the old bytes to the end.
      var old = Data()
      while old.count < oldBig.count {
        let chunk = try pread(reader, offset: Int64(old.count), count: 1 << 20).get()
        if chunk.isEmpty { break }
        old += chunk
      }
      #expect(old.count == oldBig.count && sha256(old) == sha256(oldBig))
      close(reader)
      m.unmount()
      fx.stopEmulator()

      let offline = try fx.mount(extra: ["--offline"], name: "offline")
      #expect(try FileManager.default.contentsOfDirectory(atPath: offline.path("conv")).sorted() == ["big.bin", "new.txt", "same.txt"])
      #expect(try sha256(readFile(offline.path("conv/big.bin")).get()) == sha256(newBig))
    }
  }

  @Test func pinResumesAfterKillDuringIt() async throws {
    try await MountFixture.scope { fx in
      var expected: [String: Data] = [:]
      for i in 0..<20 { expected["big/part\(i).bin"] = randomData(10 << 20, seed: UInt64(200 + i)) }
      for (name, data) in expected { _ = try await fx.put(name, data) }
      // The last part's download waits, so the kill comes while the pin is under way.
      var faults = Faults()
      faults.pathFilter = "part19.bin?alt=media"
      faults.hold = true
      fx.emulator!.setFaults(faults)
      let m = try fx.mount()
      let (status, output) = bucketfs(["pin", "--background", m.path("big")])
      #expect(status == 0, "\(output)")
      #expect(await eventually { (pinLine(m, "big").flatMap { Int($0[2]) } ?? 0) >= 10 }, "\(String(describing: pinLine(m, "big")))")
      #expect(!isKept(m, "big", files: 20))
      m.process.send(SIGKILL)
      m.process.wait()
      m.unmount()
      fx.emulator!.setFaults(Faults())

      let again = try fx.mount(name: "again")
      #expect(await eventually { isKept(again, "big", files: 20) }, "\(String(describing: pinLine(again, "big")))")
      for (name, data) in expected.sorted(by: { $0.key < $1.key }).suffix(3) {
        #expect(try sha256(readFile(again.path(name)).get()) == sha256(data), "\(name)")
      }
      #expect(getxattr(again.path("big/part19.bin"), "user.staged") == .success("pinned"))
    }
  }

  @Test func pinningMoreThanStagingSizeIsRefusedAndEvictsNothing() async throws {
    try await MountFixture.scope { fx in
      for i in 0..<3 { _ = try await fx.put("a/f\(i).bin", randomData(2 << 20, seed: UInt64(300 + i))) }
      for i in 0..<3 { _ = try await fx.put("b/f\(i).bin", randomData(2 << 20, seed: UInt64(310 + i))) }
      let loose = randomData(2 << 20, seed: 320)
      _ = try await fx.put("u/x.bin", loose)
      let m = try fx.mount(options: ["staging_size=10M"])
      #expect(bucketfs(["pin", m.path("a")]).0 == 0)
      #expect(try sha256(readFile(m.path("u/x.bin")).get()) == sha256(loose))
      try await waitStaged(m.path("u/x.bin"))

      let (status, output) = bucketfs(["pin", m.path("b")])
      #expect(status == 1, "\(output)")
      #expect(output.contains("needs 6.0 MiB") && output.contains("staging_size"), "\(output)")
      #expect(getxattr(m.path("u/x.bin"), "user.staged") == .success("complete"))
      #expect(getxattr(m.path("a/f2.bin"), "user.staged") == .success("pinned"))
      #expect(getxattr(m.path("b/f0.bin"), "user.staged") == .success("none"))
      #expect(m.stagedEvicted == 0)
      #expect(pinLine(m, "b")?[1] == "refused")
      // `bucketfs stats` counts the pin that holds, not the refused one.
      #expect(m.stat("pinned") == "1 pins, 3 files, \(3 * (2 << 20)) bytes kept", "\(String(describing: m.stat("pinned")))")

      // Unpinning makes room: the second pin fits now.
      #expect(bucketfs(["unpin", m.path("a")]).0 == 0)
      let (retry, retryOutput) = bucketfs(["pin", m.path("b")])
      #expect(retry == 0, "\(retryOutput)")
      #expect(isKept(m, "b", files: 3))
    }
  }

  @Test func pinByExtendedAttributeOnAWritableMountFollowsItsChanges() async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("w/notes.txt", Data("first".utf8))
      let m = try fx.mount(options: ["writable"])
      let (set, setOutput) = runTool("/usr/bin/setfattr", ["-n", "user.bucketfs.pin", "-v", "1", m.path("w")])
      #expect(set == 0, "\(setOutput)")
      #expect(await eventually { isKept(m, "w", files: 1) })
      #expect(listxattr(m.path("w")).map { $0.contains("user.bucketfs.pin") } == .success(true))

      // A change written through the mount: once in the bucket, the pin keeps the new version.
      let fd = open(m.path("w/notes.txt"), O_WRONLY | O_TRUNC)
      #expect(fd >= 0)
      #expect(write(fd, "second", 6) == 6)
      #expect(close(fd) == 0)
      let (synced, syncOutput) = bucketfs(["sync", m.mountpoint.path])
      #expect(synced == 0, "\(syncOutput)")
      #expect(await eventually { getxattr(m.path("w/notes.txt"), "user.staged") == .success("pinned") })
      #expect(try readFile(m.path("w/notes.txt")).get() == Data("second".utf8))

      let (removed, removeOutput) = runTool("/usr/bin/setfattr", ["-x", "user.bucketfs.pin", m.path("w")])
      #expect(removed == 0, "\(removeOutput)")
      #expect(getxattr(m.path("w"), "user.bucketfs.pin") == .failure(Errno(ENODATA)))
      #expect(getxattr(m.path("w/notes.txt"), "user.staged") == .success("complete"))
    }
  }

  /// Issue 55: an unpin while the pin's first check lists the tree leaves nothing kept: the
  /// files staged before read `complete` again, not `pinned`, and the stats count no pinned
  /// copy (they said "0 pins, 4 files, 8388608 bytes kept", for good).
  @Test(arguments: ["firebase", "gcs"]) func unpinDuringTheFirstCheckKeepsNothing(api: String) async throws {
    try await MountFixture.scope { fx in
      var expected: [String: Data] = [:]
      for i in 0..<4 { expected["held/f\(i).bin"] = randomData(2 << 20, seed: UInt64(400 + i)) }
      for (name, data) in expected { _ = try await fx.put(name, data) }
      // A long read_timeout: the held listing must not time out while the test unpins.
      let m = try fx.mount(options: ["read_timeout=60"], extra: ["--api", api], name: api)
      for (name, data) in expected {
        #expect(try sha256(readFile(m.path(name)).get()) == sha256(data))
        try await waitStaged(m.path(name))
      }
      // The pin's listing of the tree waits until the test lets it go.
      var faults = Faults()
      faults.pathFilter = "prefix=held"
      faults.hold = true
      fx.emulator!.setFaults(faults)
      // `bucketfs pin` in both forms, which exited 6 ("Input/output error") here.
      let form = api == "gcs" ? ["--background"] : []
      let pin = try ChildProcess(bucketfsBinary, ["pin"] + form + [m.path("held")], environment: ProcessInfo.processInfo.environment, errors: .pipe)
      #expect(await eventually { pinLine(m, "held")?[1] == "checking" }, "\(String(describing: pinLine(m, "held")))")
      let (unpinned, output) = bucketfs(["unpin", m.path("held")])
      #expect(unpinned == 0, "\(output)")
      fx.emulator!.setFaults(Faults())
      // The check ends (the pin gone), and `bucketfs pin` with it, saying so.
      let said = String(decoding: pin.readToEnd(until: .now + .seconds(60)).errors, as: UTF8.self)
      #expect(pin.wait(timeout: .seconds(60)) == .exited(1), "\(said)")
      #expect(said.contains("unpinned before its first check ended"), "\(said)")
      #expect(pinLine(m, "held") == nil)
      #expect(await eventually { m.stat("pinned") == "0 pins, 0 files, 0 bytes kept" }, "\(String(describing: m.stat("pinned")))")
      for name in expected.keys.sorted() {
        #expect(getxattr(m.path(name), "user.staged") == .success("complete"), "\(name)")
      }
    }
  }

  /// Issue 55: any byte a folder's name may hold round-trips through pin, status and unpin (a
  /// tab made `bucketfs pin` exit 1 with the pin recorded, and `status` say nothing was pinned).
  @Test(arguments: ["firebase", "gcs"]) func foldersNamedWithAnyByteArePinnedShownAndUnpinned(api: String) async throws {
    try await MountFixture.scope { fx in
      // (A newline is no byte an object name may hold: GCS and Firebase refuse it.)
      // The last, the widest, is made of combining marks (status cut it to "Zurich-e").
      let names = ["tab\there", "per%25cent", "back\\slash", "hash#?q", "bell\u{7}", "caf\u{e9}", "Zu\u{308}rich-e\u{301}e\u{301}e\u{301}e\u{301}"]
      for (i, name) in names.enumerated() { _ = try await fx.put("\(name)/f.txt", Data("file \(i)".utf8)) }
      let m = try fx.mount(extra: ["--api", api], name: api)
      for name in names {
        let (status, output) = bucketfs(["pin", m.path(name)])
        #expect(status == 0, "\(name.debugDescription): \(output)")
        #expect(getxattr(m.path(name + "/f.txt"), "user.staged") == .success("pinned"), "\(name.debugDescription)")
      }
      let (listed, table) = bucketfs(["status", m.mountpoint.path])
      #expect(listed == 0, "\(table)")
      for name in names {
        let row = table.split(separator: "\n").first { $0.hasPrefix(TerminalText.visible(name) + " ") }
        #expect(row?.contains(" kept ") == true && row?.contains(" 1/1 ") == true, "\(name.debugDescription) in \(table)")
        let (one, alone) = bucketfs(["status", m.mountpoint.path, m.path(name)])
        #expect(one == 0 && alone.split(separator: "\n").count == 2 && alone.contains(" 1/1 "), "\(name.debugDescription): \(alone)")
        // A file of the folder is pinned by it: its status shows that pin (it said nothing).
        let (file, holder) = bucketfs(["status", m.mountpoint.path, m.path(name + "/f.txt")])
        #expect(file == 0 && holder.split(separator: "\n").count == 2 && holder.contains(" 1/1 "), "\(name.debugDescription)/f.txt: \(holder)")
      }
      #expect(m.stat("pinned") == "\(names.count) pins, \(names.count) files, \(names.enumerated().reduce(0) { $0 + "file \($1.offset)".utf8.count }) bytes kept",
        "\(String(describing: m.stat("pinned")))")
      for name in names {
        let (status, output) = bucketfs(["unpin", m.path(name)])
        #expect(status == 0, "\(name.debugDescription): \(output)")
      }
      let (after, empty) = bucketfs(["status", m.mountpoint.path])
      #expect(after == 0 && empty.contains("nothing pinned"), "\(empty)")
      // A path outside the mount is no path of it (it said "nothing pinned at or under /tmp").
      let (outside, said) = bucketfs(["status", m.mountpoint.path, "/tmp"])
      #expect(outside == 2 && said.contains("is not in the mount"), "\(outside): \(said)")
      #expect(m.stat("pinned") == "0 pins, 0 files, 0 bytes kept", "\(String(describing: m.stat("pinned")))")
    }
  }

  /// Issue 55: a pin made offline that does not fit is refused by the first online mount, as
  /// one made online is, and forgotten by the next (it stayed "staging 0/0", recorded, for good).
  @Test(arguments: ["firebase", "gcs"]) func aPinMadeOfflineThatDoesNotFitIsRefusedOnline(api: String) async throws {
    try await MountFixture.scope { fx in
      var expected: [String: Data] = [:]
      for i in 0..<2 { expected["trip/f\(i).bin"] = randomData(2 << 20, seed: UInt64(500 + i)) }
      for (name, data) in expected { _ = try await fx.put(name, data) }
      // Read once online: the offline mount shows the staged copies, and so the folder.
      let online = try fx.mount(extra: ["--api", api], name: "\(api)-read")
      for (name, data) in expected {
        #expect(try sha256(readFile(online.path(name)).get()) == sha256(data))
        try await waitStaged(online.path(name))
      }
      online.unmount()
      let offline = try fx.mount(options: ["offline"], extra: ["--api", api], name: "\(api)-offline")
      let (status, output) = bucketfs(["pin", offline.path("trip")])
      #expect(output.contains("offline"), "\(status): \(output)")
      #expect(pinLine(offline, "trip") != nil)
      offline.unmount()

      let small = try fx.mount(options: ["staging_size=3M"], extra: ["--api", api], name: "\(api)-small")
      #expect(await eventually { pinLine(small, "trip")?[1] == "refused" }, "\(String(describing: pinLine(small, "trip")))")
      #expect(pinLine(small, "trip")?[8].contains("staging_size") == true, "\(String(describing: pinLine(small, "trip")))")
      #expect(small.stat("pinned")?.hasPrefix("0 pins") == true, "\(String(describing: small.stat("pinned")))")
      let (listed, table) = bucketfs(["status", small.mountpoint.path])
      #expect(listed == 0 && table.contains("refused") && table.contains("staging_size"), "\(table)")
      small.unmount()
      // Refused pins are not recorded: the next mount has none.
      let again = try fx.mount(options: ["staging_size=3M"], extra: ["--api", api], name: "\(api)-again")
      #expect(pinLine(again, "trip") == nil, "\(String(describing: pinLine(again, "trip")))")
      let (after, empty) = bucketfs(["status", again.mountpoint.path])
      #expect(after == 0 && empty.contains("nothing pinned"), "\(empty)")
    }
  }
}
