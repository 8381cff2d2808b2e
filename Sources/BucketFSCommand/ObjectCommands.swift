import BucketFS
import Foundation
import StorageCore

/// `ls`, `stat`, `cat`, `rm` and `url`.
enum ObjectCommands {
  static let lsUsage = """
    usage: bucketfs ls [-l] [-r] [--page-size N] gs://BUCKET[/PREFIX]
    Lists the objects and folders under PREFIX. -l adds size, updated time and content type;
    -r lists every object below PREFIX instead of one level. --page-size sets how many names each
    list request asks for (1-1000). PREFIX may hold wildcards as gsutil matches them: * (not
    across /), ** (across /), ?, [abc], [a-z], [!a]; then the matching objects and folders are
    listed (quote the URL so the shell leaves them alone).
    """

  static func ls(_ args: inout Arguments, _ client: ClientOptions) async throws(CommandError) -> Int32 {
    let long = args.flag("-l", "--long")
    let recursive = args.flag("-r", "--recursive")
    let pageSize = try args.int("--page-size")
    if let pageSize, !(1...1000).contains(pageSize) { throw .usage("--page-size takes 1-1000") }
    let urls = try args.positionals()
    guard urls.count == 1 else { throw .usage(lsUsage) }
    if let matches = try await WildcardMatches.expand(urls[0], client, objectsOnly: recursive) {
      let folders = recursive ? [] : matches.folders.map { $0 + "/" }
      return try await printListing(
        ref: matches.root, prefixes: folders, items: matches.objects, given: matches.metadata, long: long)
    }
    let ref = try await client.reference(urls[0])
    let listed: ListPage
    do {
      listed = try await ListPage.all { token async throws(StorageError) in
        try await ref.listPage(delimiter: recursive ? nil : "/", pageToken: token, maxResults: pageSize)
      }
    } catch {
      throw .storage(error)
    }
    return try await printListing(ref: ref, prefixes: listed.prefixes, items: listed.items, given: listed.metadataByName, long: long)
  }

  private static func printListing(
    ref: StorageReference, prefixes: [String], items: [String], given: [ObjectName: StorageMetadata], long: Bool
  ) async throws(CommandError) -> Int32 {
    var out = ""
    for p in Array(Set(prefixes.map { ObjectName($0) })).sorted().map({ TerminalText.visible($0.string) }) { out += long ? "\(pad("DIR", 12))  \(pad("", 24))  \(p)\n" : "\(p)\n" }
    if long {
      let metadata = try await metadata(of: items, in: ref, given: given)
      for name in items {
        guard let m = metadata[ObjectName(name)] else { continue }
        let updated = m.updated.map(StorageMetadata.formatDate) ?? "-"
        out += "\(pad(String(m.size), 12))  \(pad(updated, 24))  \(TerminalText.visible(name))  \(TerminalText.visible(m.contentType ?? "-"))\n"
      }
    } else {
      for name in items { out += "\(TerminalText.visible(name))\n" }
    }
    FileHandle.standardOutput.write(Data(out.utf8))
    return 0
  }

  private static func pad(_ s: String, _ width: Int) -> String {
    s.count >= width ? s : String(repeating: " ", count: width - s.count) + s
  }

  /// The metadata of `names`: what a listing carried (`given`: GCS lists carry each object's),
  /// and the rest fetched (v0 lists carry names only).
  static func metadata(of names: [String], in ref: StorageReference, given: [ObjectName: StorageMetadata]) async throws(CommandError)
    -> [ObjectName: StorageMetadata]
  {
    let missing = names.filter { given[ObjectName($0)] == nil }
    guard !missing.isEmpty else { return given }
    return given.merging(try await fetchMetadata(ref: ref, names: missing)) { a, _ in a }
  }

