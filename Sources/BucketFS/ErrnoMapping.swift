import Foundation
import StorageCore

/// The one place where errors become errno values.
public enum ErrnoMapping {
  public static func errno(_ error: StorageError) -> Int32 {
    switch error.code {
    case .objectNotFound, .bucketNotFound, .projectNotFound: return ENOENT
    case .unauthenticated, .unauthorized: return EACCES
    case .objectChanged, .preconditionFailed: return ESTALE
    case .nonMatchingChecksum: return EIO
    case .serverUnreachable, .timedOut, .retryLimitExceeded, .quotaExceeded: return EIO
    case .cancelled: return EINTR
    case .invalidArgument, .pathError: return EINVAL
    default: return EIO
    }
  }

  /// True when the server cannot be reached at all, so local copies should answer instead.
  public static func isServerGone(_ error: StorageError) -> Bool {
    switch error.code {
    case .serverUnreachable, .timedOut, .retryLimitExceeded: return true
    default: return false
    }
  }
}

/// A filesystem failure as an errno, for the bridge to reply with.
public struct FSError: Error, Sendable, Equatable {
  public let errno: Int32
  public init(_ errno: Int32) { self.errno = errno }
  public init(_ error: StorageError) { self.errno = ErrnoMapping.errno(error) }
}
