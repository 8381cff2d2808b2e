import Foundation
import StorageCore
import TestSupport
import Testing

/// Opening a large staged file to change a few bytes, on a staging folder whose file system
/// shares extents (XFS here, in a loop image): the edit is a clone of the staged copy, so it
/// takes room only for what is written, and the bucket gets the whole changed object.
@Suite(.serialized) struct ReflinkEditTests {
  func usedBytes(_ path: String) -> Int64 {
    var st = statvfs()
    guard statvfs(path, &st) == 0 else { return -1 }
    return Int64(st.f_blocks - st.f_bfree) * Int64(st.f_frsize)
  }

  @Test func aFewBytesIntoALargeStagedFileCloneItInsteadOfCopyingIt() async throws {
    try await MountFixture.scope { fx in
      // A sparse image: it takes on the disk only what the test writes into it.
      let image = fx.root.appendingPathComponent("xfs.img").path
      let xfs = try fx.folder("xfs").path
      #expect(FileManager.default.createFile(atPath: image, contents: nil))
      #expect(truncate(image, 400 << 20) == 0)
      let (mkfs, mkfsOut) = runTool("/usr/sbin/mkfs.xfs", ["-q", "-m", "reflink=1", image])
      try #require(mkfs == 0, "mkfs.xfs: \(mkfsOut)")
      let (mounted, mountOut) = runTool("/bin/mount", ["-o", "loop", image, xfs])
      try #require(mounted == 0, "mount: \(mountOut)")
      defer { _ = runTool("/bin/umount", ["-l", xfs]) }

      var original = randomData(48 << 20, seed: 4040)
      _ = try await fx.put("big.bin", original)
      let m = try fx.mount(options: ["writable", "staging_dir=\(xfs)/staging"], extra: ["--api", "gcs"], name: "reflink")
      #expect(try sha256(readFile(m.path("big.bin")).get()) == sha256(original))
      try await waitStaged(m.path("big.bin"))

      let before = usedBytes(xfs)
      let patch = randomData(4096, seed: 4041)
      let fd = open(m.path("big.bin"), O_WRONLY)
      #expect(fd >= 0)
      #expect(patch.withUnsafeBytes { pwrite(fd, $0.baseAddress, 4096, 16 << 20) } == 4096)
      #expect(close(fd) == 0)
      original.replaceSubrange((16 << 20)..<((16 << 20) + 4096), with: patch)
      // A copy would take 48 MiB more; the clone takes the written block (and the queue's
      // record) only.
      let grew = usedBytes(xfs) - before
      #expect(grew < 8 << 20, "the staging file system grew by \(grew) bytes for a 4 KiB change")
      #expect(try sha256(readFile(m.path("big.bin")).get()) == sha256(original))

      let (synced, syncOut) = runTool(bucketfsBinary, ["sync", m.mountpoint.path, "--timeout", "120"])
      #expect(synced == 0, "\(syncOut)")
      let inBucket = try await fx.storage.reference().object(named: "big.bin").data(maxSize: 64 << 20)
      #expect(sha256(inBucket) == sha256(original))
      m.unmount()
    }
  }
}
