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

/// Issue 55 F2: a name that begins with U+FEFF (a byte order mark) keeps it, at the bucket's
/// root and in a pinned folder offline. Foundation's decoders drop such a mark where a string
/// begins (`removingPercentEncoding`, and `JSONSerialization` after every escape, so
/// "p\/" U+FEFF "bom" in a pin's record came back "p/bom"): the root showed "rootfile" once
/// with the plain file's bytes, and a pinned folder offline showed "bom" and read EIO.
extension NameTwinTests {
  static let marks: [(String, Data)] = [
    ("rootfile", Data("plain root file".utf8)),
    ("\u{FEFF}rootfile", Data("the root file with a mark".utf8)),
    ("\u{FEFF}top/y", Data("in the marked root folder".utf8)),
    ("bp/plain", Data("plain".utf8)),
    ("bp/\u{FEFF}bom", Data("bom file".utf8)),
    ("bp/\u{FEFF}dir/x", Data("in the marked folder".utf8)),
  ]

  static func checkMarks(_ m: MountedBucket, _ label: String, root: Bool) throws {
    if root {
      let listed = try #require(namesAsBytes(m.mountpoint.path), "\(label)")
      #expect(
        Set(["rootfile", "\u{FEFF}rootfile", "\u{FEFF}top", "bp"].map { Array($0.utf8) }).isSubset(of: Set(listed)),
        "\(label): \(listed.map { String(decoding: $0, as: UTF8.self).debugDescription })")
    }
    let bp = try #require(namesAsBytes(m.path("bp")), "\(label)")
    #expect(bp.count == 3 && Set(bp) == Set(["plain", "\u{FEFF}bom", "\u{FEFF}dir"].map { Array($0.utf8) }), "\(label): \(bp)")
    for (name, data) in marks where root || name.hasBytePrefix("bp/") {
      #expect(readFile(m.path(name)) == .success(data), "\(label): \(name.debugDescription)")
    }
  }

  @Test(arguments: ["firebase", "gcs"]) func byteOrderMarksStayOnlineAndOffline(api: String) async throws {
    try await MountFixture.scope { fx in
      for (name, data) in Self.marks { _ = try await fx.put(name, data) }
      let m = try fx.mount(extra: ["--api", api], name: "bom-\(api)")
      try Self.checkMarks(m, "\(api), online", root: true)
      for folder in ["bp", "\u{FEFF}top"] {
        let (status, output) = runTool(bucketfsBinary, ["pin", m.path(folder)], timeout: .seconds(120))
        #expect(status == 0, "\(api): pin \(folder.debugDescription): \(output)")
      }
      m.unmount()
      let offline = try fx.mount(options: ["offline"], extra: ["--api", api], name: "bom-offline-\(api)")
      try Self.checkMarks(offline, "\(api), offline", root: false)
      #expect(readFile(offline.path("\u{FEFF}top/y")) == .success(Data("in the marked root folder".utf8)), "\(api), offline")
    }
  }
}
