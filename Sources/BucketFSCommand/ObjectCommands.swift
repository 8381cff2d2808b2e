import BucketFS
import Foundation
import StorageCore

/// `ls`, `stat`, `cat`, `rm` and `url`.
enum ObjectCommands {
  static let lsUsage = """
    usage: bucketfs ls [-l] [-r] [--page-size N] gs://BUCKET[/PREFIX]
    Lists the objects and folders under PREFIX. -l adds size, updated time and content type;
    -r lists every object below PREFIX instead of one level. --page-size sets how many names each
    list request asks for (1-1000).
    """

  static func ls(_ args: inout Arguments, _ client: ClientOptions) async throws(CommandError) -> Int32 {
    let long = args.flag("-l", "--long")
    let recursive = args.flag("-r", "--recursive")
    let pageSize = try args.int("--page-size")
    if let pageSize, !(1...1000).contains(pageSize) { throw .usage("--page-size takes 1-1000") }
    let urls = try args.positionals()
    guard urls.count == 1 else { throw .usage(lsUsage) }
    let ref = try await client.reference(urls[0])
    let listed: ListPage
    do {
      listed = try await ListPage.all { token async throws(StorageError) in
        try await ref.listPage(delimiter: recursive ? nil : "/", pageToken: token, maxResults: pageSize)
      }
    } catch {
      throw .storage(error)
    }
    let (prefixes, items, given) = (listed.prefixes, listed.items, listed.metadata)
    var out = ""
    for p in Array(Set(prefixes)).sorted().map(TerminalText.visible) { out += long ? "\(pad("DIR", 12))  \(pad("", 24))  \(p)\n" : "\(p)\n" }
    if long {
      // The GCS list carries each object's metadata; the v0 list only names.
      var metadata = given
      metadata.merge(try await fetchMetadata(ref: ref, names: items.filter { given[$0] == nil })) { a, _ in a }
      for name in items {
        guard let m = metadata[name] else { continue }
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

  /// Metadata of many objects, fetched concurrently (the v0 list carries names only).
  static func fetchMetadata(ref: StorageReference, names: [String], concurrency: Int = 32) async throws(CommandError)
    -> [String: StorageMetadata]
  {
    let root = ref.root()
    do {
      let pairs = try await mapConcurrently(names, limit: concurrency) { name throws(StorageError) -> (String, StorageMetadata)? in
        do throws(StorageError) {
          return (name, try await root.object(named: name).getMetadata())
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
    protocol's field names.
    """

  static func stat(_ args: inout Arguments, _ client: ClientOptions) async throws(CommandError) -> Int32 {
    let json = args.flag("--json")
    let urls = try args.positionals()
    guard urls.count == 1 else { throw .usage(statUsage) }
    let ref = try await client.reference(urls[0])
    let metadata: StorageMetadata
    do {
      metadata = try await ref.getMetadata()
    } catch {
      throw .storage(error)
    }
    let dict = metadata.dictionaryRepresentation()
    if json {
      let data = (try? JSONSerialization.data(withJSONObject: dict, options: [.sortedKeys, .prettyPrinted])) ?? Data()
      FileHandle.standardOutput.write(data + Data("\n".utf8))
    } else {
      var out = ""
      for key in dict.keys.sorted() where key != "metadata" {
        out += "\(key): \(dict[key]!)\n"
      }
      for (k, v) in (metadata.customMetadata ?? [:]).sorted(by: { $0.key < $1.key }) {
        out += "metadata.\(k): \(v)\n"
      }
      FileHandle.standardOutput.write(Data(out.utf8))
    }
    return 0
  }

  static let catUsage = """
    usage: bucketfs cat gs://BUCKET/OBJECT [--range START-END]
    Writes the object's bytes (or the inclusive byte range START-END; END may be left out) to stdout.
    """

  static func cat(_ args: inout Arguments, _ client: ClientOptions) async throws(CommandError) -> Int32 {
    let rangeText = try args.value("--range")
    let urls = try args.positionals()
    guard urls.count == 1 else { throw .usage(catUsage) }
    let ref = try await client.reference(urls[0])
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
    do {
      if let r = range, r.upperBound == Int64.max {
        let size = try await ref.getMetadata().size
        range = r.lowerBound..<max(r.lowerBound + 1, size)
      }
      _ = try await ref.stream(range: range) { bytes in out.write(bytes) }
    } catch {
      if out.readerGone { return ExitStatus.brokenPipe }
      throw .storage(error)
    }
    // Quietly, with the status a shell shows for `cat` in the same place (128 + SIGPIPE).
    if out.readerGone { return ExitStatus.brokenPipe }
    if out.failed { throw .local("stdout", "write failed") }
    return 0
  }

  static let rmUsage = """
    usage: bucketfs rm [-r] gs://BUCKET/OBJECT
    Deletes the object; with -r, deletes every object under the prefix.
    """

  static func rm(_ args: inout Arguments, _ client: ClientOptions) async throws(CommandError) -> Int32 {
    let recursive = args.flag("-r", "--recursive")
    let urls = try args.positionals()
    guard urls.count == 1 else { throw .usage(rmUsage) }
    let ref = try await client.reference(urls[0])
    do throws(StorageError) {
      if !recursive {
        try await ref.delete()
        return 0
      }
      let names = try await ListPage.all { token async throws(StorageError) in try await ref.listPage(delimiter: nil, pageToken: token) }.items
      if names.isEmpty { throw StorageError(code: .objectNotFound, object: ref.description, detail: "no objects under this prefix") }
      let root = ref.root()
      try await forEachConcurrently(names, limit: 16) { name throws(StorageError) in
        do throws(StorageError) {
          try await root.object(named: name).delete()
        } catch where error.code == .objectNotFound {}
      }
    } catch {
      throw .storage(error)
    }
    return 0
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
