import Foundation
import ChildProcess
import StorageCore
import Testing

/// A daemon killed with SIGKILL leaves its mountpoint dead ("Transport endpoint is not
/// connected"); `bucketfs mount` cleans that exact state up, says so, and mounts.
@Suite(.serialized) struct DeadMountTests {
  @Test func mountOverADeadMountOfOurs() async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("alive.txt", Data("alive".utf8))
      let first = try fx.mount()
      #expect(try readFile(first.path("alive.txt")).get() == Data("alive".utf8))
      first.process.send(SIGKILL)
      first.process.wait()
      var fs = statvfs()
      #expect(statvfs(first.mountpoint.path, &fs) != 0 && errno == ENOTCONN, "the mountpoint is not dead")
      let staging = fx.root.appendingPathComponent("staging")
      let second = try MountedBucket(
        arguments: ["mount", "gs://\(fx.bucket)", first.mountpoint.path, "-f", "-o", "staging_dir=\(staging.path)", "--emulator", fx.address],
        mountpoint: first.mountpoint, home: fx.root)
      defer { second.unmount() }
      // The dead entry is in /proc/mounts until the new daemon replaces it: wait for the new one
      // (the daemon logs "mounted" once its mount is there; between the dead one going and the new
      // one coming, the plain folder answers statvfs too).
      let deadline = Date().addingTimeInterval(15)
      while (!second.log.contains("mounted gs://") || statvfs(first.mountpoint.path, &fs) != 0) && Date() < deadline {
        try await Task.sleep(for: .milliseconds(50))
      }
      #expect(try readFile(second.path("alive.txt")).get() == Data("alive".utf8))
      #expect(second.log.contains("dead bucketfs mount"), "\(second.log)")
      // Exactly one mount is left there.
      let table = try String(contentsOfFile: "/proc/mounts", encoding: .utf8)
      #expect(table.split(separator: "\n").filter { $0.split(separator: " ")[1] == Substring(first.mountpoint.path) }.count == 1)
    }
  }
}
