import Foundation
import StorageCore
import Testing

/// Issue 55, 1: the emulator keeps NFC "café" and NFD "café" as two objects, gives each its own
/// bytes and metadata, and lists both in byte order, over both APIs; a page's metadata is each
/// item's own (`ListPage.itemMetadata`).
@Suite struct NameTwinListTests {
  @Test(arguments: ["firebase", "gcs"]) func twoSpellingsAreTwoObjectsListedInByteOrder(api: String) async throws {
    try await EmulatorFixture.scope { fx in
      if api == "gcs" { fx.storage.api = .gcs }
      let root = fx.storage.reference()
      let nfc = "tw/caf\u{e9}"
      let nfd = "tw/cafe\u{301}"
      _ = try await root.object(named: nfc).putDataAsync(Data("nfc".utf8))
      _ = try await root.object(named: nfd).putDataAsync(Data("the nfd one".utf8))
      _ = try await root.object(named: "tw/d-caf\u{e9}/x").putDataAsync(Data("1".utf8))
      _ = try await root.object(named: "tw/d-cafe\u{301}/x").putDataAsync(Data("22".utf8))
      #expect(try await root.object(named: nfc).data(maxSize: 100) == Data("nfc".utf8))
      #expect(try await root.object(named: nfd).data(maxSize: 100) == Data("the nfd one".utf8))
      #expect(try await root.object(named: nfd).getMetadata().size == 11)
      let page = try await root.object(named: "tw").listPage(delimiter: "/")
      // NFD's "e" (65) sorts before NFC's c3.
      #expect(page.items.map { Array($0.utf8) } == [Array(nfd.utf8), Array(nfc.utf8)], "\(page.items)")
      #expect(page.prefixes.map { Array($0.utf8) } == ["tw/d-cafe\u{301}/", "tw/d-caf\u{e9}/"].map { Array($0.utf8) }, "\(page.prefixes)")
      if api == "gcs" {
        #expect(page.itemMetadata.map { $0?.size } == [11, 3])
        #expect(page.metadataByName[ObjectName(nfc)]?.size == 3 && page.metadataByName[ObjectName(nfd)]?.size == 11)
      }
      let all = try await root.object(named: "tw").listPage(delimiter: nil)
      #expect(all.items.count == 4 && Set(all.items.map { ObjectName($0) }).count == 4, "\(all.items)")
    }
  }
}
