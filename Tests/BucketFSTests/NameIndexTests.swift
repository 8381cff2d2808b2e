@testable import BucketFS
import Foundation
import Testing

/// Names and inodes at scale: a listing finds each name by its bytes however the entries are
/// ordered and changed, and a reused inode slot never hands out a number the kernel had.
@Suite struct NameIndexTests {
  func position(_ listings: FolderListings, _ dir: String, _ name: String) -> Int? { listings.position(dir: dir, name: name)?.index }

  @Test func aListingFindsEveryNameByItsBytesThroughChanges() {
    let listings = FolderListings(ttl: 60, capacity: 10)
    let nfc = "caf\u{E9}"
    let nfd = "cafe\u{301}"
    var names = ["zeta", "alpha", nfd, "m", nfc, "Beta", "a b", "\u{1F600}"]
    let entries = names.map { DirectoryEntry(name: $0, isDirectory: false, objectName: "d/" + $0) }
    #expect(listings.store("d", entries))
    for (i, name) in names.enumerated() { #expect(position(listings, "d", name) == i, "\(name.debugDescription)") }
    #expect(position(listings, "d", "absent") == nil)
    #expect(position(listings, "d", "caf") == nil)
    // Canonically equal spellings are two names, each found as itself.
    #expect(position(listings, "d", nfc) != position(listings, "d", nfd))
    // A name added, one removed: every other name is still where it now is.
    listings.update("d", name: "new", entry: DirectoryEntry(name: "new", isDirectory: false, objectName: "d/new"))
    names.append("new")
    listings.update("d", name: "alpha", entry: nil)
    names.removeAll { $0 == "alpha" }
    for (i, name) in names.enumerated() { #expect(position(listings, "d", name) == i, "\(name.debugDescription)") }
    #expect(position(listings, "d", "alpha") == nil)
  }

  @Test func aReusedInodeSlotNeverRepeatsANumber() {
    let table = InodeTable()
    var seen: Set<UInt64> = [InodeTable.rootIno]
    var last: [UInt64] = []
    for round in 0..<4 {
      var inos: [UInt64] = []
      for i in 0..<50 {
        let node = InodeTable.Node(path: "r\(round)/f\(i)", isDirectory: false, objectName: "r\(round)/f\(i)")
        let ino = table.ino(for: node, lookup: true)
        #expect(seen.insert(ino).inserted, "number \(ino) handed out twice")
        #expect(ino < 1 << 62, "a number with the listed-only mark")
        #expect(table.node(ino)?.path == node.path)
        inos.append(ino)
      }
      // The numbers of the round before are unknown, though their slots now hold others.
      for ino in last { #expect(table.node(ino) == nil) }
      for ino in inos { table.forget(ino, count: 1) }
      #expect(table.count == 1)
      last = inos
    }
    #expect(table.node(InodeTable.rootIno)?.path == "")
  }
}

/// Issue 55: what the mount keeps by path or object name keeps NFC and NFD "café" apart.
@Suite struct TwinKeyTests {
  let nfc = "d-caf\u{e9}"
  let nfd = "d-cafe\u{301}"

  @Test func aModeSetOnOneSpellingIsNotTheOthers() {
    let changes = PosixChanges()
    changes.queued(nfc, PosixAttributes(mode: 0o700), sequence: .max)
    #expect(changes.held { nfc }?.attributes.mode == 0o700)
    #expect(changes.held { nfd } == nil)
    changes.moveFolders(nfc, to: "moved")
    #expect(changes.held { "moved" }?.attributes.mode == 0o700)
  }

  @Test func aReadTimeoutOfOneSpellingIsNotTheOthers() {
    let timeouts = RecentTimeouts(echo: .seconds(60))
    let opened = ContinuousClock.now
    timeouts.timedOut(nfc, generation: 1)
    #expect(timeouts.isFresh(nfc, generation: 1, openedAt: opened))
    #expect(!timeouts.isFresh(nfd, generation: 1, openedAt: opened))
  }
}
