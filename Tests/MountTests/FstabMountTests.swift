import Foundation
import ChildProcess
import TestSupport
import StorageCore
import Testing

/// `mount -t fuse.bucketfs SOURCE DIR -o OPTIONS`, as an fstab line runs it: mount(8) hands it
/// to fuse3's mount.fuse3, which runs `bucketfs SOURCE DIR -o OPTIONS` from the PATH.
@Suite(.serialized) struct FstabMountTests {

  @Test func mountAndUmountThroughMount8() async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("data/hello.txt", Data("hello from fstab".utf8))
      // mount.fuse3 finds the program on a sanitized PATH: put ours there for this test only.
      let link = "/usr/local/bin/bucketfs"
      let placed = !FileManager.default.fileExists(atPath: link)
      if placed { try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: bucketfsBinary) }
      defer { if placed { unlink(link) } }
      let mountpoint = try fx.folder("fstab")
      let env = ["FIREBASE_STORAGE_EMULATOR_HOST": fx.address, "HOME": fx.root.path]
      let staging = fx.root.appendingPathComponent("staging").path
      // An unknown option is refused with a line that names it.
      var (status, output) = runTool("/bin/mount", ["-t", "fuse.bucketfs", "gs://\(fx.bucket)/data", mountpoint.path, "-o", "staging_dir=\(staging),frobnicate"], env: env)
      #expect(status != 0 && output.contains("unknown mount option frobnicate"), "\(status) \(output)")
      // The options mount(8) and fstab add are taken as they come.
      (status, output) = runTool(
        "/bin/mount", ["-t", "fuse.bucketfs", "gs://\(fx.bucket)/data", mountpoint.path, "-o", "rw,_netdev,nofail,noauto,x-systemd.automount,staging_dir=\(staging)"],
        env: env)
      #expect(status == 0, "\(output)")
      defer { _ = runTool("/bin/umount", [mountpoint.path], env: [:]) }
      let mounts = try String(contentsOfFile: "/proc/mounts", encoding: .utf8)
      #expect(mounts.contains(" \(mountpoint.path) fuse.bucketfs ro"), "\(mounts)")
      #expect(try readFile(mountpoint.appendingPathComponent("hello.txt").path).get() == Data("hello from fstab".utf8))
      (status, output) = runTool("/bin/umount", [mountpoint.path], env: [:])
      #expect(status == 0, "\(output)")
      let after = try String(contentsOfFile: "/proc/mounts", encoding: .utf8)
      #expect(!after.contains(" \(mountpoint.path) "))
    }
  }

  @Test func versionNamesTheLibraries() throws {
    let version = try ChildProcess.run(bucketfsBinary, ["--version"], environment: ProcessInfo.processInfo.environment)
    let out = version.text
    #expect(version.termination == .exited(0))
    let lines = out.split(separator: "\n")
    #expect(lines.count == 3 && lines[0].hasPrefix("bucketfs ") && lines[1].hasPrefix("libcurl ") && lines[2].hasPrefix("libfuse 3."), "\(out)")
  }
}
