import Foundation
import TestSupport
import Testing

/// What gsutil users expect of the object commands: wildcards as gsutil matches them in ls, cp,
/// rm, stat and cat; mv by a server-side copy and a delete; du; cp between two bucket URLs.
@Suite struct WildcardCommandTests {
  func fill(_ server: ServeProcess, _ api: String, _ dir: URL) throws {
    let names = ["a/x.jpg", "a/y.jpg", "a/z.txt", "a/deep/w.jpg", "a1/v.jpg", "b/u.jpg", "c[1].txt"]
    for name in names {
      let local = dir.appendingPathComponent(UUID().uuidString)
      try Data("bytes of \(name)".utf8).write(to: local)
      let r = try runBucketfs(["cp", "--no-progress", local.path, "gs://bk/\(name)", "--emulator", server.address, "--api", api])
      #expect(r.status == 0, "\(r.stderr)")
    }
  }

  /// Runs `body` with a server holding the objects of `fill`, a scratch folder, and the options
  /// that reach the server over `api`.
  func withObjects(_ api: String, _ body: (URL, [String]) throws -> Void) throws {
    try scope(ServeProcess()) { server in
      let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cli-\(UUID().uuidString)")
      try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
      defer { try? FileManager.default.removeItem(at: dir) }
      try fill(server, api, dir)
      try body(dir, ["--emulator", server.address, "--api", api])
    }
  }

  func lines(_ r: RunResult) -> [String] { r.out.split(separator: "\n").map(String.init) }

  @Test(arguments: ["firebase", "gcs"]) func wildcardsMatchAsGsutilMatches(api: String) throws {
    try withObjects(api) { dir, on in
      var r = try runBucketfs(["ls", "gs://bk/a/*.jpg"] + on)
      #expect(r.status == 0 && lines(r) == ["a/x.jpg", "a/y.jpg"], "\(r.out) \(r.stderr)")
      r = try runBucketfs(["ls", "gs://bk/a/**.jpg"] + on)
      #expect(lines(r) == ["a/deep/w.jpg", "a/x.jpg", "a/y.jpg"], "\(r.out)")
      r = try runBucketfs(["ls", "gs://bk/a?/*"] + on)
      #expect(lines(r) == ["a1/v.jpg"], "\(r.out)")
      r = try runBucketfs(["ls", "gs://bk/a/[xz].*"] + on)
      #expect(lines(r) == ["a/x.jpg", "a/z.txt"], "\(r.out)")
      r = try runBucketfs(["ls", "gs://bk/a/[!x]*"] + on)
      #expect(lines(r) == ["a/deep/", "a/y.jpg", "a/z.txt"], "\(r.out)")
      // A folder whose name matches is shown as a folder, as gsutil ls shows it.
      r = try runBucketfs(["ls", "gs://bk/a*"] + on)
      #expect(lines(r) == ["a/", "a1/"], "\(r.out)")
      r = try runBucketfs(["stat", "gs://bk/*.nothing"] + on)
      #expect(r.status != 0 && r.stderr.contains("no such object"), "\(r.stderr)")
      // A name whose brackets match nothing names itself.
      r = try runBucketfs(["cat", "gs://bk/c[1].txt"] + on)
      #expect(r.status == 0 && r.out == "bytes of c[1].txt", "\(r.out) \(r.stderr)")
      r = try runBucketfs(["cat", "gs://bk/a/?.jpg"] + on)
      #expect(r.out == "bytes of a/x.jpgbytes of a/y.jpg", "\(r.out)")
      r = try runBucketfs(["stat", "--json", "gs://bk/**w.jpg"] + on)
      let stats = try JSONSerialization.jsonObject(with: r.stdout) as? [[String: Any]]
      #expect(stats?.compactMap { $0["name"] as? String } == ["a/deep/w.jpg"], "\(r.out)")
      let out = dir.appendingPathComponent("out")
      try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
      r = try runBucketfs(["cp", "--no-progress", "gs://bk/a/*.jpg", out.path] + on)
      #expect(r.status == 0, "\(r.stderr)")
      #expect(try FileManager.default.contentsOfDirectory(atPath: out.path).sorted() == ["x.jpg", "y.jpg"])
      #expect(try String(contentsOf: out.appendingPathComponent("y.jpg"), encoding: .utf8) == "bytes of a/y.jpg")
      // Two matches with one last name would overwrite each other: refused before any copy.
      r = try runBucketfs(["cp", "--no-progress", "gs://bk/a/x.jpg", "gs://bk/b/x.jpg"] + on)
      #expect(r.status == 0, "\(r.stderr)")
      r = try runBucketfs(["cp", "--no-progress", "gs://bk/**x.jpg", out.path] + on)
      #expect(r.status != 0 && r.stderr.contains("more than once"), "\(r.stderr)")
      r = try runBucketfs(["rm", "gs://bk/a/*.txt"] + on)
      #expect(r.status == 0, "\(r.stderr)")
      r = try runBucketfs(["ls", "-r", "gs://bk/a"] + on)
      #expect(lines(r) == ["a/deep/w.jpg", "a/x.jpg", "a/y.jpg"], "\(r.out)")
      r = try runBucketfs(["rm", "-r", "gs://bk/a*"] + on)
      #expect(r.status == 0, "\(r.stderr)")
      r = try runBucketfs(["ls", "-r", "gs://bk"] + on)
      #expect(lines(r) == ["b/u.jpg", "b/x.jpg", "c[1].txt"], "\(r.out)")
    }
  }

