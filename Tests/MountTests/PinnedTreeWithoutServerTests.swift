import Foundation
import StorageCore
import StorageEmulator
import TestSupport
import Testing

/// Issue 55 (adversary 55c, F2 and F3): with the server away, a pin answers for the folder it
/// holds whole and for nothing else. `mixed/` holds many objects, a pinned folder `mixed/sub`
/// and a pinned file `mixed/f0001`; `top/` is beside it at the root. On a fresh mount (nothing
/// listed yet) with the server killed or frozen:
///   - `mixed` and the root are not held by any pin (the pins' view of them is a part of each):
///     `ls` fails with EIO. Before, `ls mixed` listed only `f0001 sub` and `ls` of the root only
///     `mixed`, exit 0 (a pin under a folder was taken as holding it);
///   - `mixed/sub` is held whole: `ls` lists it, and `mixed` and `mixed/sub` are found as
///     folders on the way. Before, with the server frozen, the lookups' deadlines answered EIO
///     (they knew only the folders' last listings, and these had none) while a killed server's
///     were answered from the pins.
@Suite(.serialized) struct PinnedTreeWithoutServerTests {
  static let count = 40

  /// `ls -1A` of `folder` in the mount: its status and the lines it printed (errors too).
  static func ls(_ m: MountedBucket, _ folder: String) -> (Int32, [String]) {
    let (status, output) = runTool("/bin/ls", ["-1A", m.path(folder)], timeout: .seconds(60))
    return (status, output.split(separator: "\n").map(String.init))
  }

  /// `mixed/` of `count` objects with `mixed/sub/{a,b}` and `top/x`; `mixed/sub` and
  /// `mixed/f0001` pinned, then a fresh mount (the pins as recorded, no folder listed) whose
  /// server is then killed or frozen.
  static func freshMountWithoutServer(_ fx: MountFixture, api: String, server: String) async throws -> MountedBucket {
    try await fx.putAll((0..<count).map { String(format: "mixed/f%04d", $0) } + ["mixed/sub/a", "mixed/sub/b", "top/x"])
    let options = ["metadata_ttl=0", "read_timeout=1"]
    let first = try fx.mount(options: options, extra: ["--api", api], name: "pin-\(api)")
    let (pinned, said) = runTool(bucketfsBinary, ["pin", first.path("mixed/sub"), first.path("mixed/f0001")], timeout: .seconds(120))
    #expect(pinned == 0, "\(said)")
    first.unmount()
    let m = try fx.mount(options: options, extra: ["--api", api], name: "fresh-\(api)-\(server)")
    if server == "killed" {
      fx.stopEmulator()
    } else {
      var frozen = Faults()
      frozen.hold = true
      fx.emulator!.setFaults(frozen)
    }
    return m
  }

  /// F2: the folder of a pinned file and the ancestors of a pinned folder are not held by the
  /// pins: EIO, never the pinned names as the whole folder.
  @Test(arguments: ["firebase", "gcs"], ["killed", "frozen"])
  func aFolderHoldingAPinIsNotListedFromThePins(api: String, server: String) async throws {
    try await MountFixture.scope { fx in
      let m = try await Self.freshMountWithoutServer(fx, api: api, server: server)
      defer { fx.emulator?.setFaults(Faults()) }
      for folder in ["mixed", ""] {
        let (status, lines) = Self.ls(m, folder)
        #expect(
          status != 0 && lines.count == 1 && lines[0].contains("Input/output error"),
          "\(api), \(server): ls '\(folder)' (never listed, holds more than the pins): \(status) \(lines.prefix(5))")
      }
      var st = stat()
      // A name the pins do not know in a folder they do not hold: the mount cannot say (EIO).
      #expect(stat(m.path("mixed/f0002"), &st) != 0 && errno == EIO, "\(api), \(server): mixed/f0002 errno \(errno)")
      #expect(m.log.contains("never listed and not pinned"), "\(m.log.suffix(1500))")
    }
  }

  /// F3: a pinned folder reads whole with the server frozen as with it killed, and the folders
  /// on the way to it are found.
  @Test(arguments: ["firebase", "gcs"], ["killed", "frozen"])
  func aPinnedFolderIsWholeWithTheServerFrozenAsKilled(api: String, server: String) async throws {
    try await MountFixture.scope { fx in
      let m = try await Self.freshMountWithoutServer(fx, api: api, server: server)
      defer { fx.emulator?.setFaults(Faults()) }
      var st = stat()
      for folder in ["mixed", "mixed/sub"] {
        let found = stat(m.path(folder), &st)
        let e = errno
        #expect(found == 0 && st.st_mode & S_IFMT == S_IFDIR, "\(api), \(server): stat \(folder): errno \(e)")
      }
      let (status, lines) = Self.ls(m, "mixed/sub")
      #expect(status == 0 && lines == ["a", "b"], "\(api), \(server): ls mixed/sub (pinned): \(status) \(lines)")
      let found = stat(m.path("mixed/f0001"), &st)
      #expect(found == 0 && st.st_size == Int("mixed/f0001".utf8.count), "\(api), \(server): stat mixed/f0001 (pinned): errno \(errno)")
    }
  }
}
