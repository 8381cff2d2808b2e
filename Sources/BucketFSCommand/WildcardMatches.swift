import BucketFS
import Foundation
import StorageCore

/// The objects (and, for `ls`, the folders) a wildcard URL names: the bucket is listed from the
/// folder the pattern's literal part ends in, and each name is matched whole.
struct WildcardMatches {
  let root: StorageReference
  /// Matching object names, in the bucket's order.
  let objects: [String]
  /// Folders (`a/b`, shown `a/b/`) whose name matches: what `ls gs://b/dir*` shows beside objects.
  let folders: [String]
  /// The metadata the listing carried (GCS lists carry it; v0 lists names only).
  let metadata: [ObjectName: StorageMetadata]
  /// Every name the listing the wildcard was matched in holds.
  let listed: [String]

  /// Nil when `url`'s object part has no wildcard, or when it matches nothing: then it names an
  /// object literally (`photo[1].jpg`, which `[1]` would not match), as before wildcards.
  /// `objectsOnly`: folders are not wanted, so over the GCS API the server filters the names
  /// (`matchGlob`, the same syntax) and the listing carries only matches.
  static func expand(_ url: String, _ client: ClientOptions, objectsOnly: Bool = false) async throws(CommandError) -> WildcardMatches? {
    // An http(s) URL (a download URL, an API URL) names one object, its name percent-encoded:
    // a `?`, `*` or `[` in it is the name's own, which the user encoded to say so.
    if url.contains("://") && !url.hasPrefix("gs://") { return nil }
    let ref = try await client.reference(url)
    guard let pattern = ObjectPattern(ref.fullPath) else { return nil }
    let root = ref.root()
    let literal = pattern.literalPrefix
    let folder = literal.utf8.lastIndex(of: UInt8(ascii: "/")).map { String(decoding: literal.utf8[..<$0], as: UTF8.self) } ?? ""
    let base = folder.isEmpty ? root : root.object(named: folder)
    // matchGlob has `{a,b}` and escapes, which ObjectPattern takes literally: not sent then.
    let glob = objectsOnly && !ref.fullPath.contains(where: { "{}\\".contains($0) }) ? ref.fullPath : nil
    func list(_ glob: String?) async throws(StorageError) -> ListPage {
      try await ListPage.all { token async throws(StorageError) in
        try await base.listPage(delimiter: nil, pageToken: token, maxResults: nil, matchGlob: glob)
      }
    }
    let listed: ListPage
    do {
      do {
        listed = try await list(glob)
      } catch where glob != nil && error.code == .unknown {
        // The server takes some names for globs it cannot read (a `[` never closed, which is
        // itself here): the names are matched here instead.
        listed = try await list(nil)
      }
    } catch {
      throw .storage(error)
    }
    let objects = listed.items.filter { !$0.endsWithSlash && pattern.matches($0) }
    var folders = Set<ObjectName>()
    for name in listed.items where !objectsOnly {
      // By bytes: "/" and a combining mark after it are one `Character`, not a "/".
      var path = name.utf8[...]
      while let slash = path.lastIndex(of: UInt8(ascii: "/")) {
        path = path[..<slash]
        if path.count < folder.utf8.count { break }
        let candidate = String(decoding: path, as: UTF8.self)
        if pattern.matches(candidate) { folders.insert(ObjectName(candidate)) }
      }
    }
    if objects.isEmpty && folders.isEmpty { return nil }
    return WildcardMatches(root: root, objects: objects, folders: folders.sorted().map(\.string), metadata: listed.metadataByName, listed: listed.items)
  }

  /// The matching objects and every object under a matching folder (`rm -r`), in name order.
  func objectsWithin() -> [String] {
    let under = folders.map { $0 + "/" }
    let all = objects + listed.filter { name in under.contains { name.hasBytePrefix($0) } }
    return Array(Set(all.map { ObjectName($0) })).sorted().map(\.string)
  }

  /// The last names the matches take in folder `dst`; refused before anything is copied when
  /// two would be the same file there.
  static func distinctLastNames(_ refs: [StorageReference], into dst: String) throws(CommandError) -> [String] {
    let names = refs.map(\.name)
    if let twice = Dictionary(grouping: names, by: { ObjectName($0) }).first(where: { $0.value.count > 1 }) {
      throw .usage("\(TerminalText.visible(twice.key.string)) matches more than once: the copies would overwrite each other in \(dst)")
    }
    return names
  }

  /// The matches as references, or a `no such object` error naming the pattern when none.
  func references(for url: String) throws(CommandError) -> [StorageReference] {
    guard !objects.isEmpty else {
      throw .storage(StorageError(code: .objectNotFound, object: url, detail: "no object matches the wildcard"))
    }
    return objects.map { root.object(named: $0) }
  }
}
