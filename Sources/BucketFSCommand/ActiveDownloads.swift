import Foundation
import StorageCore
import Synchronization

/// The downloads `cp` has running, so that SIGINT/SIGTERM can stop them and remove their `.part`
/// files before the process ends: an interrupted copy leaves nothing behind.
enum ActiveDownloads {
  private static let tasks = Mutex<[ObjectIdentifier: StorageDownloadTask]>([:])

  /// Starts `ref`'s download into `file`, tracked until it ends.
  static func write(_ ref: StorageReference, toFile file: URL) -> StorageDownloadTask {
    // The stored bytes, as gsutil and rclone copy them: an object stored gzip-compressed stays
    // compressed, and its size and hash are the bucket's.
    let task = ref.write(toFile: file, storedBytes: true)
    tasks.withLock { $0[ObjectIdentifier(task)] = task }
    return task
  }

  static func finished(_ task: StorageDownloadTask) {
    _ = tasks.withLock { $0.removeValue(forKey: ObjectIdentifier(task)) }
  }

  /// From now on, a termination signal cancels every tracked download, removes their partial
  /// files, and ends the process with 128 + the signal number, as a shell expects.
  static func removePartialFilesOnTermination() {
    SignalWaiter.onTermination { signal in
      let running = tasks.withLock { Array($0.values) }
      for task in running { task.cancel() }
      // A retry may have reopened its file between the cancel and now.
      for task in running { unlink(task.partialFilePath) }
      FileHandle.standardError.write(Data("bucketfs cp: interrupted; partial files removed\n".utf8))
      exit(128 + signal)
    }
  }
}
