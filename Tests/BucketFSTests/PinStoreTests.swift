@testable import BucketFS
import Foundation
import StorageCore
import Testing

/// Pins last across mounts: a record reads back as it was written, and one that cannot be read
/// is set aside, never taken for a pin of something else.
@Suite struct PinStoreTests {
  private func folder() throws -> URL {
    let url = URL(fileURLWithPath: "/tmp").appendingPathComponent("bucketfs-pins-\(UUID().uuidString.prefix(8))")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
  }

  @Test func aRecordReadsBackAndADamagedOneIsSetAside() throws {
    let staging = try folder()
    defer { try? FileManager.default.removeItem(at: staging) }
    let store = PinStore(stagingFolder: staging)
    let m = StorageMetadata(dictionary: ["name": "trip/a.txt", "size": "5", "generation": "17"])
    var kept = Pin(target: "trip/", phase: .kept, tree: ["trip/a.txt": m, "trip/empty/": StorageMetadata(dictionary: ["name": "trip/empty/"])])
    kept.failures = ["trip/b.txt": "forbidden"]
    kept.lastRefreshed = Date(timeIntervalSince1970: 1_700_000_000)
    try store.save(kept)
    try store.save(Pin(target: "notes.txt", phase: .staging(Pin.Progress()), tree: [:]))

    let (pins, damaged, _) = store.load()
    #expect(damaged.isEmpty)
    #expect(pins.map(\.target).sorted() == ["notes.txt", "trip/"])
    let trip = try #require(pins.first { $0.target == "trip/" })
    if case .kept = trip.phase {} else { Issue.record("\(trip.phase)") }
    #expect(trip.tree["trip/a.txt"]?.generation == 17 && trip.tree["trip/a.txt"]?.size == 5)
    #expect(trip.files.map(\.name) == ["trip/a.txt"], "a placeholder is no file to stage")
    #expect(trip.failures == ["trip/b.txt": "forbidden"])
    #expect(trip.lastRefreshed == Date(timeIntervalSince1970: 1_700_000_000))
    let notes = try #require(pins.first { $0.target == "notes.txt" })
    if case .staging = notes.phase {} else { Issue.record("a pin left staging resumes as such: \(notes.phase)") }

    // A record cut short (a disk that lost it): set aside, the other pins still load.
    let files = try FileManager.default.contentsOfDirectory(atPath: store.folder.path).filter { $0.hasSuffix(".json") }
    let cut = store.folder.appendingPathComponent(files[0]).path
    let whole = try Data(contentsOf: URL(fileURLWithPath: cut))
    try whole.prefix(whole.count / 2).write(to: URL(fileURLWithPath: cut))
    let (after, setAside, _) = store.load()
    #expect(after.count == 1)
    #expect(setAside == [cut])
    #expect(FileManager.default.fileExists(atPath: cut + ".damaged"))

    store.remove(after[0].target)
    #expect(store.load().pins.isEmpty)
  }

  /// A tree holding NFC and NFD "café" (two objects) reads back with both, each its own; a
  /// record written before trees were lists (a JSON object keyed by name) still loads.
  @Test func twoSpellingsOfANameAreTwoObjectsOfTheTree() throws {
    let staging = try folder()
    defer { try? FileManager.default.removeItem(at: staging) }
    let store = PinStore(stagingFolder: staging)
    let nfc = "t/caf\u{e9}"
    let nfd = "t/cafe\u{301}"
    let tree: [ObjectName: StorageMetadata] = [
      ObjectName(nfc): StorageMetadata(dictionary: ["name": nfc, "size": "3", "generation": "1"]),
      ObjectName(nfd): StorageMetadata(dictionary: ["name": nfd, "size": "11", "generation": "2"]),
    ]
    #expect(tree.count == 2)
    try store.save(Pin(target: "t/", phase: .kept, tree: tree))
    let loaded = try #require(store.load().pins.first)
    #expect(loaded.tree.count == 2)
    #expect(loaded.tree[ObjectName(nfc)]?.size == 3 && loaded.tree[ObjectName(nfd)]?.size == 11)
    #expect(loaded.files.map { Array($0.name.utf8) } == [Array(nfd.utf8), Array(nfc.utf8)], "byte order")

    let old = #"{"kept":true,"target":"o/","tree":{"o/a":{"name":"o/a","size":"5","generation":"7"}},"failures":{}}"#
    try Data(old.utf8).write(to: store.folder.appendingPathComponent("old.json"))
    let pins = store.load().pins
    let o = try #require(pins.first { $0.target == "o/" }, "\(pins.map(\.target))")
    #expect(o.tree["o/a"]?.size == 5)
  }

