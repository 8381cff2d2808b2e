// The attributes of files and folders: from a listing where it carries them (GCS), else fetched
// for the entry looked up and, in the background, for the entries after it (v0 listings carry
// none, and `ls -l` asks for them one after another in listing order).
import Foundation
import StorageCore
import Synchronization

extension Namespace {
  /// The entry of a listing with its attributes: a v0 listing has none, so they are fetched now,
  /// and those of the next entries in the background, concurrently, because `ls -l` asks for
  /// them one after another in listing order.
  /// A folder's attributes are its placeholder's (`FolderObjects`), fetched the same way.
  func withAttributes(_ found: FolderListings.Found, dir: String) async throws(FSError) -> DirectoryEntry {
    let entry = found.entry
    if entry.isDirectory {
      let path = Self.join(dir, entry.name)
      guard folderUnknown(path) else { return entry }
      prefetchAttributes(following(found, dir: dir), dir: dir)
      await learnFolderObject(path)
      return entry
    }
    guard !entry.hasMetadata, let objectName = entry.objectName else { return entry }
    if let summary = files.summary(objectName) {
      var e = entry
      e.summary = summary
      return e
    }
    prefetchAttributes(following(found, dir: dir), dir: dir)
    let m = try await fileMetadata(objectName)
    listings.fill(dir: dir, objectName: objectName, m)
    return entry.with(m)
  }

  /// The objects whose attributes the entries after `found` still need: files' objects, and
  /// folders' placeholders (`dir/`).
  func following(_ found: FolderListings.Found, dir: String) -> [String] {
    found.entries[(found.index + 1)...].prefix(Self.attributeBatch).compactMap { e -> String? in
      if e.isDirectory {
        let path = Self.join(dir, e.name)
        return folderUnknown(path) ? path + "/" : nil
      }
      guard !e.hasMetadata, let name = e.objectName, files.summary(name) == nil else { return nil }
      return name
    }
  }

  /// Whether folder `path`'s attributes wait for what its placeholder is.
  func folderUnknown(_ path: String) -> Bool { options.posix && !options.offline && folders.get(path) == nil }

  /// Learns what folder `path`'s placeholder is, from the server when the mount does not know
  /// (a v0 listing carries no metadata). When it cannot tell now (the server away, offline) it
  /// stays unknown: the mount's defaults answer meanwhile, and the next lookup asks again.
  func learnFolderObject(_ path: String) async {
    guard folders.get(path) == nil, !options.offline else { return }
    do throws(BucketError) {
      folders.set(path, .object(try await client.metadata(of: path + "/")))
    } catch where error.code == .objectNotFound {
      folders.set(path, .absent)
    } catch {}
  }

  /// Fetches the attributes of `names` (a folder's placeholder for a name ending in "/") in
  /// the background, 32 at a time, each once however many lookups ask.
  func prefetchAttributes(_ names: [String], dir: String) {
    attributeFetches.withLock { inflight in
      for name in names where inflight[ObjectName(name)] == nil {
        inflight[ObjectName(name)] = Task { [self] in
          await attributeSlots.acquire()
          defer {
            attributeSlots.release()
            _ = attributeFetches.withLock { $0.removeValue(forKey: ObjectName(name)) }
          }
          if name.endsWithSlash {
            await learnFolderObject(name.withoutTrailingSlash)
            return nil
          }
          guard let m = try? await client.metadata(of: name) else { return nil }
          files.set(name, m)
          noticePinned(name, m)
          listings.fill(dir: dir, objectName: name, m)
          return m
        }
      }
    }
  }

  /// The attributes of object `objectName`.
  func fileMetadata(_ objectName: String) async throws(FSError) -> StorageMetadata {
    if let m = files.get(objectName) { return m }
    // Being fetched in the background already: that answer, unless it failed.
    if let pending = attributeFetches.withLock({ $0[ObjectName(objectName)] }), let m = await pending.value { return m }
    return try await fromServer("attributes of \(objectName)", { () async throws(BucketError) -> StorageMetadata in
      let m = try await client.metadata(of: objectName)
      files.set(objectName, m)
      noticePinned(objectName, m)
      return m
    }, orStaged: { () throws(FSError) -> StorageMetadata in
      if let m = stagedCopies()[ObjectName(objectName)] { return m }
      // As the folder's last listing had it: what a listing answered from it shows.
      let (dir, name) = Self.split(objectName)
      guard let m = lastListed(dir: dir, name: name)?.metadata else { throw FSError(ENOENT) }
      return m
    })
  }

  /// The attributes of object `objectName` as the server has them now, whatever is cached: the
  /// version a cached answer named is gone (someone else replaced it), and a new open must get
  /// the newest one rather than fail. Cached for whoever asks next.
  func latestFileMetadata(_ objectName: String) async throws(FSError) -> StorageMetadata {
    files.remove(objectName)
    return try await fromServer("attributes of \(objectName)", { () async throws(BucketError) -> StorageMetadata in
      let m = try await client.metadata(of: objectName)
      files.set(objectName, m)
      noticePinned(objectName, m)
      return m
    }, orStaged: { () throws(FSError) -> StorageMetadata in throw FSError(ESTALE) })
  }

  /// Object `name`'s metadata came from the server: a pin that keeps another version of it
  /// learns so (a v0 listing would not tell it).
  func noticePinned(_ name: String, _ m: StorageMetadata) { offline.pins.value?.noticed(client.bucketName(name), m) }
}
