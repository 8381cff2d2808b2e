import Foundation
import TestSupport
import Testing

/// Issue 55 F1: the CLI keeps a name's mark beside a "/" (a segment that begins with U+0301
/// or a ZWJ; a folder that ends in U+0600): `cp -r` up and down and `mv` of a prefix copy
/// every object under its own name. They cut names by `Character`s ("/" and the mark are one):
/// an upload kept one file of three, a move lost one of two objects and misnamed the rest,
/// exit 0.
@Suite struct MarkLedNameCommandTests {
  static let files: [(String, Data)] = [
    ("acc", Data("plain".utf8)),
    ("\u{301}acc", Data("accent-led".utf8)),
    ("\u{301}dir/x", Data("in the accent-led folder".utf8)),
    ("\u{200D}zwj", Data("zwj-led".utf8)),
    ("g\u{600}/y", Data("in g with a prepended mark".utf8)),
  ]

  @Test(arguments: ["firebase", "gcs"]) func copiesAndMovesKeepTheMarks(api: String) throws {
    try scope(ServeProcess()) { server in
      let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cli-marks-\(UUID().uuidString)")
      defer { try? FileManager.default.removeItem(at: dir) }
      let source = dir.path + "/src"
      // Folders made by name (NSString's path calls cut at `Character`s too).
      for folder in ["", "/\u{301}dir", "/g\u{600}"] { try FileManager.default.createDirectory(atPath: source + folder, withIntermediateDirectories: true) }
      for (name, data) in Self.files { #expect(FileManager.default.createFile(atPath: source + "/" + name, contents: data)) }
      let api = ["--api", api, "--emulator", server.address]
      var r = try runBucketfs(["cp", "-r", "--no-progress", source, "gs://bk/up"] + api)
      #expect(r.status == 0, "\(r.stderr)")
      r = try runBucketfs(["mv", "gs://bk/up", "gs://bk/moved"] + api)
      #expect(r.status == 0, "\(r.stderr)")
      for (name, data) in Self.files {
        r = try runBucketfs(["cat", "gs://bk/moved/" + name] + api)
        #expect(r.status == 0 && r.stdout == data, "\(name.debugDescription): \(r.stderr)")
      }
      r = try runBucketfs(["ls", "-r", "gs://bk/"] + api)
      #expect(r.status == 0, "\(r.stderr)")
      let lines = r.stdout.split(separator: UInt8(ascii: "\n")).map { Array($0) }
      #expect(lines.count == Self.files.count && !r.out.contains("up/"), "\(r.out.debugDescription)")
      let back = dir.path + "/back"
      r = try runBucketfs(["cp", "-r", "--no-progress", "gs://bk/moved", back] + api)
      #expect(r.status == 0, "\(r.stderr)")
      for (name, data) in Self.files {
        #expect(FileManager.default.contents(atPath: back + "/" + name) == data, "\(name.debugDescription)")
      }
    }
  }

  /// Issue 55 F2: a file whose name begins with U+FEFF, uploaded into the bucket's root beside
  /// the same name without it, is its own object. The upload took the name from
  /// `URL.lastPathComponent`, and the emulator decoded it with `removingPercentEncoding` and
  /// `JSONSerialization`: each drops the mark, and the second upload replaced the first.
  @Test(arguments: ["firebase", "gcs"]) func aLeadingByteOrderMarkIsKept(api: String) throws {
    try scope(ServeProcess()) { server in
      let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cli-bom-\(UUID().uuidString)").path
      defer { try? FileManager.default.removeItem(atPath: dir) }
      try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
      let files = [("rootfile", Data("plain".utf8)), ("\u{FEFF}rootfile", Data("with the mark".utf8))]
      let api = ["--api", api, "--emulator", server.address]
      for (name, data) in files {
        #expect(FileManager.default.createFile(atPath: dir + "/" + name, contents: data))
        let r = try runBucketfs(["cp", "--no-progress", dir + "/" + name, "gs://bk/"] + api)
        #expect(r.status == 0, "\(r.stderr)")
      }
      for (name, data) in files {
        let r = try runBucketfs(["cat", "gs://bk/" + name] + api)
        #expect(r.status == 0 && r.stdout == data, "\(name.debugDescription): \(r.stderr)")
      }
      let r = try runBucketfs(["ls", "gs://bk/"] + api)
      #expect(r.stdout.split(separator: UInt8(ascii: "\n")).count == 2, "\(r.out.debugDescription)")
    }
  }
}