  /// A pin that follows a rename is recorded under its new name, then the old record is removed.
  /// A stop between the two (`kill -9`) left both, and the old name stayed pinned (kept 0/0)
  /// beside the new: the new record names the old one's bytes, and a load removes that record,
  /// never one of the old name written since (pinned again) or one a later save no longer names.
  @Test func aRecordLeftBehindByARenameIsRemovedAtLoad() throws {
    let staging = try folder()
    defer { try? FileManager.default.removeItem(at: staging) }
    let store = PinStore(stagingFolder: staging)
    let m = StorageMetadata(dictionary: ["name": "p/a", "size": "1", "generation": "3"])
    var moved = m
    moved.path = "q/a"
    let old = Pin(target: "p/", phase: .kept, tree: ["p/a": m])
    let new = Pin(target: "q/", phase: .kept, tree: ["q/a": moved])
    try store.save(old)
    // The cut: the new record written, the old one not yet removed.
    try store.save(new, following: "p/")
    let (pins, damaged, superseded) = store.load()
    #expect(pins.map(\.target) == ["q/"] && damaged.isEmpty && superseded == ["p/"])
    #expect(store.load().pins.map(\.target) == ["q/"], "removed for good")

    // The old name pinned again after the rename: its record has other bytes and stays.
    try store.save(old)
    try store.save(new, following: "p/")
    try store.save(Pin(target: "p/", phase: .staging(Pin.Progress()), tree: [:]))
    #expect(store.load().pins.map(\.target).sorted() == ["p/", "q/"])
    // A later save of the followed pin names nothing.
    try store.save(old)
    try store.save(new)
    #expect(store.load().pins.map(\.target).sorted() == ["p/", "q/"])
  }

  @Test func holdsAndOverlapsFollowNamesNotSpellings() {
    let nfcPin = Pin(target: "caf\u{e9}/", phase: .kept, tree: [:])
    #expect(nfcPin.holds("caf\u{e9}/x") && !nfcPin.holds("cafe\u{301}/x"))
    let folder = Pin(target: "a/", phase: .kept, tree: [:])
    #expect(folder.holds("a/x") && folder.holds("a/b/c") && !folder.holds("ab/x") && !folder.holds("a"))
    #expect(folder.overlaps("") && folder.overlaps("a/b/") && folder.overlaps("a/x"))
    let file = Pin(target: "a/x", phase: .kept, tree: [:])
    #expect(file.holds("a/x") && !file.holds("a/x2") && file.overlaps("a/") && !file.overlaps("b/"))
    let bucket = Pin(target: "", phase: .kept, tree: [:])
    #expect(bucket.holds("anything") && bucket.overlaps("z/"))
  }
}

/// Issue 55: a pin's status line carries any name: its fields come back exactly as they went.
@Suite struct PinStatusLineTests {
  @Test func everyFieldComesBackAsItWent() {
    var fields = ["tab\there", "new\nline", "back\\slash", "\\t is no tab", "ends\\", "cr\r", "bell\u{7}del\u{7f}", "caf\u{e9}", "cafe\u{301}", "%41", ""]
    // Every byte below 0x80, and a few beyond, in one field.
    fields.append(String(decoding: (1..<0x80).map { UInt8($0) }, as: UTF8.self) + "\u{85}\u{2028}")
    let text = PinStatusLine.line(fields) + PinStatusLine.line(["failed", "x"])
    let lines = PinStatusLine.lines(text)
    #expect(lines.count == 2)
    #expect(lines.first.map { $0.map { Array($0.utf8) } } == fields.map { Array($0.utf8) })
    #expect(!PinStatusLine.line(fields).dropLast().contains("\n"))
    #expect(PinStatusLine.line(fields).filter { $0 == "\t" }.count == fields.count - 1)
  }
}
