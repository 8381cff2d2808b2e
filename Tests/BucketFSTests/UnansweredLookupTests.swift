import BucketFS
import Foundation
import StorageCore
import Synchronization
import Testing

/// A bucket whose every request fails with one error code, as a server that stalls, runs out
/// the retry time, or cannot be reached at all.
private class FailingClient: ObjectClient, @unchecked Sendable {
  let code: BucketError.Code
  let bucket = "bk"
  init(code: BucketError.Code) { self.code = code }
  var copiesOnServer: Bool { false }
  var bucketWide: any ObjectClient { self }
  func fail(_ name: String) -> BucketError { BucketError(code: code, object: name, detail: "injected \(code)") }
  func metadata(of name: String) async throws(BucketError) -> StorageMetadata { throw fail(name) }
  func listPage(prefix: String, pageToken: String?, maxResults: Int?) async throws(BucketError) -> ListPage { throw fail(prefix) }
  func read(_ name: String, range: Range<Int64>, generation: Int64) async throws(BucketError) -> Data { throw fail(name) }
  func read(
    _ name: String, range: Range<Int64>, generation: Int64,
    valve: DeliveryValve?, into deliver: @escaping @Sendable (UnsafeRawBufferPointer, Int64) -> HTTPTransfer.Flow
  ) async throws(BucketError) -> Int64 { throw fail(name) }
  func downloadURL(name: String, token: String) -> String { "" }
}

/// A lookup whose request stalls is answered as the lookup's deadline would answer it, since the
/// two bounds are both read_timeout and either may come first: a read-only mount says EIO (the
/// server may hold the name), a writable one takes the name as absent so it can be made. A
/// server that cannot be reached leaves the staged copies as the view, but a name neither they
/// nor a listing of its folder know is not "no such file" on a read-only mount: EIO (issue 55).
@Suite struct UnansweredLookupTests {
  func lookupErrno(_ code: BucketError.Code, writable: Bool) async throws -> Int32 {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("unanswered-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: folder) }
    let staging = try StagingArea(folder: folder, bucket: "bk", sizeLimit: 1 << 30, maxFile: 1 << 30, log: { _ in })
    var options = MountOptions()
    options.cacheSize = 4 << 20
    options.writable = writable
    let fs = BucketFilesystem(client: FailingClient(code: code), prefix: "", options: options, staging: staging, log: { _ in })
    do {
      _ = try await fs.lookup(parent: InodeTable.rootIno, name: "new.txt")
      return 0
    } catch {
      return error.errno
    }
  }

  @Test(arguments: [BucketError.Code.timedOut, .retryLimitExceeded])
  func aStalledLookupGetsItsDeadlinesAnswer(code: BucketError.Code) async throws {
    #expect(try await lookupErrno(code, writable: false) == EIO)
    #expect(try await lookupErrno(code, writable: true) == ENOENT)
  }

  @Test func anUnreachableServerLeavesTheStagedView() async throws {
    #expect(try await lookupErrno(.serverUnreachable, writable: false) == EIO)
    #expect(try await lookupErrno(.serverUnreachable, writable: true) == ENOENT)
  }
}

/// A bucket that lists folder `seen/` once and then stops answering with `code`.
private final class ListsOnceClient: FailingClient, @unchecked Sendable {
  private let lists = Mutex(0)
  override func listPage(prefix: String, pageToken: String?, maxResults: Int?) async throws(BucketError) -> ListPage {
    guard prefix == "seen/" else { return ListPage(prefixes: ["seen/"], items: [], nextPageToken: nil) }
    // A lookup's probe (one result) is answered; the second full listing is not.
    guard maxResults != nil || lists.withLock({ n in n += 1; return n }) == 1 else { throw fail(prefix) }
    return ListPage(prefixes: [], items: ["seen/old.txt"], nextPageToken: nil)
  }
}

/// A folder listing whose request stalls is answered as the opendir's deadline would answer it
/// (the folder's last listing, which knows more than the staged copies), whichever of the two
/// bounds, both read_timeout, ends it first.
@Suite struct UnansweredListingTests {
  @Test(arguments: [BucketError.Code.timedOut, .retryLimitExceeded])
  func aStalledListingShowsTheLastOne(code: BucketError.Code) async throws {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("unanswered-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: folder) }
    let staging = try StagingArea(folder: folder, bucket: "bk", sizeLimit: 1 << 30, maxFile: 1 << 30, log: { _ in })
    var options = MountOptions()
    options.cacheSize = 4 << 20
    options.metadataTTL = 0
    let fs = BucketFilesystem(client: ListsOnceClient(code: code), prefix: "", options: options, staging: staging, log: { _ in })
    let seen = try await fs.lookup(parent: InodeTable.rootIno, name: "seen")
    func names() async throws -> [String] {
      let handle = try await fs.openDirectory(seen.ino)
      defer { fs.releaseDirectory(handle) }
      var out: [String] = []
      // The listing's last entries may still be on their way (read as its pages arrive).
      while case .waitFor(let stream, let count) = fs.readDirectory(seen.ino, handle: handle, offset: out.count, plus: false, emit: { entry, _, _ in
        out.append(entry.name)
        return true
      }) {
        await stream.more(than: count)
      }
      return out.filter { $0 != "." && $0 != ".." }
    }
    let first = try await names()
    #expect(first == ["old.txt"], "the first listing")
    // The server stops answering: not the staged copies' view (empty), the last listing.
    let second = try await names()
    #expect(second == ["old.txt"])
  }
}
