// What a name in a folder is: from the folder's listing when the mount holds one, a known miss,
// else a probe of the server (or, without it, what the mount holds).
import Foundation
import StorageCore
import Synchronization

extension Namespace {
  /// What `name` in folder `dir` is, from the folder's listing when it is cached, else from the
  /// server (or the staged copies).
  func resolve(dir: String, name: String) async throws(FSError) -> DirectoryEntry {
    var answer = listings.lookup(dir: dir, name: name)
    if case .unknown = answer, await listedAfterProbes(dir) { answer = listings.lookup(dir: dir, name: name) }
    switch answer {
    case .found(let found):
      listFoldersAhead(found, dir: dir)
      return try await withAttributes(found, dir: dir)
    case .absent: throw FSError(ENOENT)
    case .absenceToConfirm(let count) where count < Self.confirmableListing && !options.offline:
      // One listing confirms every absent name for the next window, where a probe would ask
      // about this one name (two requests) and the next name again.
      if let listed = try? await fetchListing(dir) ?? nil, listings.confirmAbsences(dir, from: listed, ours: queuedNames(dir)),
        case .absent = listings.lookup(dir: dir, name: name)
      {
        throw FSError(ENOENT)
      }
    case .unknown, .absenceToConfirm: break
    }
    let path = Self.join(dir, name)
    if missing.contains(path) { throw FSError(ENOENT) }
    var fromStaged = false
    var unanswered = false
    let found: DirectoryEntry? = try await fromServer("looking up \(path)", { () async throws(BucketError) -> DirectoryEntry? in
      do throws(BucketError) {
        return try await probe(path: path, name: name)
      } catch {
        unanswered = error.isUnanswered
        throw error
      }
    }, orStaged: { () throws(FSError) -> DirectoryEntry? in
      fromStaged = true
      // The folder's last listing, or the server's last answer about the name, knows more
      // than the staged copies (which are what was read); a folder whose own listing the mount
      // holds is there, though its parent was never listed: not "no such file" (a script would
      // take the folder for gone).
      if let held = heldWithoutServer(dir: dir, name: name) { return held }
      // A server that cannot be reached leaves the staged copies as the mount's view, but one
      // that stopped answering may hold the name: its silence is the answer, as when the
      // lookup's own deadline runs out (the caller decides what a writable mount makes of it).
      if unanswered { throw FSError(ENOENT) }
      // Absent from what the mount knows of the whole folder (its last listing, or a pin that
      // holds it): absent. Otherwise a read-only mount cannot know, and says so (the server's
      // failure, EIO) rather than "no such file"; a writable one takes the name as absent, so
      // that a file can be made with the server away (its upload goes beside one found there).
      if let last = listings.lastKnown(dir) {
        // Listed without its attributes (a v0 listing has names only): there, but not what.
        if last.contains(where: { Self.sameBytes($0.name, name) }) { throw FSError(EIO) }
        return nil
      }
      // (An offline mount shows what it holds, and nothing else: absent.)
      if pinnedWhole(dir) || options.writable || options.offline { return nil }
      throw FSError(EIO)
    })
    if let found {
      if found.isDirectory && !fromStaged { await learnFolderObject(path) }
      // Where a listing carries what a probe does, names asked about one after another (tar
      // -x over a tree that is there) are answered by the folder's listing from the second on.
      if !fromStaged && client.listsAttributes { noteProbe(in: dir) }
      return found
    }
    // The staged copies' answer is not the server's: not remembered as missing.
    if fromStaged { throw FSError(ENOENT) }
    // An alias of an object hidden behind a folder of the same name: which alias belongs to
    // which object depends on the whole folder, so ask its listing.
    if FolderNames.mayBeAlias(name) {
      let entries = try await listing(dir)
      if let i = entries.firstIndex(where: { Self.sameBytes($0.name, name) }) {
        return try await withAttributes(FolderListings.Found(entry: entries[i], index: i, entries: entries), dir: dir)
      }
    }
    missing.add(path)
    noteProbe(in: dir)
    throw FSError(ENOENT)
  }

  /// Where `name` stands in folder `dir`'s current listing, if any (no request).
  func position(dir: String, name: String) -> FolderListings.Found? { listings.position(dir: dir, name: name) }

  /// What a lookup can answer without a request: from a cached listing (when it has the
  /// entry's attributes) or a cached absence; nil when the async path must ask.
  func resolveIfCached(dir: String, name: String) -> Result<DirectoryEntry, FSError>? {
    switch listings.lookup(dir: dir, name: name) {
    case .found(let found):
      let e = found.entry
      listFoldersAhead(found, dir: dir)
      if e.isDirectory { return folderUnknown(Self.join(dir, e.name)) ? nil : .success(e) }
      if e.hasMetadata { return .success(e) }
      if let m = e.objectName.flatMap({ files.get($0) }) { return .success(e.with(m)) }
      // A v0 listing's file without attributes yet: the async path fetches them (and those of
      // the entries after it).
      return nil
    case .absent: return .failure(FSError(ENOENT))
    case .unknown, .absenceToConfirm: break
    }
    if missing.contains(Self.join(dir, name)) { return .failure(FSError(ENOENT)) }
    return nil
  }
}
