// A request to the bucket that failed, as the filesystem sees it. StorageCore's error is the
// Firebase SDK's (an enum whose specific code, status and detail live in an NSError user-info
// dictionary); it is turned into this once, where it enters BucketFS (StorageObjectClient), and
// everything here reads plain fields.
import Foundation
import StorageCore

package struct BucketError: Error, Sendable, CustomStringConvertible {
  /// What went wrong. The names are StorageCore's, so the metrics' outcome labels stay the same.
  package enum Code: String, Sendable {
    case objectNotFound, bucketNotFound, unauthenticated, unauthorized, quotaExceeded
    /// The object is another generation than the one asked for, or that one is gone.
    case objectChanged
    /// A precondition (ifGenerationMatch) did not hold: 412.
    case preconditionFailed
    /// Nothing answers at the server's address.
    case serverUnreachable
    /// The server stopped answering (a stall), or a read ran out of `read_timeout`.
    case timedOut
    /// Retries ran out of time.
    case retryLimitExceeded
    case nonMatchingChecksum, downloadSizeExceeded, cancelled, invalidArgument, internalError
    case unknown
  }

  package let code: Code
  /// The object, as a person would name it.
  package let object: String
  /// What happened, in words a person can act on.
  package let detail: String
  /// The HTTP status of the server's answer, when there was one.
  package let httpStatus: Int?

  package init(code: Code, object: String, detail: String, httpStatus: Int? = nil) {
    self.code = code
    self.object = object
    self.detail = detail
    self.httpStatus = httpStatus
  }

  /// The one translation from StorageCore's error.
  package init(_ error: StorageError) {
    let code: Code =
      switch error.code {
      case .objectNotFound: .objectNotFound
      case .bucketNotFound, .projectNotFound: .bucketNotFound
      case .unauthenticated: .unauthenticated
      case .unauthorized: .unauthorized
      case .quotaExceeded: .quotaExceeded
      case .objectChanged: .objectChanged
      case .preconditionFailed: .preconditionFailed
      case .serverUnreachable: .serverUnreachable
      case .timedOut: .timedOut
      case .retryLimitExceeded: .retryLimitExceeded
      case .nonMatchingChecksum: .nonMatchingChecksum
      case .downloadSizeExceeded: .downloadSizeExceeded
      case .cancelled: .cancelled
      case .invalidArgument, .pathError, .bucketMismatch: .invalidArgument
      case .internalError: .internalError
      case .unknown: .unknown
      }
    self.init(code: code, object: error.object, detail: error.detail, httpStatus: error.httpStatus)
  }

  /// The server is there but gave no answer within the bound: it stalled (`timedOut`), or the
  /// retry time ran out on failures (`retryLimitExceeded`, which a stall inside it ends as).
  /// Unlike `serverUnreachable`, the server may hold what was asked for.
  package var isUnanswered: Bool { code == .timedOut || code == .retryLimitExceeded }

  package var description: String { object.isEmpty ? detail : "\(object): \(detail)" }
}

extension BucketError {
  /// Runs a StorageCore call, its error turned into a BucketError.
  static func from<T>(_ call: () async throws(StorageError) -> T) async throws(BucketError) -> T {
    do {
      return try await call()
    } catch {
      throw BucketError(error)
    }
  }
}

extension BucketError {
  /// The server has no `objects.move` (StorageCore's `moveUnsupportedStatus`): nothing changed.
  package static func moveUnsupported(_ object: String) -> BucketError {
    BucketError(code: .unknown, object: object, detail: "the server cannot move objects", httpStatus: StorageReference.moveUnsupportedStatus)
  }

  package var isMoveUnsupported: Bool { httpStatus == StorageReference.moveUnsupportedStatus }
}
