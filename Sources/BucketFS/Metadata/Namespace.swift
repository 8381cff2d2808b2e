// What the mount shows where: folder listings, the attributes of files, and what a name in a
// folder is. A folder is a prefix with objects under it (or a placeholder object whose name ends
// in "/"). When an object `a` and objects under `a/` both exist, the folder keeps the name `a`
// and the object is shown as `a.object` (FolderNames). Names that cannot be file names are left
// out of listings with one log line each. Names here are relative to the mount's prefix (the
// client is a PrefixedClient); staged copies are kept under full object names.
//
// When the server cannot be reached, and on an offline mount, answers come from what the mount
// holds instead (`Namespace+WithoutServer.swift`): a folder's last listing, the pins' trees and
// the staged copies. This file holds the state; each job is a file of its own: listings asked for
// (`+ServerListings`, `+StreamedListings`), names in folders not listed (`+UnlistedFolders`),
// lookups (`+Lookups`), attributes (`+Attributes`), this mount's changes that reached the bucket
// (`+AppliedChanges`), and names and paths (`+Names`).
import Foundation
import StorageCore
import Synchronization

final class Namespace: Sendable {
  let client: any ObjectClient
  let options: MountOptions
  let staging: StagingArea?
  let log: @Sendable (String) -> Void
  let files: AttributeCache
  let missing: MissingNames
  let listings: FolderListings
  let folders: FolderObjects
  /// Folders a lookup found, kept past `metadata_ttl` for a server that stops answering.
  let answeredFolders = AnsweredFolders(capacity: 100_000)
  let reportedNames = Mutex<Set<ObjectName>>([])
  /// Attribute fetches in flight in the background (`prefetchAttributes`): a lookup that needs
  /// one waits for it instead of asking the server a second time.
  let attributeFetches = Mutex<[ObjectName: Task<StorageMetadata?, Never>]>([:])
  let attributeSlots = ReadAheadSlots(32)
  /// How many entries after a looked-up one get their attributes fetched ahead.
  static let attributeBatch = 256

  init(client: any ObjectClient, options: MountOptions, staging: StagingArea?, log: @escaping @Sendable (String) -> Void) {
    self.client = client
    self.options = options
    self.staging = staging
    self.log = log
    let ttl = options.metadataTTL
    // One budget, `metadata_cache_size`: three quarters for listings (most of what a walk
    // keeps), an eighth for attributes fetched one by one, a sixteenth for names known missing.
    let budget = options.metadataCacheSize
    missing = MissingNames(ttl: options.missTTL, capacity: max(1_000, budget / 16 / Self.bytesPerMissingName))
    listings = FolderListings(ttl: ttl, negativeTTL: options.missTTL, capacity: 20_000, budget: budget / 4 * 3)
    files = AttributeCache(ttl: ttl, capacity: max(1_000, budget / 8 / Self.bytesPerAttributes), listings: listings)
    folders = FolderObjects()
    offline = OfflineView(staging: staging, client: client)
  }

  /// What an entry of the attribute cache and of the known-missing names hold, about (the
  /// summary or flag, the key, the table's slot): for their share of the budget.
  static let bytesPerAttributes = MemoryLayout<ObjectSummary>.stride + 96
  static let bytesPerMissingName = 112

  /// What the mount keeps about names now, for the stats: entries and bytes, about.
  var heldMetadata: (entries: Int, bytes: Int, evicted: Int) {
    let l = listings.totals
    let attributes = files.count
    let absent = missing.count
    return (
      l.entries + attributes + absent, l.bytes + attributes * Self.bytesPerAttributes + absent * Self.bytesPerMissingName, l.evicted
    )
  }

  /// Drops what the mount knows of `path` and everything under it: listings, attributes and
  /// names known missing are asked of the server again.
  func forget(under path: String) {
    listings.forget(under: path)
    files.removeAll { Self.isInside($0, path) }
    missing.removeAll { Self.isInside($0, path) }
    folders.forget(under: path)
  }

  /// What the mount shows without the server (`OfflineView`), by name relative to the prefix.
  let offline: OfflineView

  /// Folder `path`'s placeholder as a pinned tree last listed it: its mode and times offline.
  func pinnedFolderObject(_ path: String) -> StorageMetadata? { offline.pinnedFolderObject(path) }

  // MARK: listings (`Namespace+ServerListings.swift`, `+StreamedListings.swift`,
  // `+UnlistedFolders.swift`; without the server, `+WithoutServer.swift`)

  /// Listings fetched ahead of a walk, by folder, while in flight.
  let listingsAhead = Mutex<[ObjectName: Task<Void, Never>]>([:])
  let listingSlots = ReadAheadSlots(Namespace.foldersAhead)
  /// Folders listed ahead of a walk so far (for the stats).
  let foldersListedAhead = Atomic<Int>(0)
  /// How many folders after the one a walk went into have their listings fetched ahead.
  static let foldersAhead = 4
  /// Listings the server could not give, answered from the folder's last one (for the stats),
  /// and the folders the log said so of since their last listing (`+WithoutServer.swift`).
  let listingsFromLast = Atomic<Int>(0)
  let saidFromLast = Mutex<Set<ObjectName>>([])

  /// Folders where lookups asked the server about names (`Namespace+UnlistedFolders.swift`).
  let unlistedFolders = Mutex<[ObjectName: UnlistedFolder]>([:])
  /// Folders remembered at once; past it they are forgotten together (each costs a miss again).
  static let unlistedFoldersKept = 256

  /// The names directly in a folder that this mount's queue holds changes of (a writable
  /// mount's; set once it has a queue).
  let queuedNamesSource = Hook<@Sendable (String) -> Set<ObjectName>>()

  func setQueuedNames(_ source: @escaping @Sendable (String) -> Set<ObjectName>) { queuedNamesSource.set(source) }
}

extension DirectoryEntry {
  func with(_ metadata: StorageMetadata) -> DirectoryEntry {
    var e = self
    e.metadata = metadata
    return e
  }
}
