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

/// Bytes done and expected, with the names of Foundation's `Progress` that SDK users read.
public struct StorageProgress: Sendable, Equatable {
  public var completedUnitCount: Int64
  /// -1 while unknown.
  public var totalUnitCount: Int64
  public var fractionCompleted: Double {
    totalUnitCount > 0 ? Double(completedUnitCount) / Double(totalUnitCount) : 0
  }
}

/// The state of a task when an event fired.
public struct StorageTaskSnapshot: Sendable {
  public let task: StorageTask
  public let reference: StorageReference
  public let metadata: StorageMetadata?
  public let progress: StorageProgress?
  public let error: StorageError?
  public let status: StorageTaskStatus
}
