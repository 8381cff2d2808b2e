import Foundation
import StorageCore
import StorageEmulator
import Synchronization
import TestSupport
import Testing

/// A large folder is shown as its pages arrive: the first entries reach a program while the
/// server still holds the later pages, and the whole listing, once in, is every name exactly
/// once, with a file and a folder of the same name on either side of a page boundary named as
/// a listing fetched whole names them.
@Suite(.serialized) struct StreamedListingTests {
  /// 2,500 files and folders (three pages of 1,000). Page one ends with the object `g`, whose
  /// twin folder `g/` opens page two, and `g.object` (the alias `g` would take) is a real name.
  static func names() -> [String] {
    (0..<998).map { String(format: "big/f%04d", $0) } + ["big/g", "big/g.object", "big/g/inner.txt"]
      + (0..<1499).map { String(format: "big/h%04d", $0) }
  }

  /// What the folder shows: `g` the folder, the object `g` under the first free alias.
  static func shown() -> Set<String> {
    Set((0..<998).map { String(format: "f%04d", $0) } + ["g", "g.object", "g.object.1"] + (0..<1499).map { String(format: "h%04d", $0) })
  }

  static func seed(_ fx: MountFixture) async throws { try await fx.putAll(Self.names()) }

  /// Every name of a folder by readdir(3), on a thread of its own (it blocks while the mount
  /// waits for pages); `first` is set once the first entry past "." and ".." came back.
  final class FolderReader: @unchecked Sendable {
    let first = Atomic<Bool>(false)
    let done = Atomic<Bool>(false)
    private let names = Mutex<[String]>([])
    private let failure = Mutex<Int32>(0)

    init(_ path: String) {
      let thread = Thread { [self] in
        guard let dir = opendir(path) else {
          failure.withLock { $0 = errno }
          done.store(true, ordering: .releasing)
          return
        }
        while true {
          errno = 0
          guard let entry = readdir(dir) else {
            let e = errno
            failure.withLock { $0 = e }
            break
          }
          let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
          if name == "." || name == ".." { continue }
          names.withLock { $0.append(name) }
          first.store(true, ordering: .releasing)
        }
        closedir(dir)
        done.store(true, ordering: .releasing)
      }
      thread.start()
    }

    var read: [String] { names.withLock { $0 } }
    var error: Int32 { failure.withLock { $0 } }
  }

  @Test func theFirstEntriesArriveBeforeTheLastPage() async throws {
    try await MountFixture.scope { fx in
      try await Self.seed(fx)
      let m = try fx.mount(extra: ["--api", "gcs"], name: "streamed")
      // Pages after the first are held unanswered until the faults change.
      var held = Faults()
      held.pathFilter = "pageToken="
      held.hold = true
      fx.emulator!.setFaults(held)
      let reader = FolderReader(m.path("big"))
      let arrived = await eventually(timeout: .seconds(30)) { reader.first.load(ordering: .acquiring) }
      let whileHeld = reader.read.count
      let endedWhileHeld = reader.done.load(ordering: .acquiring)
      fx.emulator!.setFaults(Faults())
      #expect(arrived, "no entry reached readdir while the second page was held")
      #expect(!endedWhileHeld, "the listing ended while a page was held")
      #expect(whileHeld > 0 && whileHeld < 2500, "\(whileHeld) entries while the second page was held")
      #expect(await eventually { reader.done.load(ordering: .acquiring) })
      #expect(reader.error == 0)
      let all = reader.read
      #expect(all.count == Set(all).count, "a name came twice")
      #expect(Set(all) == Self.shown(), "\(Set(all).symmetricDifference(Self.shown()).sorted().prefix(10))")
      // The object behind the folder reads under its alias, the real `g.object` under its name.
      #expect(try readFile(m.path("big/g.object.1")).get() == Data("big/g".utf8))
      #expect(try readFile(m.path("big/g.object")).get() == Data("big/g.object".utf8))
      #expect(try readFile(m.path("big/g/inner.txt")).get() == Data("big/g/inner.txt".utf8))
      // Kept as it arrived: a second listing is the same names, from the mount's memory.
      let again = try FileManager.default.contentsOfDirectory(atPath: m.path("big"))
      #expect(Set(again) == Self.shown() && again.count == 2500)
    }
  }

  @Test func aListingThatBreaksOffAfterItsFirstPageIsAnErrorNotAnEnd() async throws {
    try await MountFixture.scope { fx in
      try await Self.seed(fx)
      let m = try fx.mount(options: ["read_timeout=1"], extra: ["--api", "gcs"], name: "broken")
      var failing = Faults()
      failing.pathFilter = "pageToken="
      failing.errorStatus = 500
      failing.errorFraction = 1
      fx.emulator!.setFaults(failing)
      let reader = FolderReader(m.path("big"))
      #expect(await eventually { reader.done.load(ordering: .acquiring) })
      // Part of the folder was shown; the rest is an error, never a short folder that looks whole.
      #expect(reader.error == EIO, "readdir ended with errno \(reader.error) after \(reader.read.count) entries")
      #expect(reader.read.count < 2500)
      fx.emulator!.setFaults(Faults())
      let again = try FileManager.default.contentsOfDirectory(atPath: m.path("big"))
      #expect(Set(again) == Self.shown())
    }
  }

  /// A v0 listing promises no order (every page carries all the prefixes): its files are named
  /// at the end, and the folder is the same.
  @Test func aV0ListingShowsTheSameNames() async throws {
    try await MountFixture.scope { fx in
      try await Self.seed(fx)
      let m = try fx.mount(name: "v0")
      let listed = try FileManager.default.contentsOfDirectory(atPath: m.path("big"))
      #expect(listed.count == 2500 && Set(listed) == Self.shown(), "\(Set(listed).symmetricDifference(Self.shown()).sorted().prefix(10))")
    }
  }
}
