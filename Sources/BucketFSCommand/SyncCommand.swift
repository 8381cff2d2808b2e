import BucketFS
import Foundation

/// `bucketfs sync MOUNTPOINT [--timeout S]`: waits until the mount's write-back queue is empty,
/// reading it from an extended attribute of the mount's root.
enum SyncCommand {
  static let usage = """
    usage: bucketfs sync MOUNTPOINT [--timeout SECONDS]

    Waits until every change made through the writable mount at MOUNTPOINT is in the bucket
    (default: at most 600 s). Exits 0 when the queue is empty; otherwise prints what is left, one
    change a line (what, object, state, and why it waits or failed), and the queue records a
    mount found damaged and kept aside, and exits 1.
    """

  static func run(_ args: inout Arguments) throws(CommandError) -> Int32 {
    let timeout = try args.seconds("--timeout") ?? 600
    let paths = try args.positionals()
    guard paths.count == 1 else { throw .usage(usage) }
    let mountpoint = paths[0]
    let deadline = Date().addingTimeInterval(timeout)
    var lastWaiting: Int? = nil
    while true {
      // The mount answers this once the queue is empty, or after the time asked for (a few
      // seconds at most): the loop asks again until its own deadline, without polling.
      let left = max(0, min(deadline.timeIntervalSinceNow, BucketFilesystem.queueWaitLimit))
      let text: String
      do {
        text = try MountAttribute.read(mountpoint, BucketFilesystem.queueWaitPrefix + String(Int(left * 1000)))
      } catch {
        // The mount ended while this waited (it answers every wait as it stops).
        guard let lastWaiting else { throw error }
        FileHandle.standardError.write(
          Data("bucketfs sync: \(mountpoint) was unmounted with \(lastWaiting) changes waiting; the next writable mount of that folder with the same staging folder carries them out\n".utf8))
        return 1
      }
      let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
      let counts = lines.first?.split(separator: " ").compactMap { Int($0) } ?? []
      let (waiting, failed) = (counts.first ?? 0, counts.count > 1 ? counts[1] : 0)
      let damaged = counts.count > 2 ? counts[2] : 0
      // Uploads of files still open for writing go when their last writer closes, not sooner.
      let stillWritten = counts.count > 3 ? counts[3] : 0
      if waiting == 0 && failed == 0 && damaged == 0 { return 0 }
      lastWaiting = waiting
      // Failed changes do not go by themselves: no point waiting for them alone.
      if waiting <= stillWritten || Date() >= deadline {
        let left = lines.dropFirst().joined(separator: "\n")
        let kept = damaged > 0 ? ", \(damaged) damaged records kept aside" : ""
        FileHandle.standardError.write(Data("bucketfs sync: \(waiting) changes waiting, \(failed) failed\(kept)\n\(left)".utf8))
        return 1
      }
    }
  }
}
