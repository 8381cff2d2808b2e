import BucketFS
import Foundation

/// `bucketfs stats MOUNTPOINT`: the mount's numbers as a short table, read from an extended
/// attribute of the mount's root (the daemon answers it; nothing else is needed).
enum StatsCommand {
  static let usage = """
    usage: bucketfs stats MOUNTPOINT

    Prints what the mount at MOUNTPOINT has done: requests to the bucket (and how many failed),
    bytes fetched, the block cache, staged copies, open files, FUSE operations, retries and
    token refreshes. The same numbers, and more, are on the -o metrics= page.
    """

  static func run(_ args: inout Arguments) throws(CommandError) -> Int32 {
    let paths = try args.positionals()
    guard paths.count == 1 else { throw .usage(usage) }
    let text = try MountAttribute.read(paths[0], BucketFilesystem.statsAttribute)
    let rows = text.split(separator: "\n").map { line -> (String, String) in
      let parts = line.split(separator: "\t", maxSplits: 1).map(String.init)
      return (parts[0], parts.count > 1 ? parts[1] : "")
    }
    let width = rows.map(\.0.count).max() ?? 0
    let table = rows.map { TerminalText.padded($0.0, to: width) + "  " + $0.1 }.joined(separator: "\n")
    FileHandle.standardOutput.write(Data((table + "\n").utf8))
    return 0
  }
}
