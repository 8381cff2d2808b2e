@testable import BucketFS
import Foundation
import StorageCore
import Testing

/// Issue 55 F1: a name is cut at its "/" bytes. Swift's `String` works in `Character`s, and a "/"
/// followed by a combining mark (U+0301, ZWJ, a variation selector) is one of them, as is a
/// prepended concatenation mark (U+0600) and the "/" after it. Cut by characters, "g/" U+0301
/// "acc" showed as "acc" beside "g/acc", and folder "g" U+0600 "/" did not end in "/".
@Suite struct MarkLedNameTests {
  static let acute = "\u{301}"
  static let zwj = "\u{200D}"
  static let prepend = "\u{600}"

  static func bytes(_ names: [String]) -> Set<[UInt8]> { Set(names.map { Array($0.utf8) }) }

  @Test func theHelpersCutAtSlashBytes() {
    let name = "g/\(Self.acute)dir/x"
    #expect(name.slashSegments().map { Array($0.utf8) } == [Array("g".utf8), Array("\(Self.acute)dir".utf8), Array("x".utf8)])
    #expect(name.afterBytePrefix("g/").map { Array($0.utf8) } == Array("\(Self.acute)dir/x".utf8))
    #expect(name.afterBytePrefix("h/") == nil)
    #expect("g\(Self.prepend)/".endsWithSlash && !"g\(Self.prepend)/".hasSuffix("/"))
    #expect(Array("g\(Self.prepend)/".withoutTrailingSlash.utf8) == Array("g\(Self.prepend)".utf8))
    #expect(Array("g/\(Self.acute)acc".lastSlashSegment.utf8) == Array("\(Self.acute)acc".utf8))
    #expect(Array(Namespace.split("g/\(Self.acute)acc").name.utf8) == Array("\(Self.acute)acc".utf8))
  }

  /// `gs://bk/` U+0301 `acc` names object U+0301 `acc` in bucket `bk` (the slash and the accent
  /// were one character, and the whole rest was taken for the bucket's name).
  @Test func aURLIsCutAtItsSlashBytes() throws {
    for exact in [true, false] {
      let path = try StoragePath.parse(url: "gs://bk/\(Self.acute)acc/\(Self.zwj)x", exactNames: exact)
      #expect(path.bucket == "bk", "\(exact)")
      #expect(Array(path.object.utf8) == Array("\(Self.acute)acc/\(Self.zwj)x".utf8), "\(exact)")
    }
    #expect(Array(StoragePath.normalize("a//\(Self.acute)b/").utf8) == Array("a/\(Self.acute)b".utf8))
  }

  /// A listing of `g/` shows each name whole: files and folders that begin with a mark, and a
  /// folder whose name ends in a prepended mark.
  @Test func aListingKeepsTheMarksBesideItsSlashes() {
    var page = ListPage(
      prefixes: ["g/g/", "g/g\(Self.prepend)/", "g/\(Self.acute)dir/"],
      items: ["g/", "g/acc", "g/\(Self.zwj)zwj", "g/\(Self.acute)acc", "g/h\(Self.prepend)/"].sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) },
      nextPageToken: nil)
    page.inNameOrder = false
    var leftOut: [String] = []
    var builder = ListingBuilder(
      listPrefix: "g/", folderObject: { _, _ in }, leftOut: { name, _ in leftOut.append(name) }, knownSummary: { _ in nil })
    let entries = builder.add(page) + builder.finish()
    let shown = entries.map { $0.isDirectory ? $0.name + "/" : $0.name }
    #expect(shown.count == 7 && Self.bytes(shown) == Self.bytes([
      "g/", "g\(Self.prepend)/", "\(Self.acute)dir/", "acc", "\(Self.zwj)zwj", "\(Self.acute)acc", "h\(Self.prepend)/",
    ]), "\(shown.map { Array($0.unicodeScalars).map { String($0.value, radix: 16) } })")
    #expect(leftOut.isEmpty, "\(leftOut)")
    let accent = entries.first { Array($0.name.utf8) == Array("\(Self.acute)acc".utf8) }
    #expect(accent?.objectName.map { Array($0.utf8) } == Array("g/\(Self.acute)acc".utf8))
  }
}
