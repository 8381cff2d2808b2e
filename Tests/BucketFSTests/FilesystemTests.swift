import BucketFS
import Foundation
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
    let data = Data((0..<300_000).map { UInt8($0 % 251) })
    client.put("f.bin", data)
    let fs = makeFS(client)
    let attrs = try await fs.lookup(parent: InodeTable.rootIno, name: "f.bin")
    #expect(attrs.size == 300_000 && !attrs.isDirectory)
    let (handle, _) = try await fs.open(attrs.ino, flags: O_RDONLY)
    #expect(try await fs.read(handle: handle, offset: 1000, count: 5000) == data.subdata(in: 1000..<6000))
    #expect(try await fs.read(handle: handle, offset: 299_990, count: 100) == data.subdata(in: 299_990..<300_000))
    client.put("f.bin", Data("new".utf8))
    // The pinned generation is gone: pages not yet cached fail with ESTALE.
    let error = await #expect(throws: FSError.self) { try await fs.read(handle: handle, offset: 200_000, count: 10) }
    #expect(error?.errno == ESTALE)
    fs.release(handle: handle)
    await #expect(throws: FSError(EROFS)) { try await fs.open(attrs.ino, flags: O_WRONLY) }
    await #expect(throws: FSError(ENOENT)) { try await fs.lookup(parent: InodeTable.rootIno, name: "missing") }
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

  @Test func mountOptionsParse() throws {
    var o = MountOptions()
    try o.apply("ro,uid=1000,gid=100,file_mode=0440,dir_mode=0550,metadata_ttl=10,cache_size=64M,staging_size=1G,stage_max_file=512K,offline,allow_other")
    #expect(o.uid == 1000 && o.gid == 100 && o.fileMode == 0o440 && o.dirMode == 0o550)
    #expect(o.metadataTTL == 10 && o.cacheSize == 64 << 20 && o.stagingSize == 1 << 30 && o.stageMaxFile == 512 << 10)
    #expect(o.offline && o.allowOther)
    #expect(throws: MountOptions.ParseError.self) { try o.apply("bogus") }
    #expect(throws: MountOptions.ParseError.self) { try o.apply("file_mode=999") }
    #expect(throws: MountOptions.ParseError.self) { try o.apply("rw") }
  }

  @Test(arguments: [
    (StorageErrorCode.objectNotFound, ENOENT), (.unauthorized, EACCES), (.unauthenticated, EACCES),
    (.objectChanged, ESTALE), (.timedOut, EIO), (.serverUnreachable, EIO), (.nonMatchingChecksum, EIO),
  ])
  func errnoMapping(code: StorageErrorCode, expected: Int32) {
    #expect(ErrnoMapping.errno(StorageError(code: code, object: "x", detail: "")) == expected)
  }
}

final class ManualClock: @unchecked Sendable {
  var value: Double = 1000
}
