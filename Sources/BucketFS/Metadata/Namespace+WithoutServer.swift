// What the mount answers when the server cannot: on an offline mount, and when the server is
// gone or does not answer. A listing is the folder's last listing from the server, else the
// pins' and staged copies' view (`OfflineView`) where a pin holds the folder whole, else EIO: never an
// empty or partial folder that looks whole. A name is looked up in the same places.
import Foundation
import StorageCore
import Synchronization

extension Namespace {
  /// A listing of folder `path`: `online`'s; on an offline mount, the staged view's; when the
  /// server is gone or does not answer, `listingWithoutServer`'s, or the server's failure (EIO)
  /// when the mount knows nothing of the folder. `unansweredThrows`: a server that stopped
  /// answering is thrown, for a caller that answers as the request's deadline does (the same).
  func listingFromServer<T>(
    _ path: String, _ online: () async throws(BucketError) -> T, else known: ([DirectoryEntry]) -> T, unansweredThrows: Bool
  ) async throws(FSError) -> T {
    if options.offline {
      // A pinned folder whose tree was never listed whole shows only what was staged of it.
      if pinnedInPart(path) { throw FSError(EIO) }
      return known(offlineListing(path))
    }
    do {
      return try await online()
    } catch {
      guard ErrnoMapping.isServerGone(error), !(unansweredThrows && error.isUnanswered) else { throw FSError(error) }
      guard let entries = listingWithoutServer(path, because: error.detail) else { throw FSError(error) }
      return known(entries)
    }
  }

  /// What a listing of folder `path` that the server could not give (`reason`) answers instead:
  /// the folder's last listing from the server however old (counted in the stats, said in the
  /// log once until the folder is listed again); else, where a pin holds the folder whole (a
  /// pinned folder or one inside it, its tree listed whole), the pins' and staged copies' view
  /// of it; else nil, and the caller answers EIO. Never the staged copies alone, nor the pins'
  /// view of a folder that holds a pin (an ancestor of a pinned folder, the folder of a pinned
  /// file): they are a part of it, and showed `mixed` of 3,000 objects as its one pinned
  /// subfolder and the root as the pinned tree's top folder, exit 0.
  func listingWithoutServer(_ path: String, because reason: @autoclosure () -> String) -> [DirectoryEntry]? {
    let shown = path.isEmpty ? "/" : path
    let first = saidFromLast.withLock { said in
      if said.count >= 1_000 { said.removeAll() }
      return said.insert(ObjectName(path)).inserted
    }
    if let last = listings.lastKnown(path) {
      listingsFromLast.add(1, ordering: .relaxed)
      if first { log("listing \(shown): \(reason()); answered from its last listing (\(last.count) entries)") }
      return last
    }
    guard staging != nil, pinnedWhole(path) else {
      if first { log("listing \(shown): \(reason()); never listed and not pinned: EIO") }
      return nil
    }
    if first { log("listing \(shown): \(reason()); answered from the pinned tree") }
    return offlineListing(path)
  }

  /// Folder `path` was listed by the server again: a later failure is said again.
  func heardAgain(_ path: String) {
    _ = saidFromLast.withLock { $0.remove(ObjectName(path)) }
  }

  /// Name `name` of folder `dir` as the folder's last listing from the server had it, when that
  /// listing knows its attributes (a folder, or a file whose attributes it carried or learned):
  /// what a lookup the server cannot answer finds. Nil when there is no such listing or entry.
  func lastListed(dir: String, name: String) -> DirectoryEntry? {
    guard let e = listings.lastKnown(dir)?.first(where: { Self.sameBytes($0.name, name) }) else { return nil }
    if e.isDirectory || e.hasMetadata { return e }
    guard let object = e.objectName, let m = files.get(object) else { return nil }
    return e.with(m)
  }

