import Foundation
import TestSupport
import Testing

/// Issue 55: the object commands name objects byte for byte, as Google's tools do. `gs://bk/d/x//y`
/// is object `d/x//y` (the SDK's rules for references collapse the slashes, and `rm` of it
/// removed `d/x/y`, its neighbour); a 255-byte name (as long as a Linux file name may be)
/// downloads (its temporary file's name was longer than that: "File name too long"). The
/// objects are put and read over the JSON API directly, not through the commands.
@Suite struct ExactNameCommandTests {
  /// Puts (`put NAME TEXT`) or prints (`get NAME`: the bytes, or 404) objects of bucket bk.
  static let api = #"""
    import sys, urllib.error, urllib.parse, urllib.request
    host, verb, name = sys.argv[1:4]
    q = urllib.parse.quote(name, safe="")
    if verb == "put":
        u = f"http://{host}/upload/storage/v1/b/bk/o?uploadType=media&name={q}"
        urllib.request.urlopen(urllib.request.Request(u, data=sys.argv[4].encode(), method="POST")).close()
    else:
        try:
            sys.stdout.write(urllib.request.urlopen(f"http://{host}/storage/v1/b/bk/o/{q}?alt=media").read().decode())
        except urllib.error.HTTPError as e:
            sys.stdout.write(str(e.code))
    """#

  func object(_ server: ServeProcess, _ verb: String, _ name: String, _ text: String? = nil) -> String {
    let (status, out) = runTool("/usr/bin/python3", ["-c", Self.api, server.address, verb, name] + (text.map { [$0] } ?? []))
    #expect(status == 0, "\(out)")
    return out
  }

  @Test(arguments: ["firebase", "gcs"]) func doubledSlashesNameTheirOwnObject(api: String) throws {
    try scope(ServeProcess()) { server in
      _ = object(server, "put", "d/x//y", "bytes of d/x//y")
      _ = object(server, "put", "d/x/y", "bytes of d/x/y")
      let flags = ["--api", api, "--emulator", server.address]
      var r = try runBucketfs(["cat", "gs://bk/d/x//y"] + flags)
      #expect(r.status == 0 && r.out == "bytes of d/x//y", "\(r.out) \(r.stderr)")
      r = try runBucketfs(["cat", "gs://bk/d/x/y"] + flags)
      #expect(r.status == 0 && r.out == "bytes of d/x/y", "\(r.out) \(r.stderr)")
      r = try runBucketfs(["rm", "gs://bk/d/x//y"] + flags)
      #expect(r.status == 0, "\(r.stderr)")
      #expect(object(server, "get", "d/x//y") == "404")
      #expect(object(server, "get", "d/x/y") == "bytes of d/x/y")
    }
  }

  @Test(arguments: ["firebase", "gcs"]) func aNameAsLongAsAFileNameDownloads(api: String) throws {
    try scope(ServeProcess()) { server in
      let long = String(repeating: "n", count: 251) + ".txt"
      #expect(long.utf8.count == 255)
      _ = object(server, "put", "l/\(long)", "long")
      let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cli-long-\(UUID().uuidString)")
      try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
      defer { try? FileManager.default.removeItem(at: dir) }
      let flags = ["--api", api, "--emulator", server.address]
      var r = try runBucketfs(["cp", "--no-progress", "gs://bk/l/\(long)", dir.path + "/"] + flags)
      #expect(r.status == 0, "\(r.stderr)")
      #expect(FileManager.default.contents(atPath: dir.appendingPathComponent(long).path) == Data("long".utf8))
      r = try runBucketfs(["cp", "-r", "--no-progress", "gs://bk/l", dir.appendingPathComponent("tree").path] + flags)
      #expect(r.status == 0, "\(r.stderr)")
      #expect(FileManager.default.contents(atPath: dir.appendingPathComponent("tree/\(long)").path) == Data("long".utf8))
      // No temporary file left beside it.
      let left = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasPrefix(".") }
      #expect(left.isEmpty, "\(left)")
    }
  }

  /// A download URL names one object, its name percent-encoded: a `?`, `*` or `[` encoded in it
  /// is the name's own, never a wildcard (`rm` of `n%2Fq%3F` deleted `n/qa` too, and `cat` of
  /// `n%2Fbr%5B1%5D` printed `n/br1`). A `gs://` URL keeps gsutil's wildcards.
  @Test(arguments: ["firebase", "gcs"]) func anEncodedDownloadURLNamesOneObject(api: String) throws {
    try scope(ServeProcess()) { server in
      for name in ["n/q?", "n/qa", "n/br[1]", "n/br1"] { _ = object(server, "put", name, "bytes of \(name)") }
      let flags = ["--api", api, "--emulator", server.address]
      let v0 = "http://\(server.address)/v0/b/bk/o/"
      var r = try runBucketfs(["cat", v0 + "n%2Fbr%5B1%5D"] + flags)
      #expect(r.status == 0 && r.out == "bytes of n/br[1]", "\(r.out) \(r.stderr)")
      r = try runBucketfs(["rm", v0 + "n%2Fq%3F"] + flags)
      #expect(r.status == 0, "\(r.stderr)")
      #expect(object(server, "get", "n/q?") == "404")
      #expect(object(server, "get", "n/qa") == "bytes of n/qa")
      r = try runBucketfs(["rm", "gs://bk/n/br?1?"] + flags)
      #expect(r.status == 0, "\(r.stderr)")
      #expect(object(server, "get", "n/br[1]") == "404")
      #expect(object(server, "get", "n/br1") == "bytes of n/br1")
    }
  }

  /// `stat` prints a name's and custom metadata's control characters as escapes, as `ls` does.
  @Test func statPrintsControlCharactersEscaped() throws {
    try scope(ServeProcess()) { server in
      _ = object(server, "put", "e/a\u{1b}[31mred\u{85}", "x")
      let r = try runBucketfs(["stat", "gs://bk/e/a\u{1b}[31mred\u{85}", "--api", "gcs", "--emulator", server.address])
      #expect(r.status == 0, "\(r.stderr)")
      #expect(r.out.contains("name: e/a\\x1b[31mred\\u{85}"), "\(r.out)")
      #expect(!r.out.unicodeScalars.contains { $0 == "\u{1b}" || $0 == "\u{85}" }, "\(r.out)")
    }
  }
}
