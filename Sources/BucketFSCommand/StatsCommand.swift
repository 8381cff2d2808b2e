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

  // Glibc's module map leaves out <sys/xattr.h>: getxattr is found at run time.
  private typealias GetXattr = @convention(c) (UnsafePointer<CChar>, UnsafePointer<CChar>, UnsafeMutableRawPointer?, Int) -> Int

  static func run(_ args: inout Arguments) throws(CommandError) -> Int32 {
    let paths = try args.positionals()
    guard paths.count == 1 else { throw .usage(usage) }
    let mountpoint = paths[0]
    guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "getxattr") else {
      throw .failed("cannot find getxattr in the C library", status: ExitStatus.failure)
    }
    let getxattr = unsafeBitCast(symbol, to: GetXattr.self)
    var buffer = [UInt8](repeating: 0, count: 64 << 10)
    let n = buffer.withUnsafeMutableBytes { getxattr(mountpoint, BucketFilesystem.statsAttribute, $0.baseAddress, $0.count) }
    guard n >= 0 else {
      let reason = errno == ENODATA || errno == ENOTSUP ? "not a bucketfs mount" : String(cString: strerror(errno))
      throw .local(mountpoint, reason)
    }
    let rows = String(decoding: buffer[0..<n], as: UTF8.self).split(separator: "\n").map { line -> (String, String) in
      let parts = line.split(separator: "\t", maxSplits: 1).map(String.init)
      return (parts[0], parts.count > 1 ? parts[1] : "")
    }
    let width = rows.map(\.0.count).max() ?? 0
    let table = rows.map { $0.0.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + $0.1 }.joined(separator: "\n")
    FileHandle.standardOutput.write(Data((table + "\n").utf8))
    return 0
  }
}
