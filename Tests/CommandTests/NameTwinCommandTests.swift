import Foundation
import TestSupport
import Testing

/// Issue 55, 1: the CLI keeps NFC "café" and NFD "café" apart (two objects, two names in the
/// bucket, two files on a local disk): `ls`, `ls -l`, `du` and `cp -r` each show or copy both,
/// with their own bytes, on both APIs.
@Suite struct NameTwinCommandTests {
  static let nfc = "caf\u{e9}"
  static let nfd = "cafe\u{301}"

  @Test(arguments: ["firebase", "gcs"]) func commandsKeepBothSpellings(api: String) throws {
    try scope(ServeProcess()) { server in
      let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cli-twins-\(UUID().uuidString)")
      let source = dir.appendingPathComponent("src")
      try FileManager.default.createDirectory(at: source.appendingPathComponent("d-\(Self.nfc)"), withIntermediateDirectories: true)
      try FileManager.default.createDirectory(at: source.appendingPathComponent("d-\(Self.nfd)"), withIntermediateDirectories: true)
      defer { try? FileManager.default.removeItem(at: dir) }
      let list: [(String, Data)] = [
        (Self.nfc, Data("nfc".utf8)), (Self.nfd, Data("the nfd one".utf8)), ("d-\(Self.nfc)/in", Data("in nfc".utf8)),
        ("d-\(Self.nfd)/in", Data("in the nfd folder".utf8)),
      ]
      for (name, data) in list { try data.write(to: source.appendingPathComponent(name)) }
      let api = ["--api", api, "--emulator", server.address]
      var r = try runBucketfs(["cp", "-r", "--no-progress", source.path, "gs://bk/tw"] + api)
      #expect(r.status == 0, "\(r.stderr)")
      r = try runBucketfs(["ls", "gs://bk/tw/"] + api)
      #expect(r.status == 0, "\(r.stderr)")
      let lines = r.stdout.split(separator: UInt8(ascii: "\n")).map(Array.init)
      // Each of the four names ends exactly one line.
      for name in [Self.nfc, Self.nfd, "d-\(Self.nfc)/", "d-\(Self.nfd)/"] {
        let tail = Array("tw/\(name)".utf8)
        #expect(lines.filter { $0.count >= tail.count && Array($0.suffix(tail.count)) == tail }.count == 1, "\(r.out.debugDescription)")
      }
      #expect(lines.count == 4, "\(r.out.debugDescription)")
      r = try runBucketfs(["ls", "-l", "gs://bk/tw/"] + api)
      #expect(r.status == 0, "\(r.stderr)")
      // Each file's line has its own size.
      for (name, size) in [(Self.nfc, 3), (Self.nfd, 11)] {
        let line = r.stdout.split(separator: UInt8(ascii: "\n")).first { String(decoding: $0, as: UTF8.self).split(separator: " ").contains { Array($0.utf8).elementsEqual("gs://bk/tw/\(name)".utf8) || Array($0.utf8).elementsEqual("tw/\(name)".utf8) } }
        let fields = line.map { String(decoding: $0, as: UTF8.self).split(separator: " ") } ?? []
        #expect(fields.first == "\(size)", "\(name.debugDescription): \(r.out.debugDescription)")
      }
      r = try runBucketfs(["du", "-s", "gs://bk/tw"] + api)
      #expect(r.status == 0 && r.out.hasPrefix("37 "), "\(r.out.debugDescription)")
      r = try runBucketfs(["du", "gs://bk/tw"] + api)
      #expect(r.out.split(separator: "\n").count == 4, "\(r.out.debugDescription)")
      let back = dir.appendingPathComponent("back")
      r = try runBucketfs(["cp", "-r", "--no-progress", "gs://bk/tw", back.path] + api)
      #expect(r.status == 0, "\(r.stderr)")
      for (name, data) in list {
        let copied = FileManager.default.contents(atPath: back.appendingPathComponent(name).path)
        #expect(copied == data, "\(name.debugDescription)")
      }
    }
  }
}
