import Foundation
import StorageCore
import TestSupport
import Testing

@Suite(.serialized) struct XattrTests {
  @Test func metadataAsExtendedAttributes() async throws {
    try await MountFixture.scope { fx in
      var m = StorageMetadata()
      m.contentType = "text/plain"
      m.cacheControl = "max-age=60"
      m.customMetadata = ["owner": "ada", "project": "bucketfs"]
      let meta = try await fx.storage.reference().object(named: "docs/readme.txt").putDataAsync(Data("hello".utf8), metadata: m)
      let mount = try fx.mount()
      let path = mount.path("docs/readme.txt")
      #expect(getxattr(path, "user.content_type") == .success("text/plain"))
      #expect(getxattr(path, "user.size") == .success("5"))
      #expect(getxattr(path, "user.generation") == .success(String(meta.generation)))
      #expect(getxattr(path, "user.metageneration") == .success("1"))
      #expect(getxattr(path, "user.md5_hash") == .success("XUFAKrxLKna5cZ2REBfFkg=="))
      #expect(getxattr(path, "user.crc32c") == .success(meta.crc32c!))
      #expect(getxattr(path, "user.cache_control") == .success("max-age=60"))
      #expect(getxattr(path, "user.meta.owner") == .success("ada"))
      #expect(getxattr(path, "user.gs_url") == .success("gs://mnt-bucket/docs/readme.txt"))
      #expect(getxattr(path, "user.updated") == .success(StorageMetadata.formatDate(meta.updated!)))
      let url = try getxattr(path, "user.download_url").get()
      #expect(url.hasPrefix("http://\(fx.address)/v0/b/mnt-bucket/o/docs%2Freadme.txt?alt=media&token="))
      #expect(getxattr(path, "user.content_language") == .failure(Errno(ENODATA)))
      #expect(getxattr(path, "user.nonexistent") == .failure(Errno(ENODATA)))
      #expect(getxattr(path, "user.content_type", size: 3) == .failure(Errno(ERANGE)))
      #expect(getxattr(path, "user.content_type", size: 0) == .success("10"))
      let names = try listxattr(path).get()
      for expected in ["user.content_type", "user.size", "user.generation", "user.md5_hash", "user.crc32c", "user.time_created",
        "user.updated", "user.download_url", "user.gs_url", "user.staged", "user.meta.owner", "user.meta.project"]
      {
        #expect(names.contains(expected), "\(expected)")
      }
      #expect(!names.contains("user.content_language"))
      #expect(listxattr(path, size: 4) == .failure(Errno(ERANGE)))
      #expect(getxattr(mount.path("docs"), "user.gs_url") == .success("gs://mnt-bucket/docs/"))
      // Reading the file stages it.
      _ = try readFile(path).get()
      var staged = ""
      for _ in 0..<50 {
        staged = (try? getxattr(path, "user.staged").get()) ?? ""
        if staged == "complete" { break }
        try await Task.sleep(for: .milliseconds(100))
      }
      #expect(staged == "complete")
    }
  }

  /// Names outside user.* are "not supported" (as on a filesystem without handlers for them),
  /// so that `ls -l` asks for an SELinux label and an ACL once per mount, not twice per file:
  /// a folder the mount has listed is shown again without a request per entry.
  @Test func otherNamespacesAreNotSupportedSoLsAsksOnce() async throws {
    try await MountFixture.scope { fx in
      for i in 0..<300 { _ = try await fx.put(String(format: "many/f%03d", i), Data("x".utf8)) }
      let mount = try fx.mount(options: ["metadata_ttl=300"])
      let file = mount.path("many/f000")
      #expect(getxattr(file, "security.selinux") == .failure(Errno(EOPNOTSUPP)))
      #expect(getxattr(file, "system.posix_acl_access") == .failure(Errno(EOPNOTSUPP)))
      #expect(getxattr(file, "trusted.overlay") == .failure(Errno(EOPNOTSUPP)))
      #expect(getxattr(file, "user.size") == .success("1"))
      let (first, listed) = runTool("/bin/ls", ["-l", mount.path("many")])
      #expect(first == 0 && listed.split(separator: "\n").count == 301, "\(listed.prefix(300))")
      let before = try #require(mount.stat("FUSE operations").flatMap { Int($0) })
      let (again, _) = runTool("/bin/ls", ["-l", mount.path("many")])
      #expect(again == 0)
      let after = try #require(mount.stat("FUSE operations").flatMap { Int($0) })
      // opendir, a few readdirplus, releasedir, the stats reads; two getxattr per file before.
      #expect(after - before < 60, "ls -l of 300 listed files took \(after - before) FUSE operations")
    }
  }
}
