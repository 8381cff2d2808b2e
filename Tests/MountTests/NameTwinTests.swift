import Foundation
import ChildProcess
import StorageCore
import TestSupport
import Testing

/// Issue 55, 1: names are bytes. NFC "café" (c3 a9) and NFD "café" (65 cc 81) are two objects,
/// which Swift's `String` takes for one: each shows under its own bytes and reads its own bytes,
/// online, offline and in a pin, on both APIs.
@Suite(.serialized) struct NameTwinTests {
  static let nfc = "caf\u{e9}"
  static let nfd = "cafe\u{301}"

  /// Each object, by name, and its bytes (every one of a different length, so a size shows
  /// which object answered).
  static let objects: [(String, Data)] = [
    ("tw/\(nfc)", Data("the NFC object".utf8)),
    ("tw/\(nfd)", Data("the NFD object, longer".utf8)),
    ("tw/d-\(nfc)/in", Data("inside the NFC folder".utf8)),
    ("tw/d-\(nfd)/in", Data("inside the NFD folder, longer".utf8)),
  ]

  /// What folder `tw` shows, as bytes.
  static let shown: Set<[UInt8]> = Set([nfc, nfd, "d-\(nfc)", "d-\(nfd)"].map { Array($0.utf8) })

  static func seed(_ fx: MountFixture) async throws {
    for (name, data) in objects { _ = try await fx.put(name, data) }
  }

  /// Checks every twin reads its own bytes and has its own size, and the folder shows all four.
  static func checkTwins(_ m: MountedBucket, _ label: String) throws {
    let listed = try #require(namesAsBytes(m.path("tw")), "\(label): tw cannot be read")
    #expect(Set(listed) == shown && listed.count == 4, "\(label): \(listed.map { String(decoding: $0, as: UTF8.self).debugDescription })")
    for (name, data) in objects {
      let path = m.path(name)
      #expect(readFile(path) == .success(data), "\(label): \(name.unicodeScalars.map { String($0.value, radix: 16) })")
      var st = stat()
      #expect(stat(path, &st) == 0 && st.st_size == data.count, "\(label): size of \(name.debugDescription)")
    }
    // Two files, two inodes.
    var a = stat()
    var b = stat()
    #expect(stat(m.path("tw/\(nfc)"), &a) == 0 && stat(m.path("tw/\(nfd)"), &b) == 0 && a.st_ino != b.st_ino, "\(label)")
  }

  /// Looked up by name before any listing (the NFD name first), then listed, on both APIs.
  @Test(arguments: ["firebase", "gcs"]) func eachSpellingReadsItsOwnObject(api: String) async throws {
    try await MountFixture.scope { fx in
      try await Self.seed(fx)
      let m = try fx.mount(extra: ["--api", api], name: "twins-\(api)")
      for (name, data) in Self.objects.reversed() { #expect(readFile(m.path(name)) == .success(data), "\(api): \(name.debugDescription)") }
      try Self.checkTwins(m, "\(api), looked up first")
      let again = try fx.mount(extra: ["--api", api], name: "listed-\(api)")
      _ = namesAsBytes(again.path("tw"))
      try Self.checkTwins(again, "\(api), listed first")
    }
  }

  /// A pin of the folder counts four files, keeps four copies, and an offline mount shows and
  /// reads the four.
  @Test(arguments: ["firebase", "gcs"]) func aPinKeepsBothSpellingsOffline(api: String) async throws {
    try await MountFixture.scope { fx in
      try await Self.seed(fx)
      let m = try fx.mount(extra: ["--api", api], name: "pin-\(api)")
      let (status, output) = runTool(bucketfsBinary, ["pin", m.path("tw")], timeout: .seconds(120))
      #expect(status == 0, "\(output)")
      let line = try getxattr(m.mountpoint.path, "user.bucketfs.pins", size: 1 << 16).get()
      let fields = line.split(separator: "\n").first?.split(separator: "\t", omittingEmptySubsequences: false).map(String.init) ?? []
      #expect(fields.count >= 4 && fields[1] == "kept" && fields[2] == "4" && fields[3] == "4", "\(line.debugDescription)")
      // The server gone, the mount that pinned it shows the pinned folder, never listed, from
      // the pin's tree (issue 55, 2).
      fx.stopEmulator()
      try Self.checkTwins(m, "\(api), server gone")
      #expect(m.log.contains("listing tw: ") && m.log.contains("answered from the pinned tree"), "\(api): \(m.log.suffix(1500))")
      m.unmount()
      let offline = try fx.mount(options: ["offline"], extra: ["--api", api], name: "offline-\(api)")
      try Self.checkTwins(offline, "\(api), offline")
    }
  }

  /// Names with each byte a hostile name may hold, each beside its twin: a tab, %, #, ?, a
  /// backslash, a control character; 255-byte segments (the NFD twin of one is 256 bytes, left
  /// out). Each reads its own bytes.
  @Test func oddNamesBesideTheirTwins() async throws {
    try await MountFixture.scope { fx in
      var names: [String] = []
      for prefix in ["t\tab-", "p%41-", "h#q?-", "b\\s-", "c\u{1}-", String(repeating: "y", count: 249)] {
        names += [prefix + Self.nfc, prefix + Self.nfd]
      }
      let long = String(repeating: "x", count: 250)
      names.append(long + Self.nfc)  // 255 bytes
      for name in names + [long + Self.nfd] { _ = try await fx.put("odd/\(name)", Data(name.utf8)) }
      for api in ["firebase", "gcs"] {
        let m = try fx.mount(extra: ["--api", api], name: "odd-\(api)")
        let listed = try #require(namesAsBytes(m.path("odd")))
        #expect(Set(listed) == Set(names.map { Array($0.utf8) }) && listed.count == names.count, "\(api): \(listed.count)")
        for name in names { #expect(readFile(m.path("odd/\(name)")) == .success(Data(name.utf8)), "\(api): \(name.debugDescription)") }
        #expect(m.log.contains("leaving out"), "\(api): the 256-byte name is not said")
        m.unmount()
      }
    }
  }

  /// A file and a folder whose names are twins are a file and a folder, side by side: no alias
  /// (`café.object`) for a folder of "the same" name.
  @Test(arguments: ["firebase", "gcs"]) func aFileBesideItsTwinFolderKeepsItsName(api: String) async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("al/\(Self.nfc)", Data("file".utf8))
      _ = try await fx.put("al/\(Self.nfd)/x", Data("under the folder".utf8))
      let m = try fx.mount(extra: ["--api", api], name: "alias-\(api)")
      let listed = try #require(namesAsBytes(m.path("al")))
      #expect(Set(listed) == Set([Self.nfc, Self.nfd].map { Array($0.utf8) }) && listed.count == 2, "\(api): \(listed)")
      #expect(readFile(m.path("al/\(Self.nfc)")) == .success(Data("file".utf8)))
      #expect(readFile(m.path("al/\(Self.nfd)/x")) == .success(Data("under the folder".utf8)))
    }
  }

