// Lookups in folders the mount has not listed: a name is probed (a one-result listing of
// `name/` beside a GET of `name`), and from the second probe in a folder that one page holds,
// the folder's listing answers instead.
import Foundation
import StorageCore
import Synchronization

extension Namespace {
  /// Where lookups asked the server about names, in folders the mount has not listed: a program
  /// making new files one after another there (a loop of `open(…, "w")`, `tar -x` or `cp -r`
  /// into a folder that exists, or over files that are there) would have each name asked
  /// about, two requests a name. From the second name asked (one the server lacks; or one it
  /// has, where a listing carries attributes, so that the listing answers as the probe did),
  /// one listing answers them all, when one page holds the folder.
  enum UnlistedFolder {
    /// Asked about once.
    case probed
    case listing
    /// More than a page: its names are asked about one by one until then.
    case tooLarge(until: Double)
  }

  func noteProbe(in dir: String) {
    guard !options.offline, options.metadataTTL > 0 else { return }
    unlistedFolders.withLock { u in
      guard u[ObjectName(dir)] == nil else { return }
      if u.count >= Self.unlistedFoldersKept { u.removeAll() }
      u[ObjectName(dir)] = .probed
    }
  }

  /// True when folder `dir`, where a lookup asked the server before, was listed now (and stored).
  func listedAfterProbes(_ dir: String) async -> Bool {
    let now = Date().timeIntervalSince1970
    let take = unlistedFolders.withLock { u -> Bool in
      switch u[ObjectName(dir)] {
      case .probed?:
        u[ObjectName(dir)] = .listing
        return true
      case .tooLarge(let until)? where until < now:
        u[ObjectName(dir)] = nil
        return false
      case .listing?, .tooLarge?, nil:
        return false
      }
    }
    guard take else { return false }
    let outcome: OnePageListing?
    do throws(BucketError) {
      outcome = try await fetchListingIfOnePage(dir)
    } catch {
      outcome = nil
    }
    unlistedFolders.withLock { u in
      // A folder of more than a page is not listed again for a while; a failed fetch (or one
      // overtaken by this mount's changes) is tried again at the next probe.
      u[ObjectName(dir)] = outcome == .moreThanAPage ? .tooLarge(until: now + options.metadataTTL) : nil
    }
    return outcome == .stored
  }

  /// Folders of fewer entries than this are listed again to confirm absent names (two pages of
  /// a listing at most); larger ones are asked about each name.
  static let confirmableListing = 2000

  func queuedNames(_ dir: String) -> Set<ObjectName> {
    guard let source = queuedNamesSource.value else { return [] }
    return Set(source(dir).map { ObjectName($0.string.withoutTrailingSlash) })
  }

  /// Asks the server whether `path` is a folder (objects under it) or an object.
  func probe(path: String, name: String) async throws(BucketError) -> DirectoryEntry? {
    async let folder: Result<ListPage, BucketError> = {
      do throws(BucketError) {
        return .success(try await client.listPage(prefix: path + "/", pageToken: nil, maxResults: 1))
      } catch { return .failure(error) }
    }()
    let object: Result<StorageMetadata, BucketError>
    do throws(BucketError) {
      object = .success(try await client.metadata(of: path))
    } catch {
      object = .failure(error)
    }
    let page = try await folder.get()
    if !page.items.isEmpty || !page.prefixes.isEmpty {
      // The placeholder sorts first under its folder: a GCS page of one shows whether it is there.
      if let first = page.items.first, Self.sameBytes(first, path + "/"), let m = page.itemMetadata[0] {
        folders.set(path, .object(m))
      } else if page.holdsFolderObjects {
        folders.set(path, .absent)
      }
      answeredFolders.add(path)
      return DirectoryEntry(name: name, isDirectory: true)
    }
    switch object {
    case .success(let m):
      files.set(path, m)
      return DirectoryEntry(name: name, isDirectory: false, objectName: path, metadata: m)
    case .failure(let e) where e.code == .objectNotFound:
      // On a hierarchical bucket an empty folder is a resource with nothing under it.
      if client.knownFoldersAreResources == true, try await client.folderExists(path + "/") {
        if page.holdsFolderObjects { folders.set(path, .absent) }
        answeredFolders.add(path)
        return DirectoryEntry(name: name, isDirectory: true)
      }
      return nil
    case .failure(let e):
      throw e
    }
  }
}
