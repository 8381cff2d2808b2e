import BucketFS
import Foundation

/// `bucketfs refresh MOUNTPOINT [PATH]`: the mount asks the server again about PATH (a folder
/// and everything under it, or a file; default the whole mount), and the kernel forgets what it
/// cached of it. The request is an extended attribute read, so read-only mounts take it too.
enum RefreshCommand {
  static let usage = """
    usage: bucketfs refresh MOUNTPOINT [PATH]

    Drops what the mount at MOUNTPOINT knows of PATH (a folder and everything under it, or a
    file; relative to MOUNTPOINT, default all of it): listings, attributes and names known to be
    missing are asked of the server again, and the kernel forgets its cached entries, so that
    objects written, replaced or deleted elsewhere show up at once instead of after
    metadata_ttl. Sending the mount SIGHUP does the same for the whole mount.
    """

  static func run(_ args: inout Arguments) throws(CommandError) -> Int32 {
    let paths = try args.positionals()
    guard paths.count == 1 || paths.count == 2 else { throw .usage(usage) }
    let mountpoint = paths[0]
    var target = mountpoint
    if paths.count == 2 {
      let relative = paths[1].hasPrefix(mountpoint + "/") ? String(paths[1].dropFirst(mountpoint.count + 1)) : paths[1]
      guard !relative.hasPrefix("/") else { throw .usage("bucketfs refresh: PATH must be inside the mount\n\n" + usage) }
      target = (mountpoint as NSString).appendingPathComponent(relative)
    }
    // The mountpoint is the one thing that must be a mount: a PATH that no longer exists there
    // is refreshed through its nearest folder that does.
    _ = try MountAttribute.read(mountpoint, BucketFilesystem.statsAttribute)
    while target != mountpoint && access(target, F_OK) != 0 { target = (target as NSString).deletingLastPathComponent }
    let answer = try MountAttribute.read(target, BucketFilesystem.refreshAttribute)
    print("refreshed \(target): \(answer.trimmingCharacters(in: .whitespacesAndNewlines))")
    return 0
  }
}
