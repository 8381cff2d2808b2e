import BucketFS
import Foundation
import StorageCore

/// `bucketfs du`: the bytes objects take, as `gsutil du` counts them.
enum DiskUsageCommand {
  static let usage = """
    usage: bucketfs du [-s] [-c] [-h] gs://BUCKET[/PREFIX]
    Prints the size of every object under PREFIX (or matching a wildcard in it), one line each:
    SIZE and the gs:// URL. -s prints one line, the total; -c adds the total at the end; -h
    prints sizes in KiB, MiB, GiB.
    """

  static func run(_ args: inout Arguments, _ client: ClientOptions) async throws(CommandError) -> Int32 {
    let summarize = args.flag("-s", "--summarize")
    let total = args.flag("-c", "--total")
    let human = args.flag("-h", "--human-readable")
    let urls = try args.positionals()
    guard urls.count == 1 else { throw .usage(usage) }
    let root: StorageReference
    var names: [String]
    var given: [ObjectName: StorageMetadata]
    if let matches = try await WildcardMatches.expand(urls[0], client, objectsOnly: true) {
      root = matches.root
      names = matches.objects
      given = matches.metadata
    } else {
      let ref = try await client.reference(urls[0])
      root = ref.root()
      let listed: ListPage
      do {
        listed = try await ListPage.all { token async throws(StorageError) in try await ref.listPage(delimiter: nil, pageToken: token) }
      } catch {
        throw .storage(error)
      }
      names = listed.items
      given = listed.metadataByName
      // A name that is an object rather than a prefix counts itself.
      if names.isEmpty && !ref.fullPath.isEmpty {
        if let m = try? await ref.getMetadata() {
          names = [ref.fullPath]
          given[ObjectName(ref.fullPath)] = m
        }
      }
    }
    let sizes = try await ObjectCommands.metadata(of: names, in: root, given: given).mapValues(\.size)
    let bucket = root.bucket
    var out = ""
    var sum: Int64 = 0
    for name in names {
      guard let size = sizes[ObjectName(name)] else { continue }
      sum += size
      if !summarize { out += "\(format(size, human))  \(TerminalText.visible("gs://\(bucket)/\(name)"))\n" }
    }
    if summarize {
      out += "\(format(sum, human))  \(TerminalText.visible(urls[0]))\n"
    } else if total {
      out += "\(format(sum, human))  total\n"
    }
    FileHandle.standardOutput.write(Data(out.utf8))
    return 0
  }

  static func format(_ bytes: Int64, _ human: Bool) -> String {
    guard human, bytes >= 1024 else { return human ? "\(bytes) B" : String(bytes) }
    let units = ["KiB", "MiB", "GiB", "TiB", "PiB"]
    var value = Double(bytes) / 1024
    var unit = 0
    while value >= 1024 && unit < units.count - 1 {
      value /= 1024
      unit += 1
    }
    return String(format: "%.2f %@", value, units[unit])
  }
}
