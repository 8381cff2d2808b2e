@testable import BucketFS
import Foundation
import TestSupport
import StorageCore
import Testing

@Suite struct FilesystemLogicTests {
  func makeFS(_ client: MemoryObjectClient, prefix: String = "") -> BucketFilesystem {
    var options = MountOptions()
    options.cacheSize = 4 << 20
    return BucketFilesystem(client: client, prefix: prefix, options: options, staging: nil, log: { _ in })
  }

  @Test func listingFoldersFilesAndShadowing() async throws {
    let client = MemoryObjectClient()
    for name in ["a", "a/b", "dir/x.txt", "dir/", "top.txt", "bad//x"] { client.put(name, Data(name.utf8)) }
    let fs = makeFS(client)
    let entries = try await fs.listing("")
    #expect(entries.map(\.name) == ["a", "bad", "dir", "a.object", "top.txt"])
    #expect(entries.first { $0.name == "a.object" }?.objectName == "a")
    #expect(try await fs.listing("dir").map(\.name) == ["x.txt"])
    #expect(try await fs.listing("bad").isEmpty)
  }

  @Test func lookupReadAndChangedObject() async throws {
    let client = MemoryObjectClient()
    let data = Data((0..<3_000_000).map { UInt8($0 % 251) })
    client.put("f.bin", data)
    let fs = makeFS(client)
    let attrs = try await fs.lookup(parent: InodeTable.rootIno, name: "f.bin")
    #expect(attrs.size == 3_000_000 && !attrs.isDirectory)
    let (handle, _) = try await fs.open(attrs.ino, flags: O_RDONLY)
    #expect(try await fs.read(handle: handle, offset: 1000, count: 5000).data() == data.subdata(in: 1000..<6000))
    #expect(try await fs.read(handle: handle, offset: 2_999_990, count: 100).data() == data.subdata(in: 2_999_990..<3_000_000))
    client.put("f.bin", Data("new".utf8))
    // The pinned generation is gone: pages not yet cached (past the first MiB the open
    // fetched, and what the cache read ahead of it) fail with ESTALE.
    let error = await #expect(throws: FSError.self) { try await fs.read(handle: handle, offset: 2_400_000, count: 10) }
    #expect(error?.errno == ESTALE)
    fs.release(handle: handle)
    await #expect(throws: FSError(EROFS)) { try await fs.open(attrs.ino, flags: O_WRONLY) }
    await #expect(throws: FSError(ENOENT)) { try await fs.lookup(parent: InodeTable.rootIno, name: "missing") }
  }

  /// A read whose fetch stalls is answered at read_timeout (the held read can end no other
  /// way), and the fetch goes on behind it: once it arrives, the bytes are read from the cache.
  @Test(.timeLimit(.minutes(1))) func aStalledReadEndsAtItsDeadlineAndItsFetchGoesOn() async throws {
    let client = MemoryObjectClient()
    let data = Data((0..<3_000_000).map { UInt8($0 % 253) })
    client.put("slow.bin", data)
    var options = MountOptions()
    options.cacheSize = 4 << 20
    options.readTimeout = 0.2
    let fs = BucketFilesystem(client: client, prefix: "", options: options, staging: nil, log: { _ in })
    let attrs = try await fs.lookup(parent: InodeTable.rootIno, name: "slow.bin")
    let (handle, _) = try await fs.open(attrs.ino, flags: O_RDONLY)
    // Past the first MiB, which the open fetched, and the MiB the cache reads ahead of it,
    // which lands first.
    let at = 2_400_000
    #expect(await eventually { fs.cache.cached(BlockCache.Key(name: "slow.bin", generation: 1, page: 15)) != nil })
    client.holdReads()
    await #expect(throws: FSError(EIO)) { try await fs.read(handle: handle, offset: Int64(at), count: 4096) }
    // Within a second of that, readers of the object through handles open then fail at once.
    await #expect(throws: FSError(EIO)) { try await fs.read(handle: handle, offset: Int64(at + 8192), count: 4096) }
    let fetches = client.reads.load(ordering: .relaxed)
    #expect(fetches >= 1)
    client.letReadsGo()
    // The held fetch lands in the cache, asked of the server once; a read (which reads ahead
    // of itself) is then answered from there.
    let held = BlockCache.Key(name: "slow.bin", generation: 1, page: Int64(at) / BlockCache.pageSize)
    #expect(await eventually { fs.cache.cached(held) != nil })
    #expect(client.reads.load(ordering: .relaxed) == fetches)
    #expect(fs.readIfCached(handle: handle, offset: Int64(at), count: 4096)?.data() == data.subdata(in: at..<(at + 4096)))
    fs.release(handle: handle)
  }