  /// Through a writable mount, a change of one spelling reaches that object only: an append to
  /// the NFD file, a delete of the NFC one. (A second spelling made anew answers EILSEQ.)
  /// The kernel's misses are bytes too: with both spellings looked up and missing, a refresh
  /// tells the kernel to forget both, and an object made elsewhere under the first shows at
  /// once. The names the kernel was told missing were kept by `String`, where the second
  /// spelling took the first's slot: the refresh forgot only it, and the first stayed missing
  /// for `negative_ttl`.
  @Test(arguments: ["firebase", "gcs"]) func aRefreshForgetsBothSpellingsTheKernelWasToldMissing(api: String) async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("km/other", Data("o".utf8))
      let m = try fx.mount(options: ["metadata_ttl=600", "negative_ttl=600"], extra: ["--api", api], name: "misses-\(api)")
      var st = stat()
      for name in [Self.nfc, Self.nfd] { #expect(stat(m.path("km/\(name)"), &st) == -1 && errno == ENOENT) }
      _ = try await fx.put("km/\(Self.nfc)", Data("made elsewhere".utf8))
      let (status, output) = runTool(bucketfsBinary, ["refresh", m.mountpoint.path, m.path("km")])
      #expect(status == 0, "\(output)")
      #expect(readFile(m.path("km/\(Self.nfc)")) == .success(Data("made elsewhere".utf8)), "\(api)")
      #expect(stat(m.path("km/\(Self.nfd)"), &st) == -1 && errno == ENOENT)
    }
  }

  @Test(arguments: ["firebase", "gcs"]) func aChangeOfOneSpellingLeavesTheOther(api: String) async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("wt/\(Self.nfc)", Data("nfc".utf8))
      _ = try await fx.put("wt/\(Self.nfd)", Data("nfd".utf8))
      _ = try await fx.put("wt/d-\(Self.nfc)/x", Data("x".utf8))
      let m = try fx.mount(options: ["writable"], extra: ["--api", api], name: "write-\(api)")
      let fd = open(m.path("wt/\(Self.nfd)"), O_WRONLY | O_APPEND)
      #expect(fd >= 0)
      #expect(write(fd, "+more", 5) == 5)
      #expect(close(fd) == 0)
      #expect(unlink(m.path("wt/\(Self.nfc)")) == 0)
      #expect(mkdir(m.path("wt/d-\(Self.nfd)"), 0o755) == -1 && errno == EILSEQ)
      let listed = try #require(namesAsBytes(m.path("wt")))
      #expect(Set(listed) == Set([Self.nfd, "d-\(Self.nfc)"].map { Array($0.utf8) }), "\(api): before sync \(listed)")
      let (status, output) = m.sync()
      #expect(status == 0, "\(output)")
      #expect(await fx.object("wt/\(Self.nfd)") == Data("nfd+more".utf8))
      #expect(await fx.object("wt/\(Self.nfc)") == nil)
      let after = try #require(namesAsBytes(m.path("wt")))
      #expect(Set(after) == Set([Self.nfd, "d-\(Self.nfc)"].map { Array($0.utf8) }), "\(api): after sync \(after)")
      #expect(readFile(m.path("wt/\(Self.nfd)")) == .success(Data("nfd+more".utf8)))
    }
  }
}

/// The names in folder `path` as readdir(3) gives them, bytes exactly ("." and ".." left out);
/// nil when the folder cannot be opened or read.
func namesAsBytes(_ path: String) -> [[UInt8]]? {
  guard let dir = opendir(path) else { return nil }
  defer { closedir(dir) }
  var out: [[UInt8]] = []
  while true {
    errno = 0
    guard let entry = readdir(dir) else { return errno == 0 ? out : nil }
    let name = withUnsafeBytes(of: entry.pointee.d_name) { Array($0.prefix { $0 != 0 }) }
    if name == [0x2E] || name == [0x2E, 0x2E] { continue }
    out.append(name)
  }
}