  /// Metadata of many objects, fetched concurrently (the v0 list carries names only).
  static func fetchMetadata(ref: StorageReference, names: [String], concurrency: Int = 32) async throws(CommandError)
    -> [ObjectName: StorageMetadata]
  {
    let root = ref.root()
    do {
      let pairs = try await mapConcurrently(names, limit: concurrency) { name throws(StorageError) -> (ObjectName, StorageMetadata)? in
        do throws(StorageError) {
          return (ObjectName(name), try await root.object(named: name).getMetadata())
        } catch where error.code == .objectNotFound {
          return nil  // deleted between the list and the stat
        }
      }
      return Dictionary(pairs) { a, _ in a }
    } catch {
      throw .storage(error)
    }
  }

  static let statUsage = """
    usage: bucketfs stat [--json] gs://BUCKET/OBJECT
    Prints every metadata field of the object; --json prints the metadata resource with the
    protocol's field names. With a wildcard in OBJECT, each matching object's, one after another
    (--json: a JSON array).
    """

  static func stat(_ args: inout Arguments, _ client: ClientOptions) async throws(CommandError) -> Int32 {
    let json = args.flag("--json")
    let urls = try args.positionals()
    guard urls.count == 1 else { throw .usage(statUsage) }
    if let matches = try await WildcardMatches.expand(urls[0], client, objectsOnly: true) {
      let refs = try matches.references(for: urls[0])
      let all = try await metadata(of: matches.objects, in: matches.root, given: matches.metadata)
      let found = refs.compactMap { all[ObjectName($0.fullPath)] }
      if json {
        let dicts = found.map { $0.dictionaryRepresentation() }
        let data = (try? JSONSerialization.data(withJSONObject: dicts, options: [.sortedKeys, .prettyPrinted])) ?? Data()
        FileHandle.standardOutput.write(data + Data("\n".utf8))
      } else {
        for (i, m) in found.enumerated() {
          if i > 0 { FileHandle.standardOutput.write(Data("\n".utf8)) }
          FileHandle.standardOutput.write(Data("\(TerminalText.visible("gs://\(m.bucket)/\(m.path)")):\n".utf8))
          printMetadata(m, json: false)
        }
      }
      return 0
    }
    let ref = try await client.reference(urls[0])
    let metadata: StorageMetadata
    do {
      metadata = try await ref.getMetadata()
    } catch {
      throw .storage(error)
    }
    printMetadata(metadata, json: json)
    return 0
  }

  private static func printMetadata(_ metadata: StorageMetadata, json: Bool) {
    let dict = metadata.dictionaryRepresentation()
    if json {
      let data = (try? JSONSerialization.data(withJSONObject: dict, options: [.sortedKeys, .prettyPrinted])) ?? Data()
      FileHandle.standardOutput.write(data + Data("\n".utf8))
    } else {
      // Names and custom metadata are anyone's text: escaped, as `ls` and `du` print them.
      var out = ""
      for key in dict.keys.sorted() where key != "metadata" {
        out += "\(key): \(TerminalText.visible("\(dict[key]!)"))\n"
      }
      for (k, v) in (metadata.customMetadata ?? [:]).sorted(by: { $0.key < $1.key }) {
        out += "metadata.\(TerminalText.visible(k)): \(TerminalText.visible(v))\n"
      }
      FileHandle.standardOutput.write(Data(out.utf8))
    }
  }

  static let catUsage = """
    usage: bucketfs cat gs://BUCKET/OBJECT [--range START-END]
    Writes the object's bytes (or the inclusive byte range START-END; END may be left out) to stdout.
    With a wildcard in OBJECT, every matching object's, in name order.
    """

  static func cat(_ args: inout Arguments, _ client: ClientOptions) async throws(CommandError) -> Int32 {
    let rangeText = try args.value("--range")
    let urls = try args.positionals()
    guard urls.count == 1 else { throw .usage(catUsage) }
    let refs: [StorageReference]
    if let matches = try await WildcardMatches.expand(urls[0], client, objectsOnly: true) {
      refs = try matches.references(for: urls[0])
    } else {
      refs = [try await client.reference(urls[0])]
    }
    var range: Range<Int64>? = nil
    if let rangeText {
      let parts = rangeText.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
      guard parts.count == 2, let start = Int64(parts[0]), start >= 0 else {
        throw .usage("--range takes START-END, e.g. 0-99")
      }
      if parts[1].isEmpty {
        range = start..<Int64.max
      } else {
        guard let end = Int64(parts[1]), end >= start else { throw .usage("--range END must be ≥ START") }
        range = start..<(end + 1)
      }
    }
    let out = StdoutWriter()
    for ref in refs {
      do {
        var objectRange = range
        if let r = range, r.upperBound == Int64.max {
          let size = try await ref.getMetadata().size
          objectRange = r.lowerBound..<max(r.lowerBound + 1, size)
        }
        _ = try await ref.stream(range: objectRange) { bytes in out.write(bytes) }
      } catch {
        if out.readerGone { return ExitStatus.brokenPipe }
        throw .storage(error)
      }
      if out.readerGone || out.failed { break }
    }
    // Quietly, with the status a shell shows for `cat` in the same place (128 + SIGPIPE).
    if out.readerGone { return ExitStatus.brokenPipe }
    if out.failed { throw .local("stdout", "write failed") }
    return 0
  }

  static let rmUsage = """
    usage: bucketfs rm [-r] gs://BUCKET/OBJECT
    Deletes the object; with -r, deletes every object under the prefix. With a wildcard in
    OBJECT, deletes every matching object (with -r, and everything under matching folders).
    """

  static func rm(_ args: inout Arguments, _ client: ClientOptions) async throws(CommandError) -> Int32 {
    let recursive = args.flag("-r", "--recursive")
    let urls = try args.positionals()
    guard urls.count == 1 else { throw .usage(rmUsage) }
    if let matches = try await WildcardMatches.expand(urls[0], client, objectsOnly: !recursive) {
      // The listing the wildcard was matched in holds everything under the matching folders.
      let names = recursive ? matches.objectsWithin() : matches.objects
      guard !names.isEmpty else {
        throw .storage(StorageError(code: .objectNotFound, object: urls[0], detail: "no object matches the wildcard"))
      }
      do {
        try await deleteAll(names, in: matches.root)
      } catch {
        throw .storage(error)
      }
      return 0
    }
    let ref = try await client.reference(urls[0])
    do throws(StorageError) {
      if !recursive {
        try await ref.delete()
        return 0
      }
      let names = try await ListPage.all { token async throws(StorageError) in try await ref.listPage(delimiter: nil, pageToken: token) }.items
      if names.isEmpty { throw StorageError(code: .objectNotFound, object: ref.description, detail: "no objects under this prefix") }
      try await deleteAll(names, in: ref.root())
    } catch {
      throw .storage(error)
    }
    return 0
  }

  /// Deletes `names` 16 at a time; one already gone is not an error.
  static func deleteAll(_ names: [String], in root: StorageReference) async throws(StorageError) {
    try await forEachConcurrently(names, limit: 16) { name throws(StorageError) in
      do throws(StorageError) {
        try await root.object(named: name).delete()
      } catch where error.code == .objectNotFound {}
    }
  }

  static let urlUsage = """
    usage: bucketfs url gs://BUCKET/OBJECT
    Prints the object's download URL (with its download token).
    """

  static func url(_ args: inout Arguments, _ client: ClientOptions) async throws(CommandError) -> Int32 {
    let urls = try args.positionals()
    guard urls.count == 1 else { throw .usage(urlUsage) }
    let ref = try await client.reference(urls[0])
    do {
      let url = try await ref.downloadURL()
      FileHandle.standardOutput.write(Data((url.absoluteString + "\n").utf8))
    } catch {
      throw .storage(error)
    }
    return 0
  }
}

/// Writes to stdout from the transfer thread; remembers a failed write (a closed pipe).
final class StdoutWriter: @unchecked Sendable {
  var failed = false
  /// The reader went away (`| head`): not an error to report.
  var readerGone = false
  func write(_ bytes: UnsafeRawBufferPointer) -> Bool {
    var done = 0
    while done < bytes.count {
      let n = Foundation.write(1, bytes.baseAddress! + done, bytes.count - done)
      if n < 0 {
        if errno == EINTR { continue }
        failed = true
        readerGone = errno == EPIPE
        return false
      }
      done += n
    }
    return true
  }
}
