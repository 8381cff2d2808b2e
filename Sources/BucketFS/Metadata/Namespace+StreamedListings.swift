// A folder opened for reading (`opendir`) whose listing the mount does not hold is read as its
// pages arrive (`ListingStream`): the first entries reach the reader while the server still
// sends the rest, and a listing that breaks off after its first page ends with an error.
import Foundation
import StorageCore
import Synchronization

extension Namespace {
  /// How an opened folder is read: a listing the mount holds, or one whose pages still arrive.
  package enum OpenedListing: Sendable {
    case whole([DirectoryEntry])
    case arriving(ListingStream)
  }

  /// Folder `path` opened for reading (`opendir`): a listing the mount holds, else one fetched
  /// now whose entries are read as its pages arrive. Returns once the first page is in; a
  /// failure before that is answered as `listing`'s (`listingWithoutServer` when the server is gone).
  func openListing(_ path: String, unansweredThrows: Bool = false) async throws(FSError) -> OpenedListing {
    noteOpened(path)
    if let cached = listings.current(path) { return .whole(cached) }
    if options.offline { return .whole(try await listing(path, unansweredThrows: unansweredThrows)) }
    return try await listingFromServer(path, { () async throws(BucketError) -> OpenedListing in
      let stream = ListingStream()
      let inFlight = listingsAhead.withLock { inflight -> Task<Void, Never>? in
        if let other = inflight[ObjectName(path)] { return other }
        inflight[ObjectName(path)] = Task { [self] in
          defer { _ = listingsAhead.withLock { $0.removeValue(forKey: ObjectName(path)) } }
          _ = try? await fetchCurrentListing(path, into: stream)
        }
        return nil
      }
      if let other = inFlight {
        // Listed ahead for a walk already: that listing, whole.
        await other.value
        if let cached = listings.current(path) { return .whole(cached) }
        return .whole(try await fetchCurrentListing(path))
      }
      try await stream.firstPage()
      return .arriving(stream)
    }, else: { .whole($0) }, unansweredThrows: unansweredThrows)
  }
}
