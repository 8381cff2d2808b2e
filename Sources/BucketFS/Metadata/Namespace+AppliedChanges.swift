// A change this mount made reached the bucket: the listings and caches learn the bucket as it is
// now, in place, instead of asking the server again.
import Foundation
import StorageCore
import Synchronization

extension Namespace {
  /// A change made through the mount reached the bucket: what is cached of the name and its
  /// folder gives way to the bucket as it is now.
  func applied(_ change: PendingChange, _ metadata: StorageMetadata?) {
    let isFolder = change.name.endsWithSlash
    let path = change.name.withoutTrailingSlash
    let (dir, name) = Self.split(path)
    missing.remove(path)
    files.remove(path)
    switch change.life {
    case .done(.unknown), .failed:
      // Not applied (what it was based on changed; a rename's copy or delete refused): the
      // listing must not show what the change would have left. List again.
      return listings.remove(dir)
    default: break
    }
    if let conflict = change.conflictName {
      // The name holds someone else's version, whose attributes we do not have: list again.
      missing.remove(conflict)
      listings.remove(dir)
      return
    }
    switch (change.kind, isFolder) {
    case (.upload, true), (.metadata, true):
      if let metadata { folders.set(path, .object(metadata)) }
      listings.update(dir, name: name, entry: DirectoryEntry(name: name, isDirectory: true))
    case (.upload, false), (.copy, _), (.metadata, _):
      guard let metadata else { return listings.remove(dir) }
      files.set(path, metadata)
      // A file beside a folder of its name shows under an alias: that entry learns the new
      // version (the folder's entry is not the file's).
      guard let shown = listings.shownName(dir: dir, name: name, objectName: path) else { return listings.remove(dir) }
      listings.update(dir, name: shown, entry: DirectoryEntry(name: shown, isDirectory: false, objectName: path, metadata: metadata))
    case (.delete, false):
      guard let shown = listings.shownName(dir: dir, name: name, objectName: path) else { return listings.remove(dir) }
      listings.update(dir, name: shown, entry: nil)
    case (.delete, true):
      listings.update(dir, name: name, entry: nil)
      if isFolder {
        listings.remove(path)
        folders.set(path, .absent)
      }
    }
  }
}
