// Folder changes on a bucket with a hierarchical namespace (HNS), where a folder is a resource of
// its own: a folder rename is one `folders.rename` on the server, awaited within the FUSE rename,
// and an rmdir asks the server whether the folder is empty. mkdir and a queued rmdir need nothing
// here: the queue's worker makes and deletes the folder resource with the placeholder
// (`ChangeWorker`), so they keep the queue's order, work offline and last through kill -9.
//
// The one-step rename is taken only when nothing of this mount is still to reach the server under
// either name: no queued change (an upload, a delete, a chmod, a rename, refused ones too) and no
// file open for writing. Such a change names an object by the path it had when it was queued; a
// rename on the server would move the object from under it (a queued delete would miss it, a
// queued upload would land under the old name and bring the old folder back). Waiting for those
// changes to land first would tie the rename to the network (a queued 1 GiB upload, a server
// away) inside a FUSE request; the per-object rename (`renameFolder`) queues its moves behind
// them in order instead, works offline and resumes after kill -9, so the mount falls back to it.
import Foundation
import StorageCore

extension BucketFilesystem {
  /// How a one-step folder rename on the server went.
  enum ServerFolderRename {
    /// Done: the server holds everything under the new name.
    case renamed
    /// Not tried, or refused before anything moved: rename object by object.
    case perObject
  }

  /// Renames folder `source` to `target` (which does not exist) in one `folders.rename` when the
  /// bucket is hierarchical, the server is there and nothing of this mount waits under either
  /// name; else answers `.perObject`. A failure after which the server may have renamed the
  /// folder (no answer) is EIO, with both names asked of the server again.
  func renameFolderOnServer(_ source: String, to target: String, _ writeBack: WriteBack) async throws(FSError) -> ServerFolderRename {
    guard !options.offline, (try? await client.foldersAreResources()) == true else { return .perObject }
    let (from, to) = (source + "/", target + "/")
    if writeBack.queue.hasQueued(under: from) || writeBack.queue.hasQueued(under: to) || writeBack.edits.anyOpen(under: from) {
      return .perObject
    }
    // A target another client made since the mount looked is merged into, object by object (a
    // refused rename would be taken for a retried one, and waited on).
    guard (try? await client.folderExists(to)) == false else { return .perObject }
    do throws(BucketError) {
      try await client.renameFolder(from, to: to)
    } catch where error.code == .serverUnreachable {
      // The server cannot be reached: the queue carries the rename out when it can. Should an
      // earlier try have reached it after all, each queued move finds its object moved, and is
      // done (`ChangeWorker`: a move whose source is gone and whose target holds its bytes).
      return .perObject
    } catch where error.httpStatus.map({ (400..<500).contains($0) }) == true {
      // Refused, nothing moved: no such folder resource (a folder only a placeholder made, on a
      // server that made no folder for it), or the target there after all.
      log("rename \(source.debugDescription): the server refused folders.rename (\(error.detail)); renaming object by object")
      return .perObject
    } catch {
      log("rename \(source.debugDescription) to \(target.debugDescription): \(error.detail); both are asked of the server again")
      forgetRenamed(source, target)
      namespace.listings.remove(Namespace.split(source).dir)
      namespace.listings.remove(Namespace.split(target).dir)
      throw FSError(error)
    }
    // Done: what was known under both names goes, and the parents' listings change in place
    // (a large parent is not listed again for one name).
    forgetRenamed(source, target)
    posixChanges.moveFolders(source, to: target)
    inodes.move(prefix: source, to: target)
    let (sourceDir, sourceName) = Namespace.split(source)
    let (targetDir, targetName) = Namespace.split(target)
    namespace.listings.update(sourceDir, name: sourceName, entry: nil)
    namespace.listings.update(targetDir, name: targetName, entry: DirectoryEntry(name: targetName, isDirectory: true))
    namespace.missing.remove(target)
    return .renamed
  }

  /// What the mount knew under either name goes: the server is asked again.
  private func forgetRenamed(_ source: String, _ target: String) {
    namespace.forget(under: source)
    namespace.forget(under: target)
  }

  /// On a hierarchical bucket, whether folder `path` holds anything on the server now, asked of
  /// the server rather than of a listing kept for `metadata_ttl`: another client may have put
  /// something in it since, and the server would keep the folder anyway (it refuses to delete
  /// one that is not empty), so rmdir answers ENOTEMPTY as the server would. Not asked where it
  /// cannot say: offline, with the server away, or with this mount's changes still queued there
  /// (the queued deletes are what will empty it); the queued delete then meets the server's word.
  func holdsMoreOnServer(_ path: String, _ writeBack: WriteBack) async -> Bool {
    guard !options.offline, client.knownFoldersAreResources == true, !writeBack.queue.hasQueued(under: path + "/") else { return false }
    guard let entries = try? await namespace.fetchCurrentListing(path) else { return false }
    return !entries.isEmpty
  }
}
