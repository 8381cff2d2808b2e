import Foundation
import StorageCore
import Testing

/// Issue 55 F2: names decoded from a URL or a JSON document keep a U+FEFF that begins them
/// (or a part of them after an escape). `removingPercentEncoding` and `JSONSerialization` drop it.
@Suite struct ExactTextTests {
  static let mark = "\u{FEFF}"

  @Test func percentDecodingKeepsALeadingMark() {
    #expect(ExactText.percentDecoded("%EF%BB%BFtop%2Fy").map { Array($0.utf8) } == Array("\(Self.mark)top/y".utf8))
    #expect(ExactText.percentDecoded("caf%C3%A9+x") == "caf\u{E9}+x")
    #expect(ExactText.percentDecoded("a%2") == nil && ExactText.percentDecoded("a%zz") == nil && ExactText.percentDecoded("%FF") == nil)
    #expect("%EF%BB%BFa".exactPercentDecoded.map { Array($0.utf8) } == Array("\(Self.mark)a".utf8))
  }

  /// What `JSONSerialization.data` writes (a "/" escaped as "\/"), read back whole.
  @Test func jsonKeepsMarksAfterEscapesAndAtTheStartOfStrings() throws {
    let names = ["\(Self.mark)rootfile", "p/\(Self.mark)bom", "p\(Self.mark)", "\(Self.mark)"]
    let written = try JSONSerialization.data(withJSONObject: ["names": names, "\(Self.mark)key": "v"])
    let read = try #require(try ExactText.jsonObject(with: written) as? [String: Any])
    let back = try #require(read["names"] as? [String])
    #expect(back.map { Array($0.utf8) } == names.map { Array($0.utf8) }, "\(back.map(\.debugDescription))")
    #expect(read.keys.contains { Array($0.utf8) == Array("\(Self.mark)key".utf8) })
    // A document that begins with the mark is still read (as JSONSerialization reads it).
    #expect((try? ExactText.jsonObject(with: Data([0xEF, 0xBB, 0xBF]) + Data("{\"a\":1}".utf8))) != nil)
    let m = try StorageMetadata(data: Data("{\"name\":\"\(Self.mark)top/y\",\"bucket\":\"bk\"}".utf8))
    #expect(m.path.map { Array($0.utf8) } == Array("\(Self.mark)top/y".utf8))
  }
}
