import Foundation
import TestSupport
import Testing

/// Issue 55: a walk's listings answer the tools run right after it. `du -s` after `find` of
/// the same tree lists nothing again (over GCS it asks nothing at all).
@Suite(.serialized) struct WalkTests {
  @Test(arguments: ["firebase", "gcs"]) func duRightAfterAWalkListsNothingAgain(api: String) async throws {
    try await MountFixture.scope { fx in
      var names: [String] = []
      for folder in 0..<40 { for file in 0..<5 { names.append("tree/d\(folder)/f\(file)") } }
      try await fx.putAll(names)
      let m = try fx.mount(options: ["metadata_ttl=300"], extra: ["--api", api], name: "walk-\(api)")
      let (status, found) = runTool("/usr/bin/find", [m.path("tree"), "-type", "f"])
      #expect(status == 0 && found.split(separator: "\n").count == names.count)
      let before = try #require(m.stat("requests to the bucket").flatMap { Int($0.split(separator: " ").first ?? "") })
      let (duStatus, du) = runTool("/usr/bin/du", ["-sb", m.path("tree")])
      #expect(duStatus == 0, "\(du)")
      let expected = names.reduce(0) { $0 + $1.utf8.count }
      #expect(du.split(separator: "\t").first.flatMap { Int($0) }.map { $0 >= expected } == true, "\(du)")
      let after = try #require(m.stat("requests to the bucket").flatMap { Int($0.split(separator: " ").first ?? "") })
      // Reading the stats is no request to the bucket. A v0 listing carries names only, so
      // `du` over that API asks each file's size once (never a listing again); a GCS listing
      // carries them, and `du` asks nothing.
      // (And at most one per folder for its placeholder, which `find` did not stat.)
      let most = api == "gcs" ? 0 : names.count + 40
      #expect(after - before <= most, "du made \(after - before) requests after the walk")
      // Again: now everything `du` needs is known.
      #expect(runTool("/usr/bin/du", ["-sb", m.path("tree")]).0 == 0)
      let again = try #require(m.stat("requests to the bucket").flatMap { Int($0.split(separator: " ").first ?? "") })
      #expect(again == after, "a second du made \(again - after) requests")
    }
  }
}
