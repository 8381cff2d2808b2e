import Foundation

/// What an observer can watch for, with the SDK's raw values.
public enum StorageTaskStatus: Int, Sendable {
  case unknown = 0
  case resume = 1
  case progress = 2
  case pause = 3
  case success = 4
  case failure = 5
}

/// The state of a task when an event fired, as the SDK's `StorageTaskSnapshot`: an immutable
/// view (its `Progress` is a fresh object that nothing changes afterwards).
public struct StorageTaskSnapshot: @unchecked Sendable, CustomStringConvertible {
  public let task: StorageTask
  public let reference: StorageReference
  /// The server's metadata once an upload completed (nil for downloads, as in the SDK).
  public let metadata: StorageMetadata?
  /// Bytes done (`completedUnitCount`) of the total (`totalUnitCount`, -1 until known).
  public let progress: Progress?
  /// The failure, as an `NSError` instance (domain `StorageErrorDomain`, code a
  /// `StorageErrorCode`), so `(snapshot.error as? NSError)?.code` works on Linux as on iOS.
  /// `storageError` is the same failure as the `StorageError` enum.
  public let error: Error?
  public let storageError: StorageError?
  public let status: StorageTaskStatus

  init(
    task: StorageTask, reference: StorageReference, metadata: StorageMetadata?, completed: Int64, total: Int64,
    error: StorageError?, status: StorageTaskStatus
  ) {
    self.task = task
    self.reference = reference
    self.metadata = metadata
    let progress = Progress(parent: nil, userInfo: nil)
    progress.totalUnitCount = total
    progress.completedUnitCount = completed
    self.progress = progress
    self.storageError = error
    self.error = error?.asNSError
    self.status = status
  }

  public var description: String {
    "StorageTaskSnapshot(\(status), \(reference), \(progress?.completedUnitCount ?? 0)/\(progress?.totalUnitCount ?? -1)"
      + (storageError.map { ", \($0)" } ?? "") + ")"
  }
}