  /// Read-ahead across files is decided at each open: files opened out of order fetch only
  /// themselves; two opens in listing order fetch the next files before they are opened; every
  /// file is fetched once in all.
  @Test(.timeLimit(.minutes(1))) func readAheadFollowsListingOrderAndFetchesEachFileOnce() async throws {
    let client = MemoryObjectClient()
    let files = (0..<30).map { i in randomData(3000 + i, seed: UInt64(15_000 + i)) }
    func name(_ i: Int) -> String { "f\(String(format: "%03d", i)).txt" }
    for (i, data) in files.enumerated() { client.put("seq/" + name(i), data) }
    let fs = makeFS(client)
    let folder = try await fs.lookup(parent: InodeTable.rootIno, name: "seq")
    #expect(try await fs.listing("seq").count == 30)
    var inos: [UInt64] = []
    for i in 0..<30 { inos.append(try await fs.lookup(parent: folder.ino, name: name(i)).ino) }
    func readWhole(_ i: Int) async throws -> Data? {
      let (handle, _) = try await fs.open(inos[i], flags: O_RDONLY)
      defer { fs.release(handle: handle) }
      return try await fs.read(handle: handle, offset: 0, count: 1 << 20).data()
    }
    let outOfOrder = [17, 3, 25, 9, 12, 0, 28, 21, 6, 14]
    for i in outOfOrder { #expect(try await readWhole(i) == files[i]) }
    #expect(client.reads.load(ordering: .relaxed) == outOfOrder.count)
    for i in [1, 2] { #expect(try await readWhole(i) == files[i]) }
    // 3 was read already; 4 and 5 come without being opened.
    #expect(await eventually { client.reads.load(ordering: .relaxed) == outOfOrder.count + 4 })
    for i in 3..<30 { #expect(try await readWhole(i) == files[i]) }
    #expect(client.reads.load(ordering: .relaxed) == 30)
  }

  @Test func prefixMountMapsNames() async throws {
    let client = MemoryObjectClient()
    client.put("p/q/file.txt", Data("x".utf8))
    client.put("other.txt", Data("y".utf8))
    let fs = makeFS(client, prefix: "p")
    #expect(try await fs.listing("").map(\.name) == ["q"])
    let q = try await fs.lookup(parent: InodeTable.rootIno, name: "q")
    #expect(q.isDirectory)
    let f = try await fs.lookup(parent: q.ino, name: "file.txt")
    let xattrs = try await fs.xattrs(f.ino)
    #expect(xattrs.contains { $0 == ("user.gs_url", "gs://mem/p/q/file.txt") })
  }
}

@Suite struct CacheTests {
  @Test func ttlCacheExpiresAndBounds() {
    let now = ManualClock()
    let cache = TTLCache<String, Int>(ttl: 5, capacity: 100, clock: { now.value })
    cache.set("a", 1)
    #expect(cache.get("a") == 1)
    now.value += 6
    #expect(cache.get("a") == nil)
    for i in 0..<150 { cache.set("k\(i)", i) }
    #expect(cache.count <= 100)
    #expect(cache.get("k149") == 149)
  }

  /// NFC and NFD "café" are one `String` key and two objects: the caches of names keep both,
  /// each answering for its own bytes (keyed by `String` the second took the first's slot).
  @Test func anotherSpellingOfANameIsAnotherKey() {
    let nfc = "caf\u{e9}"
    let nfd = "cafe\u{301}"
    let missing = MissingNames(ttl: 5, capacity: 100)
    missing.add(nfc)
    #expect(missing.contains(nfc) && !missing.contains(nfd))
    missing.add(nfd)
    missing.remove(nfd)
    #expect(missing.contains(nfc) && !missing.contains(nfd))

    let attributes = AttributeCache(ttl: 5, capacity: 100, listings: FolderListings(ttl: 5, capacity: 100))
    let m1 = StorageMetadata()
    m1.generation = 1
    let m2 = StorageMetadata()
    m2.generation = 2
    attributes.set(nfc, m1)
    #expect(attributes.get(nfd) == nil)
    #expect(attributes.otherSpelling(of: nfd).map { Array($0.utf8) } == Array(nfc.utf8))
    attributes.set(nfd, m2)
    #expect(attributes.get(nfc)?.generation == 1 && attributes.get(nfd)?.generation == 2)
    attributes.remove(nfd)
    #expect(attributes.get(nfc)?.generation == 1 && attributes.get(nfd) == nil)

    let folders = FolderObjects()
    folders.set(nfc, .absent)
    folders.set(nfd, .object(m2))
    // A forget of one spelling's folder leaves the other's.
    #expect(!Namespace.isInside(nfd, nfc) && !Namespace.isInside(nfd + "/x", nfc) && Namespace.isInside(nfc + "/x", nfc))
    folders.forget(under: nfd)
    folders.set(nfd, .object(m2))
    let nfcFolder: Bool? = folders.get(nfc).map { if case .absent = $0 { true } else { false } }
    #expect(nfcFolder == true && folders.get(nfd)?.metadata?.generation == 2)

    let listings = FolderListings(ttl: 5, capacity: 100)
    listings.store("d", [nfd, nfc].map { DirectoryEntry(name: $0, isDirectory: false, objectName: "d/" + $0) })
    for name in [nfd, nfc] {
      guard case .found(let f) = listings.lookup(dir: "d", name: name) else {
        Issue.record("\(name.debugDescription) not found")
        continue
      }
      #expect(Array(f.entry.name.utf8) == Array(name.utf8))
    }
  }

  /// A listing the server answered before one of this mount's changes reached the folder is kept
  /// with the change put in (the check and the keeping are one step); when the folder changed
  /// in a way the listings cannot follow name by name, it is not kept at all.
  @Test func aListingOlderThanAChangeIsKeptWithIt() {
    let listings = FolderListings(ttl: 5, capacity: 100)
    let file = DirectoryEntry(name: "new", isDirectory: false, objectName: "d/new")
    let old = DirectoryEntry(name: "old", isDirectory: false, objectName: "d/old")
    let mark = listings.changeMark("d")
    // The changes land while the listing is on its way (no listing kept yet to update).
    listings.update("d", name: "new", entry: file)
    listings.update("d", name: "old", entry: nil)
    #expect(listings.store("d", [old], fetchedAt: mark))
    #expect(listings.current("d")?.map(\.name) == ["new"])
    // Changed wholesale (a conflict's copy, a name the listing cannot place): listed again.
    let later = listings.changeMark("d")
    listings.remove("d")
    listings.update("d", name: "new", entry: file)
    #expect(!listings.store("d", [], fetchedAt: later))
    #expect(listings.current("d") == nil)
    // More changes than are kept while it was on its way: not kept either.
    let longAgo = listings.changeMark("d")
    for i in 0...FolderListings.landedPerFolder {
      listings.update("d", name: "f\(i)", entry: DirectoryEntry(name: "f\(i)", isDirectory: false, objectName: "d/f\(i)"))
    }
    #expect(!listings.store("d", [], fetchedAt: longAgo))
    let now = listings.changeMark("d")
    #expect(listings.store("d", [file], fetchedAt: now))
    #expect(listings.current("d")?.map(\.name) == ["new"])
  }

  /// A walk in listing order keeps a folder's listing (and those of the folders it is inside)
  /// however long it takes; anything else after the time to live asks the server again.
  @Test func aWalkKeepsItsListingAndNothingElseDoes() {
    let now = ManualClock()
    let listings = FolderListings(ttl: 5, capacity: 100, clock: { now.value })
    func entries(_ names: [String], dirs: Set<String> = []) -> [DirectoryEntry] {
      names.map { DirectoryEntry(name: $0, isDirectory: dirs.contains($0), objectName: dirs.contains($0) ? nil : $0) }
    }
    func found(_ dir: String, _ name: String) -> Bool {
      if case .found(let f) = listings.lookup(dir: dir, name: name) { return f.entry.name == name }
      return false
    }
    func unknown(_ dir: String, _ name: String) -> Bool {
      if case .unknown = listings.lookup(dir: dir, name: name) { return true }
      return false
    }
    listings.store("", entries(["a", "b", "c"], dirs: ["a", "b"]))
    listings.store("a", entries(["f0", "f1", "f2", "f3"]))
    #expect(found("", "a"))
    if case .absent = listings.lookup(dir: "a", name: "missing") {} else { Issue.record("a missing name in a current listing") }
    // The walk inside `a` takes 4 × 4 s, far past the time to live: each step renews `a`, and
    // `/`, whose last looked-up entry is `a`.
    for name in ["f0", "f1", "f2", "f3"] {
      now.value += 4
      #expect(found("a", name), "\(name)")
    }
    #expect(listings.current("") != nil)
    #expect(found("", "b"))
    // A second look at an entry after the time to live, a name the listing lacks, and a listing
    // no walk renewed: all go to the server.
    now.value += 6
    #expect(unknown("a", "f1"))
    #expect(unknown("a", "missing"))
    #expect(listings.current("a") == nil)
    // A step forward still finds the walk's listing; `b`'s own folder was never listed.
    #expect(found("", "c"))
    #expect(unknown("b", "anything"))
    // A new listing starts a new walk.
    listings.store("a", entries(["f0", "f9"]))
    now.value += 6
    #expect(found("a", "f0"))
    now.value += 6
    #expect(unknown("a", "f0"))
  }

  @Test func inodesAreStableAndForgotten() {
    let table = InodeTable()
    let node = InodeTable.Node(path: "a/b", isDirectory: false, objectName: "a/b")
    let ino = table.ino(for: node, lookup: true)
    #expect(table.ino(for: node, lookup: true) == ino)
    table.forget(ino, count: 1)
    #expect(table.node(ino) != nil)
    table.forget(ino, count: 1)
    #expect(table.node(ino) == nil)
    table.forget(InodeTable.rootIno, count: 100)
    #expect(table.node(InodeTable.rootIno) != nil)
  }

  /// What sizes the kernel may hold for an inode: one shown size it holds; two shown since it
  /// was last told to forget them, it may hold either (replies apply as they arrive); told to
  /// forget, none it would use unasked.
  @Test func theSizesShownToTheKernelAreKeptUntilItIsToldToForget() {
    let table = InodeTable()
    let ino = table.ino(for: InodeTable.Node(path: "f", isDirectory: false, objectName: "f"), lookup: true)
    #expect(!table.mayHoldOtherSize(ino, than: 10), "shown nothing yet")
    table.showing(ino, size: 10)
    table.showing(ino, size: 10)
    #expect(!table.mayHoldOtherSize(ino, than: 10))
    #expect(table.mayHoldOtherSize(ino, than: 20))
    // Asking so counts as telling it to forget.
    #expect(!table.mayHoldOtherSize(ino, than: 20))
    table.showing(ino, size: 20)
    table.showing(ino, size: 10)
    #expect(table.mayHoldOtherSize(ino, than: 20) && !table.mayHoldOtherSize(ino, than: 10))
    table.showing(ino, size: 30)
    table.forgetShownSizes(ino)
    #expect(!table.mayHoldOtherSize(ino, than: 10))
    #expect(table.mayHoldOtherSize(12_345, than: 1), "an inode the table does not hold")
    // A write the kernel made set the size itself, at the offset it chose: whatever was shown,
    // it may hold any size now (a version's reader opening next had its last byte read as a
    // zero, the size an append's write gave the inode).
    table.showing(ino, size: 17)
    table.sizedByKernel(ino)
    #expect(table.mayHoldOtherSize(ino, than: 17))
  }

  /// `mv a b` over a `b` the kernel still holds, then the kernel forgets the old `b`: the moved
  /// file keeps its new name (forgetting the replaced inode took the path with it, so the
  /// next `mv b c` moved nothing and an append to the file went to the name `b`). Found by
  /// `KillRoundsTests`: a file renamed back over another came back under its old name.
  @Test func aFileRenamedOverAHeldOneKeepsItsNameWhenThatOneIsForgotten() {
    let table = InodeTable()
    let a = table.ino(for: InodeTable.Node(path: "a", isDirectory: false, objectName: "a"), lookup: true)
    let b = table.ino(for: InodeTable.Node(path: "b", isDirectory: false, objectName: "b"), lookup: true)
    table.move(path: "a", to: "b")
    #expect(table.node(a)?.path == "b")
    table.forget(b, count: 1)
    #expect(table.existing(InodeTable.Node(path: "b", isDirectory: false)) == a)
    table.move(path: "b", to: "c")
    #expect(table.node(a)?.path == "c")
    #expect(table.node(a)?.objectName == "c")
  }

  @Test func blockCacheStaysWithinBudgetWhateverIsRead() async throws {
    let client = MemoryObjectClient()
    let data = Data((0..<(12 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) })
    client.put("big", data)
    let cache = BlockCache(budget: 2 << 20)
    let reader = ObjectReader(client: client, cache: cache, name: "big", generation: 1, size: Int64(data.count))
    var offset: Int64 = 0
    while offset < Int64(data.count) {
      let chunk = try await reader.read(offset: offset, count: 131_072)
      #expect(chunk == data.subdata(in: Int(offset)..<Int(offset) + chunk.count))
      offset += Int64(chunk.count)
      #expect(cache.bytesCached <= cache.budget)
    }
    // Sequential reads went out in runs, not a request per page.
    #expect(client.reads.load(ordering: .relaxed) <= 12 * 8 / 2 + 2)
  }

  /// Many readers' read-ahead together stays within half the budget in flight; the pages a
  /// read needs are always fetched; a cached page holds its own bytes, not its run's buffer.
  @Test func readAheadOfManyReadersIsBoundedAndPagesAreTheirOwn() async throws {
    let cache = BlockCache(budget: 4 << 20)
    var claimed = 0
    for i in 0..<16 {
      if cache.claim(name: "f\(i)", generation: 1, pages: 0..<8, prefetch: true) != nil { claimed += 1 }
    }
    // 8 pages of 128 KiB per claim, at most 2 MiB (half of 4) in flight.
    #expect(claimed == 2)
    #expect(cache.claim(name: "demand", generation: 1, pages: 0..<8, prefetch: false) != nil)
    let run = try #require(cache.claim(name: "run", generation: 1, pages: 0..<4))
    let pages = (0..<4).map { Data(repeating: UInt8($0), count: Int(BlockCache.pageSize)) }
    cache.finish(run.1, name: "run", generation: 1, pages: run.0, result: .success(pages))
    let page = try #require(cache.cached(BlockCache.Key(name: "run", generation: 1, page: 1)))
    #expect(page == pages[1] && page.startIndex == 0, "a page holds its own bytes")
  }

  @Test func mountOptionsParse() throws {
    var o = MountOptions()
    try o.apply("ro,uid=1000,gid=100,file_mode=0440,dir_mode=0550,metadata_ttl=10,cache_size=64M,staging_size=1G,stage_max_file=512K,offline,allow_other")
    #expect(o.uid == 1000 && o.gid == 100 && o.fileMode == 0o440 && o.dirMode == 0o550)
    #expect(o.metadataTTL == 10 && o.cacheSize == 64 << 20 && o.stagingSize == 1 << 30 && o.stageMaxFile == 512 << 10)
    #expect(o.offline && o.allowOther)
    #expect(throws: MountOptions.ParseError.self) { try o.apply("bogus") }
    #expect(throws: MountOptions.ParseError.self) { try o.apply("file_mode=999") }
    // What mount(8) and fstab pass is accepted (rw is noted, the mount stays read-only).
    try o.apply("rw,_netdev,noauto,nofail,user,x-systemd.automount,x-systemd.idle-timeout=60,defaults")
    #expect(o.readWriteAsked)
  }

  @Test(arguments: [
    (StorageErrorCode.objectNotFound, ENOENT), (.unauthorized, EACCES), (.unauthenticated, EACCES),
    (.objectChanged, ESTALE), (.timedOut, EIO), (.serverUnreachable, EIO), (.nonMatchingChecksum, EIO),
    (.projectNotFound, ENOENT), (.pathError, EINVAL), (.preconditionFailed, ESTALE), (.cancelled, EINTR),
  ])
  /// StorageCore's error, through the one translation into BucketFS's, to the errno a reader sees.
  func errnoMapping(code: StorageErrorCode, expected: Int32) {
    #expect(ErrnoMapping.errno(BucketError(StorageError(code: code, object: "x", detail: ""))) == expected)
  }
}

final class ManualClock: @unchecked Sendable {
  var value: Double = 1000
}

@Suite struct LargeFolderTests {
  func makeFS(_ client: MemoryObjectClient, posix: Bool = true) -> BucketFilesystem {
    var options = MountOptions()
    options.posix = posix
    options.cacheSize = 4 << 20
    // Long enough that a loaded machine cannot expire what the test checks.
    options.metadataTTL = 300
    return BucketFilesystem(client: client, prefix: "", options: options, staging: nil, log: { _ in })
  }

  /// Replies of 100 entries: every call starts at its offset and stops when full, so handing out
  /// N entries costs about N steps, and only entries handed out through readdirplus get inodes.
  @Test func readdirIsLinearAndMakesInodesOnlyForWhatItHandsOut() async throws {
    let client = MemoryObjectClient()
    for i in 0..<3000 { client.put(String(format: "f%05d.txt", i), Data("x".utf8)) }
    for i in 0..<2000 { client.put(String(format: "d%05d/x", i), Data("y".utf8)) }
    // Folders whose placeholders need no asking (`aFolderWaitsForItsPlaceholder`).
    let fs = makeFS(client, posix: false)
    for plus in [false, true] {
      let handle = try await fs.openDirectory(InodeTable.rootIno)
      var offset = 0
      var steps = 0
      var calls = 0
      var linked = 0
      while true {
        var given = 0
        let read = fs.readDirectory(InodeTable.rootIno, handle: handle, offset: offset, plus: plus) { entry, attrs, isLinked in
          steps += 1
          guard given < 100 else { return false }
          given += 1
          if isLinked {
            fs.inodes.addLookup(attrs.ino)
            linked += 1
          }
          #expect(isLinked == (plus && entry.isDirectory), "\(entry.name)")
          return true
        }
        calls += 1
        // The listing's last entries may still be on their way (read as its pages arrive).
        if given == 0, case .waitFor(let stream, let count) = read {
          await stream.more(than: count)
          continue
        }
        if given == 0 { break }
        offset += given
      }
      fs.releaseDirectory(handle)
      #expect(offset == 5000)
      #expect(steps <= 5000 + calls, "\(steps) steps for 5000 entries in \(calls) replies")
      // Plain readdir makes no inode; readdirplus one per folder handed out (files of a names-only
      // listing are looked up later), none for entries that did not fit.
      #expect(fs.inodes.count == 1 + (plus ? 2000 : 0), "\(fs.inodes.count) inodes after plus=\(plus)")
      #expect(linked == (plus ? 2000 : 0))
    }
  }

  /// A folder's mode, owner and time are its placeholder's (`dir/`): over a names-only (v0)
  /// listing, readdirplus hands out no attributes for a folder whose placeholder is unknown, its
  /// lookup asks for it once (and the next folders' in the background), and from then on the
  /// folder is answered without asking, readdirplus included. A folder with no placeholder shows
  /// the defaults.
  @Test func aFolderWaitsForItsPlaceholder() async throws {
    let client = MemoryObjectClient()
    client.put("kept/", Data(), custom: ["goog-reserved-posix-mode": "700", "goog-reserved-posix-uid": "42", "mtime": "2020-01-02T03:04:05.5Z"])
    client.put("kept/x", Data("x".utf8))
    client.put("plain/x", Data("x".utf8))
    let fs = makeFS(client)
    func linked() async throws -> [String: FileAttributes] {
      let handle = try await fs.openDirectory(InodeTable.rootIno)
      defer { fs.releaseDirectory(handle) }
      var out: [String: FileAttributes] = [:]
      fs.readDirectory(InodeTable.rootIno, handle: handle, offset: 0, plus: true) { entry, attrs, isLinked in
        if isLinked {
          fs.inodes.addLookup(attrs.ino)
          out[entry.name] = attrs
        }
        return true
      }
      return out
    }
    #expect(try await linked().isEmpty)
    let before = client.metadataRequests.load(ordering: .relaxed)
    #expect(fs.lookupIfCached(parent: InodeTable.rootIno, name: "kept") == nil, "answered before its placeholder was known")
    let kept = try await fs.lookup(parent: InodeTable.rootIno, name: "kept")
    #expect(kept.mode == 0o700 && kept.uid == 42 && kept.mtime == 1_577_934_245.5, "\(kept)")
    #expect(client.metadataRequests.load(ordering: .relaxed) == before + 1 || client.metadataRequests.load(ordering: .relaxed) == before + 2)
    let plain = try await fs.lookup(parent: InodeTable.rootIno, name: "plain")
    #expect(plain.mode == MountOptions().dirMode && plain.uid == MountOptions().uid)
    #expect(client.metadataRequests.load(ordering: .relaxed) <= before + 3)
    let again = try await linked()
    #expect(again["kept"]?.mode == 0o700 && again["plain"]?.mode == MountOptions().dirMode, "\(again)")
    let asked = client.metadataRequests.load(ordering: .relaxed)
    #expect(try fs.lookupIfCached(parent: InodeTable.rootIno, name: "kept")?.get().mode == 0o700)
    #expect(fs.getattrIfCached(kept.ino)?.mode == 0o700)
    #expect(client.metadataRequests.load(ordering: .relaxed) == asked)
  }

  /// Names first: listing a folder of a names-only (v0) bucket fetches no metadata; a lookup
  /// fetches the one asked for, and the following ones in the background.
  @Test func listingNeedsNoPerObjectRequest() async throws {
    let client = MemoryObjectClient()
    for i in 0..<500 { client.put(String(format: "f%04d.txt", i), Data(repeating: 1, count: i)) }
    let fs = makeFS(client)
    let before = client.metadataRequests.load(ordering: .relaxed)
    let entries = try await fs.listing("")
    #expect(entries.count == 500)
    #expect(client.metadataRequests.load(ordering: .relaxed) == before)
    let attrs = try await fs.lookup(parent: InodeTable.rootIno, name: "f0042.txt")
    #expect(attrs.size == 42)
    // The next entries arrive ahead of their lookups.
    for _ in 0..<2000 where fs.lookupIfCached(parent: InodeTable.rootIno, name: "f0199.txt") == nil {
      try await Task.sleep(for: .milliseconds(10))
    }
    var cached = 0
    for i in 43..<200 {
      if fs.lookupIfCached(parent: InodeTable.rootIno, name: String(format: "f%04d.txt", i)) != nil { cached += 1 }
    }
    #expect(cached > 100, "only \(cached) of the following entries had their attributes fetched ahead")
  }
}
