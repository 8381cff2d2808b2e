/// `bucketfs mount` (the mount issue fills this in).
enum MountCommand {
  static let usage = "usage: bucketfs mount gs://BUCKET[/PREFIX] MOUNTPOINT [-f] [-d] [-o OPT,...]"
  static func run(_ args: inout Arguments, environment: [String: String]) throws(CommandError) -> Int32 {
    throw .usage("mount is not available yet")
  }
}
