// A folder's listing from the server: asked for, kept (`FolderListings`), asked again when this
// mount's own changes landed in the folder meanwhile, and fetched ahead of a walk. Page by page,
// each page's entries made compact as it arrives (`ListingBuilder`).
import Foundation
import StorageCore
import Synchronization

extension Namespace {
  /// The entries of folder `path` (relative to the mount root).
  /// `unansweredThrows`: a server that stopped answering is thrown, not answered from the staged
  /// copies, for a caller that answers as the request's deadline would (with the folder's last
  /// listing, which knows more than the staged copies).
  func listing(_ path: String, unansweredThrows: Bool = false) async throws(FSError) -> [DirectoryEntry] {
    noteOpened(path)
    if let cached = listings.current(path) { return cached }
    // Being fetched ahead for a walk already: that listing, not a second request.
    if let ahead = listingsAhead.withLock({ $0[ObjectName(path)] }) {
      await ahead.value
      if let cached = listings.current(path) { return cached }
    }
    return try await listingFromServer(path, { () async throws(BucketError) -> [DirectoryEntry] in
      try await fetchCurrentListing(path)
    }, else: { $0 }, unansweredThrows: unansweredThrows)
  }

  /// Folder `path` is being opened: its parent's listing stays recent, and a walk's next
  /// folders are listed ahead.
  func noteOpened(_ path: String) {
    guard !path.isEmpty else { return }
    let (parent, name) = Self.split(path)
    if let found = listings.opened(dir: parent, name: name) { listFoldersAhead(found, dir: parent) }
  }

  /// A walk (`find`, `du`, `ls -R`, `cp -r`) went into folder `found` of `dir`, in listing order
  /// after the entry it looked up before: the next folders of the listing are listed ahead, a
  /// few at a time, so that the walk finds each listing ready instead of waiting for the
  /// server folder after folder. Nothing is fetched for a single lookup, offline, or with no
  /// time to live to keep what comes back.
  func listFoldersAhead(_ found: FolderListings.Found, dir: String) {
    guard found.walking, found.entry.isDirectory, !options.offline, options.metadataTTL > 0 else { return }
    let next = found.entries[(found.index + 1)...].lazy.filter(\.isDirectory).prefix(Self.foldersAhead)
    for e in next {
      let path = Self.join(dir, e.name)
      guard listings.current(path) == nil else { continue }
      listingsAhead.withLock { inflight in
        guard inflight[ObjectName(path)] == nil else { return }
        inflight[ObjectName(path)] = Task { [self] in
          await listingSlots.acquire()
          defer {
            listingSlots.release()
            _ = listingsAhead.withLock { $0.removeValue(forKey: ObjectName(path)) }
          }
          guard listings.current(path) == nil else { return }
          if (try? await fetchCurrentListing(path)) != nil { foldersListedAhead.add(1, ordering: .relaxed) }
        }
      }
    }
  }

  /// The folder's listing from the server, stored; fetched again (up to three times) when one
  /// of this mount's changes in it reached the bucket meanwhile, so that a listing never misses
  /// a file this mount has just written (nor shows one it has just deleted).
  /// `stream` hears the first fetch as it arrives (a reader is shown that one).
  func fetchCurrentListing(_ path: String, into stream: ListingStream? = nil) async throws(BucketError) -> [DirectoryEntry] {
    var entries: [DirectoryEntry] = []
    for attempt in 0..<3 {
      let mark = listings.changeMark(path)
      entries = try await fetchListing(path, into: attempt == 0 ? stream : nil)!
      let stored = listings.store(path, entries, fetchedAt: mark)
      if attempt == 0 {
        stream?.complete()
        heardAgain(path)
      }
      if stored { return entries }
    }
    // Changes keep landing in it: this answer is asked again next time rather than kept.
    return entries
  }

  /// What fetching a folder's listing only if one page holds it came to.
  enum OnePageListing {
    case stored
    case moreThanAPage
    /// This mount's changes landed in the folder meanwhile, not all known: not kept.
    case overtaken
  }

  func fetchListingIfOnePage(_ path: String) async throws(BucketError) -> OnePageListing {
    let mark = listings.changeMark(path)
    guard let entries = try await fetchListing(path, pages: 1) else { return .moreThanAPage }
    return listings.store(path, entries, fetchedAt: mark) ? .stored : .overtaken
  }

  /// The folder's whole listing as the server gives it (a cached one within its TTL, else a
  /// fresh one), never the staged copies' part of it: for a change that must see every object
  /// under a folder (a folder rename), which fails (EIO) rather than act on part of it.
  func serverListing(_ path: String) async throws(FSError) -> [DirectoryEntry] {
    if let cached = listings.current(path) { return cached }
    guard !options.offline else {
      if staging != nil, pinnedWhole(path) { return offlineListing(path) }
      throw FSError(EIO)
    }
    do throws(BucketError) {
      return try await fetchCurrentListing(path)
    } catch {
      // The server gone: a pin that holds the folder whole knows all of it, as offline.
      if ErrnoMapping.isServerGone(error), staging != nil, pinnedWhole(path) {
        log("listing \(path.isEmpty ? "/" : path) for a change that needs all of it: \(error.detail); the pin's tree, listed whole, is used")
        return offlineListing(path)
      }
      log("listing \(path.isEmpty ? "/" : path) for a change that needs all of it: \(error.detail)")
      throw FSError(error)
    }
  }

  /// The folder's listing from the server, page by page; each page's entries whose names are
  /// final go to `stream` as they come (see `ListingBuilder`), made compact on the way: a folder
  /// of 100,000 objects never holds 100,000 `StorageMetadata` at once, nor a second array of them.
  /// `pages`: at most this many pages are asked for; nil when the listing has more.
  func fetchListing(_ path: String, into given: ListingStream? = nil, pages: Int = .max) async throws(BucketError)
    -> [DirectoryEntry]?
  {
    let listPrefix = path.isEmpty ? "" : path + "/"
    let stream = given ?? ListingStream()
    var builder = ListingBuilder(
      listPrefix: listPrefix,
      folderObject: { [folders] name, object in
        let folder = name.isEmpty ? path : Self.join(path, name)
        if let object { folders.set(folder, object) } else { folders.forget(folder) }
      },
      leftOut: { [self] objectName, reason in report(objectName, reason: reason) },
      knownSummary: { [files] objectName in files.summary(objectName) })
    var token: String? = nil
    var fetched = 0
    do throws(BucketError) {
      repeat {
        // Only a stream of its own (nobody reads it) is left unfinished.
        guard fetched < pages else { return nil }
        let page = try await client.listPage(prefix: listPrefix, pageToken: token, maxResults: nil)
        fetched += 1
        stream.append(builder.add(page))
        token = page.nextPageToken
      } while token != nil
    } catch {
      // A later page failed with the server gone while a reader is shown this listing: it
      // goes on from the folder's last listing past the names it reached, never ends short
      // (EIO where no last listing is held). Not kept: the next listing asks again.
      if given != nil, stream.hasStarted, ErrnoMapping.isServerGone(error),
        let last = listingWithoutServer(path, because: "\(error.detail) after \(fetched) pages")
      {
        stream.endFromLast(builder.finish(), last)
      } else {
        stream.fail(error)
      }
      throw error
    }
    return stream.finish(builder.finish())
  }

  func report(_ objectName: String, reason: String = "not a valid file name") {
    let first = reportedNames.withLock { $0.insert(ObjectName(objectName)).inserted }
    if first { log("leaving out \(client.bucketName(objectName).debugDescription): \(reason)") }
  }
}
