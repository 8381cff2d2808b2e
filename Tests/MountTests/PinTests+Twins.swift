import BucketFS
import Foundation
import StorageCore
import TestSupport
import Testing

/// Pins of names that differ only in their bytes: two pins, never one.
extension PinTests {
  /// The mount's pins (`user.bucketfs.pins`), each line's fields read back exactly
  /// (`PinStatusLine`), keyed by the bytes of the path the mount shows.
  fileprivate func pinLines(_ m: MountedBucket) -> [ObjectName: [String]] {
    guard case .success(let text) = getxattr(m.mountpoint.path, "user.bucketfs.pins", size: 1 << 20) else { return [:] }
    var out: [ObjectName: [String]] = [:]
    for line in PinStatusLine.lines(text) where line.count >= 9 && line[0] != "failed" { out[ObjectName(line[0])] = line }
    return out
  }

  /// Folders `café` spelled NFC (63 61 66 c3 a9) and NFD (63 61 66 65 cc 81) are two folders,
  /// so two pins: pinning both kept one (the pins were keyed by `String`, which takes the two
  /// spellings for one), offline only one twin was there, and unpinning the NFD one removed the
  /// NFC pin.
  @Test(arguments: ["firebase", "gcs"]) func unicodeTwinFoldersAreTwoPins(api: String) async throws {
    try await MountFixture.scope { fx in
      let nfc = "caf\u{e9}"
      let nfd = "cafe\u{301}"
      _ = try await fx.put("\(nfc)/f", Data("nfc".utf8))
      _ = try await fx.put("\(nfd)/f", Data("nfd".utf8))
      let m = try fx.mount(extra: ["--api", api], name: api)
      for name in [nfc, nfd] {
        let (status, output) = runTool(bucketfsBinary, ["pin", m.path(name)], timeout: .seconds(240))
        #expect(status == 0, "\(name.debugDescription): \(output)")
      }
      let both = pinLines(m)
      #expect(Set(both.keys) == [ObjectName(nfc), ObjectName(nfd)], "\(both.keys.map(\.string.debugDescription))")
      for name in [nfc, nfd] {
        let line = both[ObjectName(name)]
        #expect(line?[1] == "kept" && line?[2] == "1" && line?[3] == "1", "\(name.debugDescription): \(String(describing: line))")
        #expect(getxattr(m.path(name + "/f"), "user.staged") == .success("pinned"), "\(name.debugDescription)")
      }
      #expect(m.stat("pinned") == "2 pins, 2 files, 6 bytes kept", "\(String(describing: m.stat("pinned")))")
      let (listed, table) = runTool(bucketfsBinary, ["status", m.mountpoint.path])
      #expect(listed == 0 && table.split(separator: "\n").count == 3, "\(table)")

      // Unpinning one twin leaves the other pinned.
      let (unpinned, output) = runTool(bucketfsBinary, ["unpin", m.path(nfd)])
      #expect(unpinned == 0, "\(output)")
      #expect(Set(pinLines(m).keys) == [ObjectName(nfc)], "\(pinLines(m).keys.map(\.string.debugDescription))")
      #expect(getxattr(m.path(nfc + "/f"), "user.staged") == .success("pinned"))
      #expect(getxattr(m.path(nfd + "/f"), "user.staged") == .success("complete"))
      let (again, againOutput) = runTool(bucketfsBinary, ["pin", m.path(nfd)], timeout: .seconds(240))
      #expect(again == 0, "\(againOutput)")
      m.unmount()
      fx.stopEmulator()

      // Both recorded: both whole offline.
      let offline = try fx.mount(options: ["offline"], extra: ["--api", api], name: "\(api)-offline")
      #expect(Set(pinLines(offline).keys) == [ObjectName(nfc), ObjectName(nfd)], "\(pinLines(offline).keys.map(\.string.debugDescription))")
      #expect(try readFile(offline.path(nfc + "/f")).get() == Data("nfc".utf8))
      #expect(try readFile(offline.path(nfd + "/f")).get() == Data("nfd".utf8))
      let shown = try FileManager.default.contentsOfDirectory(atPath: offline.mountpoint.path).map { ObjectName($0) }
      #expect(Set(shown) == [ObjectName(nfc), ObjectName(nfd)], "\(shown.map(\.string.debugDescription))")
    }
  }
}
