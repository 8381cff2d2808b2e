import StorageCore

/// The extended attributes of a file or folder, in the order `getfattr -d` shows them.
package enum Xattrs {
  package static func forFile(
    metadata m: StorageMetadata, gsURL: String, downloadURL: String?, staged: StagingArea.Status
  ) -> [(String, String)] {
    var out: [(String, String)] = []
    func add(_ name: String, _ value: String?) {
      if let value, !value.isEmpty { out.append(("user." + name, value)) }
    }
    add("content_type", m.contentType)
    add("size", String(m.size))
    add("generation", String(m.generation))
    add("metageneration", String(m.metageneration))
    add("md5_hash", m.md5Hash)
    add("crc32c", m.crc32c)
    add("time_created", m.timeCreated.map(StorageMetadata.formatDate))
    add("updated", m.updated.map(StorageMetadata.formatDate))
    add("cache_control", m.cacheControl)
    add("content_disposition", m.contentDisposition)
    add("content_encoding", m.contentEncoding)
    add("content_language", m.contentLanguage)
    add("download_url", downloadURL)
    add("gs_url", gsURL)
    switch staged {
    case .none: add("staged", "none")
    case .partial(let p): add("staged", "partial \(p)%")
    case .complete: add("staged", "complete")
    case .pinned: add("staged", "pinned")
    }
    for (k, v) in (m.customMetadata ?? [:]).sorted(by: { $0.key < $1.key }) { add("meta." + k, v) }
    return out
  }

  package static func forDirectory(gsURL: String) -> [(String, String)] {
    [("user.gs_url", gsURL)]
  }
}
