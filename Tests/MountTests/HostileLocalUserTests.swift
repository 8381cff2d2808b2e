import Foundation
import TestSupport
import StorageCore
import Testing

/// Another local user against a mount run by root: a staging folder they prepared in a shared
/// place is refused (nothing is chmodded or written through their links), and a shared sticky
/// folder that nobody prepared is used safely.
@Suite(.serialized) struct HostileLocalUserTests {
  func withUser(_ body: (String) throws -> Void) throws {
    let user = "bfsprobe\(UInt32.random(in: 1000...9999))"
    let (added, why) = runTool("/usr/sbin/useradd", ["--no-create-home", "--shell", "/bin/sh", user])
    try #require(added == 0, "useradd: \(why)")
    defer { _ = runTool("/usr/sbin/userdel", [user]) }
    try body(user)
  }

  func mode(_ path: String) -> mode_t {
    var st = stat()
    return lstat(path, &st) == 0 ? st.st_mode & 0o7777 : 0o7777
  }

  @Test func aStagingFolderPreparedByAnotherUserIsRefused() async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("secret.txt", Data("private bytes".utf8))
      // A shared place, like /tmp.
      let shared = try fx.folder("shared")
      chmod(shared.path, 0o1777)
      // Root's files the other user would like changed.
      let victim = try fx.folder("root-only").appendingPathComponent("victim")
      try Data("root's".utf8).write(to: victim)
      chmod(victim.path, 0o644)
      let bucketFolder = shared.appendingPathComponent(String(Digest.hex(sha256Bytes(fx.bucket)).prefix(16))).path
      try withUser { user in
        let script = "mkdir -m 777 '\(bucketFolder)' && ln -s '\(victim.path)' '\(bucketFolder)/x.json.tmp-1' "
          + "&& for i in $(seq 1 64); do ln -s '\(victim.path)' \"\(bucketFolder)/$i.part\"; done"
        let (status, output) = runTool("/usr/sbin/runuser", ["-u", user, "--", "/bin/sh", "-c", script])
        try #require(status == 0, "as \(user): \(output)")
        let refused = try? fx.mount(options: ["staging_dir=\(shared.path)"], name: "refused")
        if let refused {
          Issue.record("the mount came up on a staging folder another user controls")
          refused.unmount()
        }
        #expect(mode(victim.path) == 0o644, "the victim's mode changed to \(String(mode(victim.path), radix: 8))")
        #expect(try Data(contentsOf: victim) == Data("root's".utf8))
      }
    }
  }

  @Test func aSharedStickyFolderNobodyPreparedIsUsedPrivately() async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("secret.txt", Data("private bytes".utf8))
      let shared = try fx.folder("sticky")
      chmod(shared.path, 0o1777)
      let m = try fx.mount(options: ["staging_dir=\(shared.path)"])
      #expect(try readFile(m.path("secret.txt")).get() == Data("private bytes".utf8))
      try await waitStaged(m.path("secret.txt"))
      // The shared folder is left as it was; ours inside it is private.
      #expect(mode(shared.path) == 0o1777)
      let ours = try FileManager.default.contentsOfDirectory(atPath: shared.path)
      #expect(ours.count == 1)
      #expect(mode(shared.appendingPathComponent(ours[0]).path) == 0o700)
    }
  }

  @Test func aStagingFolderUnderOneOthersCanChangeIsRefused() async throws {
    try await MountFixture.scope { fx in
      let open = try fx.folder("open")
      chmod(open.path, 0o777)
      do {
        let m = try fx.mount(options: ["staging_dir=\(open.path)/staging"], name: "open")
        Issue.record("the mount came up under a folder anyone can change")
        m.unmount()
      } catch let failure as MountedBucket.MountFailure {
        #expect(failure.log.contains("can be changed by other users"), "\(failure.log)")
      }
    }
  }
}

func sha256Bytes(_ text: String) -> Data {
  let d = Digest(.sha256)
  d.update(Data(text.utf8))
  return d.finalize()
}
