// What a writable mount shows of its own changes before the bucket has them: a name's local entry
// (an open edit, a queued upload, copy or delete) and a folder's listing with them merged in.
import Foundation
import StorageCore

extension BucketFilesystem {
  /// A name as this mount's own changes (open edits, queued changes) show it.
  enum LocalEntry {
    /// None is queued or open: the bucket's answer stands.
    case unchanged
    case removed
    case file(DirectoryEntry)
    case folder(DirectoryEntry)

    var isChanged: Bool {
      if case .unchanged = self { false } else { true }
    }
    /// What the name shows, when this mount put something there.
    var entry: DirectoryEntry? {
      switch self {
      case .file(let e), .folder(let e): e
      case .unchanged, .removed: nil
      }
    }
  }

  func localEntry(_ path: String) -> LocalEntry {
    guard let writeBack else { return .unchanged }
    let name = Namespace.split(path).name
    let file = localFileEntry(path)
    if case .file = file { return file }
    let view = writeBack.queue.view(path)
    // A folder this mount made or put something in (a queued upload under it) shows; one whose
    // placeholder it deleted, with nothing uploaded under it, does not.
    if writeBack.queue.hasUploads(under: path + "/") || !writeBack.edits.names(in: path + "/").isEmpty {
      return .folder(DirectoryEntry(name: name, isDirectory: true))
    }
    let placeholder = writeBack.queue.view(path + "/")
    if view == .deleted || placeholder == .deleted { return .removed }
    if placeholder == .folder { return .folder(DirectoryEntry(name: name, isDirectory: true)) }
    return .unchanged
  }

  /// Object `path`'s own change, a file's only (an edit, a queued upload, copy or delete): for a
  /// name the listing shows as a folder, where the object has an alias.
  func localFileEntry(_ path: String) -> LocalEntry {
    guard let writeBack else { return .unchanged }
    let name = Namespace.split(path).name
    if let edit = writeBack.edits[path] {
      return .file(localFile(name: name, path: path, size: edit.size, mtime: edit.modified, custom: edit.custom))
    }
    let view = writeBack.queue.view(path)
    if let (size, mtime) = view?.fileAttributes {
      return .file(localFile(name: name, path: path, size: size, mtime: mtime, custom: writeBack.queue.queuedMetadata(path)?.custom))
    }
    return view == .deleted ? .removed : .unchanged
  }

  private func localFile(name: String, path: String, size: Int64, mtime: Timestamp, custom: [String: String]?) -> DirectoryEntry {
    // To the millisecond, as a server's `updated` is. Made from its fields: formatting the times
    // as text and parsing them back was a tenth of a new file's cost in the daemon (every
    // getattr of a file being written asks for this).
    let when = Date(timeIntervalSince1970: (mtime.interval * 1000).rounded() / 1000)
    let metadata = StorageMetadata(
      bucket: client.bucket, path: client.bucketName(path), size: size, generation: 0, metageneration: 0, timeCreated: when,
      updated: when, md5Hash: nil, crc32c: nil, etag: nil, storageClass: nil, contentType: nil, cacheControl: nil,
      contentDisposition: nil, contentEncoding: nil, contentLanguage: nil, customMetadata: nil, downloadTokens: nil)
    // Only the POSIX and link entries and the access time, and the local file's own time to the
    // nanosecond (`updated` holds milliseconds: a rename that took the time from it moved
    // x.9996 s to the next second, and rsync sent such files again); a kept `mtime` of the
    // queued metadata would hide it.
    let posix = PosixAttributes(custom: custom)
    var shown = PosixAttributes(mode: posix.mode, uid: posix.uid, gid: posix.gid, atime: posix.atime).custom
    shown["mtime"] = KeptTime.format(mtime)
    if SymlinkObject.isLink(custom), let custom { shown.merge(custom.filter { $0.key == SymlinkObject.key || $0.key == SymlinkObject.targetKey }) { a, _ in a } }
    metadata.customMetadata = shown
    return DirectoryEntry(name: name, isDirectory: false, objectName: path, metadata: metadata)
  }

  /// Folder `dir`'s listing with this mount's own changes merged in. A listed sub-folder whose
  /// contents this mount is deleting (the bucket still has them until the queue gets there) is
  /// left out when nothing else is left in it and it has no placeholder of its own, so that
  /// `rm -r` and `mv` can remove it while a folder made with mkdir stays.
  func mergedListing(_ dir: String, _ listing: () async throws(FSError) -> [DirectoryEntry]) async throws(FSError) -> [DirectoryEntry] {
    let local = localChanges(in: dir)
    var (merged, deletedUnder) = Self.merge(try await listing(), local)
    // Listed by the bucket, touched here only by deletes: gone if nothing is left in it.
    for name in deletedUnder {
      let path = Namespace.join(dir, name)
      if try await mergedListing(path, { () async throws(FSError) in try await namespace.listing(path) }).isEmpty {
        await namespace.learnFolderObject(path)
        if namespace.folders.get(path)?.metadata == nil { merged.removeAll { $0.name == name && $0.isDirectory } }
      }
    }
    return merged
  }

