import Foundation
import StorageCore
import TestSupport
import Testing

/// Issue 55 F1: a name segment that begins with a combining mark (U+0301, ZWJ) or a folder
/// name that ends in a prepended concatenation mark (U+0600) keeps its mark. Names were cut by
/// `Character`s, where "/" and such a mark are one: "g/" U+0301 "acc" showed as "acc" and read
/// "g/acc"'s bytes, folder "g" U+0600 vanished, and a folder rename left such objects behind.
extension NameTwinTests {
  static let marked: [(String, Data)] = [
    ("g/acc", Data("plain acc".utf8)),
    ("g/\u{301}acc", Data("the accent-led acc".utf8)),
    ("g/\u{200D}zwj", Data("zwj-led".utf8)),
    ("g/\u{301}dir/x", Data("in the accent-led folder".utf8)),
    ("p/g/y", Data("y in plain g".utf8)),
    ("p/g\u{600}/x", Data("x in g with a prepended mark".utf8)),
    ("p/h\u{600}", Data("file h with a prepended mark".utf8)),
  ]

  @Test(arguments: ["firebase", "gcs"]) func marksBesideSlashesStayInTheirNames(api: String) async throws {
    try await MountFixture.scope { fx in
      for (name, data) in Self.marked { _ = try await fx.put(name, data) }
      for (name, data) in Self.marked where name.hasBytePrefix("g/") { _ = try await fx.put("m" + name, data) }
      let m = try fx.mount(options: ["writable"], extra: ["--api", api], name: "marks-\(api)")
      let g = try #require(namesAsBytes(m.path("g")))
      #expect(
        g.count == 4 && Set(g) == Set(["acc", "\u{301}acc", "\u{200D}zwj", "\u{301}dir"].map { Array($0.utf8) }),
        "\(api): \(g.map { String(decoding: $0, as: UTF8.self).unicodeScalars.map { String($0.value, radix: 16) } })")
      let p = try #require(namesAsBytes(m.path("p")))
      #expect(p.count == 3 && Set(p) == Set(["g", "g\u{600}", "h\u{600}"].map { Array($0.utf8) }), "\(api): \(p)")
      for (name, data) in Self.marked {
        #expect(readFile(m.path(name)) == .success(data), "\(api): \(name.unicodeScalars.map { String($0.value, radix: 16) })")
      }
      // A folder renamed through the mount takes every object with it, marks and all.
      #expect(rename(m.path("mg"), m.path("mh")) == 0, "\(api): errno \(errno)")
      let (status, output) = m.sync()
      #expect(status == 0, "\(output)")
      for (name, data) in Self.marked where name.hasBytePrefix("g/") {
        #expect(await fx.object("mh" + name.droppingBytes(1)) == data, "\(api): \(name.debugDescription) moved")
        #expect(await fx.object("mg" + name.droppingBytes(1)) == nil, "\(api): \(name.debugDescription) left behind")
      }
    }
  }
}
