@testable import BucketFS
import Foundation
import StorageCore
import Testing

/// A listing named as its pages arrive names every entry as the whole listing does, wherever
/// the pages break: a file and its folder twin (and the aliases the file may take) on either
/// side of a boundary, out-of-order pages, and names the folder cannot show.
@Suite struct ListingBuilderTests {
  /// The folder `d/` of a bucket: objects and objects under sub-folders, as a delimiter
  /// listing gives them (sub-folders fold into prefixes), in byte order.
  static let objects: [String] = [
    "d/a", "d/a.object", "d/a.object.1", "d/a/x", "d/b", "d/b!", "d/b.object/y", "d/b/z", "d/c", "d/caf\u{E9}", "d/cafe\u{301}",
    "d/e", "d/e/", "d/f", "d/g.txt", "d/h", "d/h/i", "d/bad\u{0}name", "d/z",
  ]

  /// The listed names in byte order: items, and prefixes for what lies deeper.
  static func listed() -> [(name: String, isPrefix: Bool)] {
    var out: [(String, Bool)] = []
    var seen = Set<String>()
    for o in objects {
      let rest = o.dropFirst(2)
      if let slash = rest.firstIndex(of: "/") {
        let prefix = "d/" + rest[..<slash] + "/"
        if seen.insert(prefix).inserted { out.append((prefix, true)) }
      } else {
        out.append((o, false))
      }
    }
    return out.sorted { $0.0.utf8.lexicographicallyPrecedes($1.0.utf8) }
  }

  static func pages(_ names: [(name: String, isPrefix: Bool)], cuts: [Int], inOrder: Bool = true) -> [ListPage] {
    var bounds = [0] + cuts + [names.count]
    bounds = Array(Set(bounds)).sorted()
    return zip(bounds, bounds.dropFirst()).map { start, end in
      let part = names[start..<end]
      var page = ListPage(
        prefixes: part.filter(\.isPrefix).map(\.name), items: part.filter { !$0.isPrefix }.map(\.name), nextPageToken: nil)
      page.inNameOrder = inOrder
      return page
    }
  }

  /// What readers are shown, page by page and at the end; also what was left out.
  static func build(_ pages: [ListPage]) -> (shown: [String], perPage: [[String]], leftOut: [String]) {
    var leftOut: [String] = []
    var builder = ListingBuilder(
      listPrefix: "d/", folderObject: { _, _ in }, leftOut: { name, _ in leftOut.append(name) }, knownSummary: { _ in nil })
    var perPage: [[String]] = []
    for page in pages { perPage.append(builder.add(page).map { $0.isDirectory ? $0.name + "/" : $0.name + "=" + $0.objectName! }) }
    let last = builder.finish().map { $0.isDirectory ? $0.name + "/" : $0.name + "=" + $0.objectName! }
    return (perPage.flatMap { $0 } + last, perPage, leftOut)
  }

  @Test func namesAreTheSameWhereverThePagesBreak() {
    let names = Self.listed()
    let whole = Self.build(Self.pages(names, cuts: []))
    let expected: [String] = [
      "a/", "a.object=d/a.object", "a.object.1=d/a.object.1", "a.object.2=d/a", "b/", "b.object.1=d/b", "b!=d/b!", "b.object/", "c=d/c",
      "caf\u{E9}=d/caf\u{E9}", "cafe\u{301}=d/cafe\u{301}", "e/", "e.object=d/e", "f=d/f", "g.txt=d/g.txt", "h/", "h.object=d/h", "z=d/z",
    ]
    // Compared by bytes: Swift's String equality takes the two spellings of café for one.
    let shownBytes = Set(whole.shown.map { Array($0.utf8) })
    #expect(shownBytes.count == whole.shown.count, "a name twice: \(whole.shown)")
    #expect(shownBytes == Set(expected.map { Array($0.utf8) }), "\(whole.shown.sorted())")
    #expect(whole.leftOut == ["d/bad\u{0}name"])
    // Every single cut and every pair of cuts gives the same names.
    for i in 0...names.count {
      for j in i...names.count {
        let split = Self.build(Self.pages(names, cuts: [i, j]))
        #expect(split.shown.count == whole.shown.count && Set(split.shown.map { Array($0.utf8) }) == shownBytes, "cut at \(i), \(j)")
      }
    }
  }

  @Test func filesLeaveOnceTheirFolderTwinCannotComeLater() {
    let names = Self.listed()
    // A page per name: a file is held until the listing passes its `name/`.
    let split = Self.build(Self.pages(names, cuts: Array(1..<names.count)))
    let aPage = names.firstIndex { $0.name == "d/a" }!
    let twinPage = names.firstIndex { $0.name == "d/a/" }!
    #expect(twinPage > aPage)
    #expect(!split.perPage[aPage].contains { $0.hasSuffix("=d/a") })
    #expect(split.perPage[twinPage].contains("a.object.2=d/a"), "\(split.perPage[twinPage])")
    // `g.txt` has no twin: it leaves with the first page past `g.txt/`.
    let g = names.firstIndex { $0.name == "d/g.txt" }!
    #expect(split.perPage[g + 1].contains("g.txt=d/g.txt") || split.perPage[g].contains("g.txt=d/g.txt"))
  }

  @Test func pagesWithoutOrderGiveTheirFilesAtTheEnd() {
    let names = Self.listed()
    let whole = Self.build(Self.pages(names, cuts: []))
    // Pages that promise no order: every file waits for the end.
    let unordered = Self.build(Self.pages(names, cuts: [7], inOrder: false))
    #expect(Set(unordered.shown.map { Array($0.utf8) }) == Set(whole.shown.map { Array($0.utf8) }))
    #expect(unordered.perPage.flatMap { $0 }.allSatisfy { $0.hasSuffix("/") }, "files before the end: \(unordered.perPage)")
    // A page found before the one before it: from there on, files wait for the end.
    let pages = Self.pages(names, cuts: [7])
    let swapped = Self.build([pages[1], pages[0]])
    #expect(swapped.perPage[1].allSatisfy { $0.hasSuffix("/") }, "\(swapped.perPage[1])")
    #expect(Set(swapped.shown.map { Array($0.utf8) }) == Set(whole.shown.map { Array($0.utf8) }))
  }
}
