import Foundation
import TestSupport
import StorageCore
import Testing

/// The staging folder holds download tokens (in each copy's index): another local user can read
/// nothing in it, and folders left open by an older version are closed at mount time.
@Suite(.serialized) struct StagingPrivacyTests {

  func mode(_ path: String) -> mode_t {
    var st = stat()
    return lstat(path, &st) == 0 ? st.st_mode & 0o777 : 0o7777
  }

  @Test func anotherUserCannotReadStagedCopiesOrTokens() async throws {
    try await MountFixture.scope { fx in
      // A staging folder as an older version left it: open to everyone.
      let staging = fx.root.appendingPathComponent("staging")
      let old = staging.appendingPathComponent("0123456789abcdef")
      try FileManager.default.createDirectory(at: old, withIntermediateDirectories: true)
      chmod(staging.path, 0o755)
      chmod(old.path, 0o755)
      _ = try await fx.put("secret.txt", Data("private bytes".utf8))
      let m = try fx.mount()
      #expect(try readFile(m.path("secret.txt")).get() == Data("private bytes".utf8))
      var staged = false
      for _ in 0..<100 where !staged {
        staged = (try? getxattr(m.path("secret.txt"), "user.staged").get()) == "complete"
        if !staged { try await Task.sleep(for: .milliseconds(100)) }
      }
      #expect(staged)
      #expect(mode(staging.path) == 0o700)
      var files: [String] = []
      let walker = FileManager.default.enumerator(atPath: staging.path)
      while let file = walker?.nextObject() as? String { files.append(staging.appendingPathComponent(file).path) }
      let index = try #require(files.first { $0.hasSuffix(".json") })
      #expect(try String(contentsOfFile: index, encoding: .utf8).contains("downloadTokens"))
      for file in files {
        var isDir: ObjCBool = false
        _ = FileManager.default.fileExists(atPath: file, isDirectory: &isDir)
        #expect(mode(file) == (isDir.boolValue ? 0o700 : 0o600), "\(file): \(String(mode(file), radix: 8))")
      }
      // As another user, for real.
      let user = "bfsprobe\(UInt32.random(in: 1000...9999))"
      let (added, why) = runTool("/usr/sbin/useradd", ["--no-create-home", "--shell", "/bin/sh", user])
      try #require(added == 0, "useradd: \(why)")
      defer { _ = runTool("/usr/sbin/userdel", [user]) }
      let (status, output) = runTool("/usr/sbin/runuser", ["-u", user, "--", "/bin/cat", index])
      #expect(status != 0 && output.contains("Permission denied"), "another user read the index: \(output)")
      let (listStatus, _) = runTool("/usr/sbin/runuser", ["-u", user, "--", "/bin/ls", staging.path])
      #expect(listStatus != 0)
    }
  }
}