  /// Whether any change of this mount (queued or being edited) is in folder `dir`.
  func hasLocalChanges(in dir: String) -> Bool { !localChanges(in: dir).isEmpty }

  /// Folder `dir`'s listing (`known`: what the mount holds of it) with this mount's own changes
  /// merged in, without asking anything; and the listed sub-folders that this mount only deleted
  /// things in (whether any is left in them takes their own listing).
  func mergedLocally(_ dir: String, _ known: () -> [DirectoryEntry]) -> (entries: [DirectoryEntry], deletedUnder: [String]) {
    let local = localChanges(in: dir)
    return Self.merge(known(), local)
  }

  /// What this mount's changes (queued or being edited) show of the names in folder `dir`: the
  /// raw name (a folder's with its "/") and its local entry. Taken before the bucket's listing
  /// is read, never after: the queue lets a change go only once the mount's caches hold the
  /// bucket's answer, so a listing read after this holds every change that left the queue
  /// meanwhile, and this every change that has not. (Read the other way round, a change that
  /// lands between the two reads would be in neither: a file just written missing from `ls`,
  /// one just deleted back in it.)
  private func localChanges(in dir: String) -> [LocalChange] {
    guard let writeBack else { return [] }
    let base = dir.isEmpty ? "" : dir + "/"
    var names = writeBack.queue.names(in: base)
    for name in writeBack.edits.names(in: base).keys { names.insert(name) }
    return names.sorted().map(\.string).compactMap { raw in
      let name = raw.withoutTrailingSlash
      guard !name.isEmpty else { return nil }
      let file = raw.endsWithSlash ? LocalEntry.unchanged : localFileEntry(base + name)
      return LocalChange(raw: raw, path: base + name, entry: localEntry(base + name), file: file)
    }
  }

  /// A name with changes of this mount: what it shows (`entry`), and, for an object's own name,
  /// what its file shows (`file`), which goes under its alias when the listing has a folder of
  /// that name.
  private struct LocalChange {
    var raw: String
    var path: String
    var entry: LocalEntry
    var file: LocalEntry
  }

  private static func merge(_ entries: [DirectoryEntry], _ local: [LocalChange]) -> (entries: [DirectoryEntry], deletedUnder: [String]) {
    guard !local.isEmpty else { return (entries, []) }
    var byName: [ObjectName: Int] = [:]
    for (i, e) in entries.enumerated() { byName[ObjectName(e.name)] = i }
    var out = entries
    var removed = Set<Int>()
    var deletedUnder: [String] = []
    for change in local {
      let (raw, entry) = (change.raw, change.entry)
      let name = raw.withoutTrailingSlash
      if !raw.endsWithSlash, let i = byName[ObjectName(name)], i < entries.count, entries[i].isDirectory {
        // The bucket's folder keeps the name; the object's change shows under its alias (the
        // one it has, else the first free one), so that the listing shows what will be uploaded.
        let alias = out.indices.first { !out[$0].isDirectory && out[$0].objectName == change.path }
        switch change.file {
        case .file(var shown):
          if let alias {
            shown.name = out[alias].name
            out[alias] = shown
            removed.remove(alias)
          } else if let free = (0..<1000).lazy.map({ FolderNames.alias(name, $0) }).first(where: { byName[ObjectName($0)] == nil }) {
            shown.name = free
            byName[ObjectName(free)] = out.count
            out.append(shown)
          }
        case .removed:
          if let alias { removed.insert(alias) }
        case .unchanged, .folder: break
        }
        continue
      }
      switch entry {
      case .file(let entry), .folder(let entry):
        if let i = byName[ObjectName(name)] {
          out[i] = entry
          removed.remove(i)
        } else {
          byName[ObjectName(name)] = out.count
          out.append(entry)
        }
      case .removed:
        if let i = byName[ObjectName(name)] { removed.insert(i) }
      case .unchanged:
        if let i = byName[ObjectName(name)], out[i].isDirectory, raw.endsWithSlash { deletedUnder.append(name) }
      }
    }
    return (out.enumerated().filter { !removed.contains($0.offset) }.map(\.element), deletedUnder)
  }
}