  /// What the mount last knew of `name` in folder `dir`, however old: the folder's last
  /// listing, else the server's last answer to a lookup of it (a folder found, a file's
  /// attributes). For a server that stopped answering: never "no such file" for a name it
  /// answered a moment ago.
  func lastAnswer(dir: String, name: String) -> DirectoryEntry? {
    if let listed = lastListed(dir: dir, name: name) { return listed }
    let path = Self.join(dir, name)
    if answeredFolders.contains(path) { return DirectoryEntry(name: name, isDirectory: true) }
    guard let m = files.lastKnown(path) else { return nil }
    return DirectoryEntry(name: name, isDirectory: false, objectName: path, metadata: m)
  }

  /// What the mount holds of `name` in folder `dir` when the server does not give an answer
  /// (gone, or silent past `read_timeout`): `lastAnswer`'s, else the staged copies' and pins'
  /// view (a pinned file, a folder a pinned tree is in, on the way to it), else a folder whose
  /// own listing the mount holds though its parent was never listed. Nil when it holds nothing
  /// of it. A lookup's deadline answers from here as the lookup itself does: a server killed
  /// answered `mixed` (the folder of a pin) as a folder, one frozen answered EIO.
  func heldWithoutServer(dir: String, name: String) -> DirectoryEntry? {
    if let last = lastAnswer(dir: dir, name: name) { return last }
    if staging != nil || options.offline, let staged = offline.entry(dir, name) { return staged }
    if listings.lastKnown(Self.join(dir, name)) != nil { return DirectoryEntry(name: name, isDirectory: true) }
    return nil
  }

  /// The attributes of file `objectName` the mount holds when the server does not give them:
  /// its last answer however old, else the staged copy's (a pinned file), else the folder's
  /// last listing's. Nil when it holds none (the caller answers EIO).
  func heldAttributes(_ objectName: String) -> StorageMetadata? {
    if let m = files.lastKnown(objectName) { return m }
    if staging != nil || options.offline, let m = stagedCopies()[ObjectName(objectName)] { return m }
    let (dir, name) = Self.split(objectName)
    return lastListed(dir: dir, name: name)?.metadata
  }

  /// Whether a pin holds all of folder `path` and its tree was listed whole: offline, the pins'
  /// view of it is the whole folder, which a change that needs all of it (a rename) may use.
  func pinnedWhole(_ path: String) -> Bool {
    offline.pins.value?.holdsWhole(folder: client.bucketName(path.isEmpty ? "" : path + "/")) == true
  }

  /// Whether a pin holds folder `path` but its tree was never listed whole (made offline, or not
  /// yet listed): the pins' and staged copies' view of it is a part of it, which an offline
  /// listing answers with EIO rather than show as the folder (issue 55 F5).
  func pinnedInPart(_ path: String) -> Bool {
    offline.pins.value?.holdsWhole(folder: client.bucketName(path.isEmpty ? "" : path + "/")) == false
  }

  /// `online`'s answer; on an offline mount, or when the server cannot be reached and copies
  /// are staged, `staged`'s instead.
  func fromServer<T>(
    _ what: @autoclosure () -> String, _ online: () async throws(BucketError) -> T, orStaged staged: () throws(FSError) -> T,
    unansweredThrows: Bool = false
  ) async throws(FSError) -> T {
    if options.offline { return try staged() }
    do {
      return try await online()
    } catch let serverError {
      guard ErrnoMapping.isServerGone(serverError), staging != nil, !(unansweredThrows && serverError.isUnanswered) else {
        throw FSError(serverError)
      }
      log("server unavailable (\(serverError.detail)); \(what()) from staged copies")
      do {
        return try staged()
      } catch {
        // Not staged either: the server's failure says more than "no such file".
        throw FSError(serverError)
      }
    }
  }

  func stagedCopies() -> [ObjectName: StorageMetadata] { offline.objects }

  func offlineListing(_ path: String) -> [DirectoryEntry] { offline.listing(path) }
}
