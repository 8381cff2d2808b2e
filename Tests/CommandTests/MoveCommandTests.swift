import ChildProcess
import Foundation
import TestSupport
import Testing

/// `bucketfs mv` within a bucket over the GCS API: one `objects.move` per object, and today's
/// copy-then-delete where the server has no move.
@Suite struct MoveCommandTests {
  func requests(_ server: ServeProcess) throws -> Int {
    let data = Data(runTool("/usr/bin/curl", ["-sf", "http://\(server.address)/emulator/v1/stats"]).1.utf8)
    return (try JSONSerialization.jsonObject(with: data) as? [String: Any])?["requests"] as? Int ?? -1
  }

  /// Odd names through the move's path, each moved with two requests (its metadata, the move);
  /// a server without move (`serve --no-move`) takes more for the same (the failed move, a look
  /// at the source, the copy, the delete) and gives the same result.
  @Test(arguments: [true, false]) func mvMovesOddNamesInOneRequestEach(serverMoves: Bool) throws {
    try scope(ServeProcess(extraArgs: serverMoves ? [] : ["--no-move"])) { server in
      let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cli-mv-\(UUID().uuidString)")
      try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
      defer { try? FileManager.default.removeItem(at: dir) }
      let on = ["--emulator", server.address, "--api", "gcs"]
      // (`?`, `*` and `[` are wildcards to the CLI, as to gsutil.)
      let names = ["a b.txt", "100% sure", "x#y", "ü/ñ 日本.bin", "plus+and&eq="]
      let big = randomData(3 << 20, seed: 3)
      for (i, name) in names.enumerated() {
        let local = dir.appendingPathComponent("f\(i)")
        try (i == 0 ? big : Data("bytes \(i)".utf8)).write(to: local)
        let r = try runBucketfs(["cp", "--no-progress", local.path, "gs://bk/src/\(name)"] + on)
        #expect(r.status == 0, "\(r.stderr)")
      }
      for (i, name) in names.enumerated() {
        let before = try requests(server)
        let r = try runBucketfs(["mv", "gs://bk/src/\(name)", "gs://bk/dst/\(name)"] + on)
        #expect(r.status == 0, "\(name): \(r.stderr)")
        // Less the stats request that reads the count.
        let used = try requests(server) - before - 1
        if serverMoves { #expect(used == 2, "\(name): \(used) requests") } else { #expect(used >= 4, "\(name): \(used) requests") }
        let back = dir.appendingPathComponent("back\(i)")
        #expect(try runBucketfs(["cp", "--no-progress", "gs://bk/dst/\(name)", back.path] + on).status == 0)
        #expect(try Data(contentsOf: back) == (i == 0 ? big : Data("bytes \(i)".utf8)), "\(name)")
        #expect(try runBucketfs(["stat", "gs://bk/src/\(name)"] + on).status != 0, "\(name) still there")
      }
    }
  }

  /// A folder's placeholder (`a/`, as mkdir through a mount makes) and those of folders in it
  /// move as placeholders: they became a file `n` (and `n/b`) beside the moved folder, and a
  /// second `mv` then moved only that file.
  @Test(arguments: ["firebase", "gcs"]) func mvOfAFolderKeepsItsPlaceholders(api: String) throws {
    try scope(ServeProcess()) { server in
      func curl(_ args: [String]) throws -> String {
        let r = try ChildProcess.run("/usr/bin/curl", ["-sf"] + args, environment: ProcessInfo.processInfo.environment, timeout: .seconds(30))
        #expect(r.status == 0, "curl \(args): \(r.errorText)")
        return r.text
      }
      func names() throws -> [String] {
        let json = try JSONSerialization.jsonObject(with: Data(try curl(["http://\(server.address)/storage/v1/b/bk/o"]).utf8)) as? [String: Any]
        return ((json?["items"] as? [[String: Any]]) ?? []).compactMap { $0["name"] as? String }.sorted()
      }
      for placeholder in ["a%2F", "a%2Fb%2F"] {
        _ = try curl(["-X", "POST", "--data-binary", "", "http://\(server.address)/upload/storage/v1/b/bk/o?uploadType=media&name=\(placeholder)"])
      }
      _ = try curl(["-X", "POST", "--data-binary", "f", "http://\(server.address)/upload/storage/v1/b/bk/o?uploadType=media&name=a%2Ff"])
      _ = try curl(["-X", "POST", "--data-binary", "g", "http://\(server.address)/upload/storage/v1/b/bk/o?uploadType=media&name=a%2Fb%2Fg"])
      let on = ["--emulator", server.address, "--api", api]
      var r = try runBucketfs(["mv", "gs://bk/a", "gs://bk/n"] + on)
      #expect(r.status == 0, "\(r.stderr)")
      #expect(try names() == ["n/", "n/b/", "n/b/g", "n/f"])
      r = try runBucketfs(["mv", "gs://bk/n", "gs://bk/a"] + on)
      #expect(r.status == 0, "\(r.stderr)")
      #expect(try names() == ["a/", "a/b/", "a/b/g", "a/f"])
    }
  }
}
