import Foundation
import ChildProcess
import TestSupport
import StorageCore
import Testing

/// Symbolic links stored the way gcsfuse and Google's tools store them: written with `ln -s`,
/// `tar -x`, `cp -a` and `rsync -a`, read back after a remount over both APIs, and links other
/// tools wrote read here.
@Suite(.serialized) struct SymlinkTests {
  func shell(_ script: String, in m: MountedBucket) -> (Int32, String) {
    runTool("/bin/sh", ["-c", "set -e; cd '\(m.mountpoint.path)'; " + script])
  }

  func link(_ path: String) -> String? {
    var buffer = [CChar](repeating: 0, count: 4097)
    let n = readlink(path, &buffer, 4096)
    return n >= 0 ? String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self) : nil
  }

  func isLink(_ path: String) -> Bool {
    var st = stat()
    return lstat(path, &st) == 0 && st.st_mode & S_IFMT == S_IFLNK
  }

  func sync(_ m: MountedBucket) {
    let (status, output) = runTool(bucketfsBinary, ["sync", m.mountpoint.path, "--timeout", "30"])
    #expect(status == 0, "bucketfs sync: \(output)")
  }

  @Test(arguments: [[], ["--api", "gcs"]])
  func linksWrittenHereAreStoredAsGcsfuseStoresThem(api: [String]) async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("tree/data.txt", Data("the data\n".utf8))
      let m = try fx.mount(options: ["writable"], extra: api)
      #expect(symlink("data.txt", m.path("tree/rel")) == 0)
      #expect(symlink("/etc/hostname", m.path("tree/abs")) == 0)
      #expect(symlink("missing/target", m.path("tree/dangling")) == 0)
      #expect(isLink(m.path("tree/rel")))
      #expect(link(m.path("tree/rel")) == "data.txt")
      var st = stat()
      #expect(lstat(m.path("tree/abs"), &st) == 0 && st.st_size == "/etc/hostname".utf8.count)
      // The kernel follows a link; bucketfs does not.
      #expect(try readFile(m.path("tree/rel")).get() == Data("the data\n".utf8))
      #expect(symlink("x", m.path("tree/rel")) == -1 && errno == EEXIST)
      sync(m)
      let object = try await fx.storage.reference(withPath: "tree/abs").data(maxSize: 1 << 20)
      #expect(object == Data("/etc/hostname".utf8), "the object holds the target, not what it points to")
      let custom = try await fx.storage.reference(withPath: "tree/abs").getMetadata().customMetadata ?? [:]
      #expect(custom["goog-reserved-file-is-symlink"] == "true")
      #expect(custom["gcsfuse_symlink_target"] == "/etc/hostname")
      m.unmount()
      let again = try fx.mount(extra: api, name: "again")
      #expect(link(again.path("tree/rel")) == "data.txt")
      #expect(link(again.path("tree/dangling")) == "missing/target")
      #expect(try readFile(again.path("tree/rel")).get() == Data("the data\n".utf8))
      let (status, listing) = shell("ls -l tree", in: again)
      #expect(status == 0 && listing.contains("rel -> data.txt"), "\(listing)")
    }
  }

  /// gcsfuse's links (the target as the bytes, or in older versions in metadata) and gcloud's.
  @Test(arguments: [[], ["--api", "gcs"]])
  func linksOtherToolsWroteAreRead(api: [String]) async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("l/target.txt", Data("t".utf8))
      _ = try await fx.put("l/standard", Data("target.txt".utf8), custom: ["goog-reserved-file-is-symlink": "true"])
      _ = try await fx.put("l/legacy", Data(), custom: ["gcsfuse_symlink_target": "target.txt"])
      _ = try await fx.put("l/not-a-link", Data("target.txt".utf8), custom: ["goog-reserved-file-is-symlink": "false"])
      let m = try fx.mount(extra: api)
      #expect(link(m.path("l/standard")) == "target.txt")
      #expect(link(m.path("l/legacy")) == "target.txt")
      #expect(!isLink(m.path("l/not-a-link")))
      #expect(link(m.path("l/not-a-link")) == nil && errno == EINVAL)
      #expect(try readFile(m.path("l/legacy")).get() == Data("t".utf8))
      // On a read-only mount a new link is refused.
      #expect(symlink("x", m.path("l/new")) == -1 && errno == EROFS)
    }
  }

  @Test func tarCpAndRsyncCarryLinks() async throws {
    try await MountFixture.scope { fx in
      let source = try fx.folder("source")
      let script = """
        cd '\(source.path)' && mkdir -p pkg/bin pkg/lib && echo lib > pkg/lib/libx.so.1 && \
        ln -s libx.so.1 pkg/lib/libx.so && ln -s ../lib/libx.so pkg/bin/link && echo run > pkg/bin/tool && \
        tar -cf '\(fx.root.path)/pkg.tar' pkg
        """
      #expect(runTool("/bin/sh", ["-c", script]).0 == 0)
      let m = try fx.mount(options: ["writable"])
      var (status, output) = shell("mkdir t && tar -xf '\(fx.root.path)/pkg.tar' -C t", in: m)
      #expect(status == 0, "tar -x: \(output)")
      (status, output) = shell("cp -a '\(source.path)/pkg' c", in: m)
      #expect(status == 0, "cp -a: \(output)")
      (status, output) = shell("rsync -a '\(source.path)/pkg/' r/", in: m)
      #expect(status == 0, "rsync -a: \(output)")
      for dir in ["t/pkg", "c", "r"] {
        #expect(link(m.path("\(dir)/lib/libx.so")) == "libx.so.1", "\(dir)")
        #expect(link(m.path("\(dir)/bin/link")) == "../lib/libx.so", "\(dir)")
        #expect(try readFile(m.path("\(dir)/bin/link")).get() == Data("lib\n".utf8), "\(dir)")
      }
      sync(m)
      m.unmount()
      let again = try fx.mount(name: "again")
      (status, output) = runTool("/usr/bin/diff", ["-r", "--no-dereference", source.appendingPathComponent("pkg").path, again.path("r")])
      #expect(status == 0, "the tree read back differs: \(output)")
    }
  }
}
