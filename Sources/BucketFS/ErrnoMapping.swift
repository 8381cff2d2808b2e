import Foundation
import StorageCore

/// The one place where errors become errno values.
package enum ErrnoMapping {
  package static func errno(_ error: BucketError) -> Int32 {
    switch error.code {
    case .objectNotFound, .bucketNotFound: return ENOENT
    case .unauthenticated, .unauthorized: return EACCES
    case .objectChanged, .preconditionFailed: return ESTALE
    case .nonMatchingChecksum: return EIO
    case .serverUnreachable, .timedOut, .retryLimitExceeded, .quotaExceeded: return EIO
    case .cancelled: return EINTR
    case .invalidArgument: return EINVAL
    default: return EIO
    }
  }

  /// True when the server cannot be reached at all, so local copies should answer instead.
  package static func isServerGone(_ error: BucketError) -> Bool {
    switch error.code {
    case .serverUnreachable, .timedOut, .retryLimitExceeded: return true
    default: return false
    }
  }
}

/// A filesystem failure as an errno, for the bridge to reply with, and what caused it, for the
/// one log line the bridge writes about a failed operation.
package struct FSError: Error, Sendable, Equatable {
  package let errno: Int32
  /// The server's or the transport's failure, naming the object; nil for plain answers.
  package let cause: BucketError?
  package init(_ errno: Int32) {
    self.errno = errno
    cause = nil
  }
  package init(_ error: BucketError) {
    errno = ErrnoMapping.errno(error)
    cause = error
  }
  /// Equal when the errno is: the kernel sees nothing else.
  package static func == (a: FSError, b: FSError) -> Bool { a.errno == b.errno }
}