  @Test(arguments: ["firebase", "gcs"]) func mvDuAndBucketToBucketCopy(api: String) throws {
    try withObjects(api) { dir, on in
      var r = try runBucketfs(["du", "gs://bk/a"] + on)
      #expect(r.status == 0 && lines(r).count == 4, "\(r.out) \(r.stderr)")
      #expect(lines(r).contains("16  gs://bk/a/x.jpg"), "\(r.out)")
      r = try runBucketfs(["du", "-s", "gs://bk/a"] + on)
      #expect(lines(r) == ["\(16 + 16 + 16 + 21)  gs://bk/a"], "\(r.out)")
      r = try runBucketfs(["du", "-c", "gs://bk/**.jpg"] + on)
      #expect(lines(r).last == "\(16 + 16 + 21 + 17 + 16)  total", "\(r.out)")
      // An object.
      r = try runBucketfs(["mv", "gs://bk/b/u.jpg", "gs://bk/moved/u2.jpg"] + on)
      #expect(r.status == 0, "\(r.stderr)")
      r = try runBucketfs(["cat", "gs://bk/moved/u2.jpg"] + on)
      #expect(r.out == "bytes of b/u.jpg")
      #expect(try runBucketfs(["stat", "gs://bk/b/u.jpg"] + on).status != 0)
      // A prefix: every object under it, keeping the names below it.
      r = try runBucketfs(["mv", "gs://bk/a", "gs://bk/renamed"] + on)
      #expect(r.status == 0, "\(r.stderr)")
      r = try runBucketfs(["ls", "-r", "gs://bk/renamed"] + on)
      #expect(lines(r) == ["renamed/deep/w.jpg", "renamed/x.jpg", "renamed/y.jpg", "renamed/z.txt"], "\(r.out)")
      #expect(try runBucketfs(["ls", "-r", "gs://bk/a/"] + on).out.isEmpty)
      // A wildcard into a folder of another bucket, and a copy that keeps the sources.
      r = try runBucketfs(["cp", "gs://bk/renamed/*.jpg", "gs://other/copies/"] + on)
      #expect(r.status == 0, "\(r.stderr)")
      r = try runBucketfs(["ls", "-r", "gs://other"] + on)
      #expect(lines(r) == ["copies/x.jpg", "copies/y.jpg"], "\(r.out)")
      #expect(try runBucketfs(["cat", "gs://other/copies/y.jpg"] + on).out == "bytes of a/y.jpg")
      #expect(try runBucketfs(["cat", "gs://bk/renamed/y.jpg"] + on).out == "bytes of a/y.jpg")
      #expect(try runBucketfs(["mv", "gs://bk/nothing-here", "gs://bk/x"] + on).status != 0)
    }
  }
}
