import Foundation

/// The Firebase SDK's error codes, with the SDK's numeric values.
public enum StorageErrorCode: Int, Sendable {
  case unknown = -13000
  case objectNotFound = -13010
  case bucketNotFound = -13011
  case projectNotFound = -13012
  case quotaExceeded = -13013
  case unauthenticated = -13020
  case unauthorized = -13021
  case retryLimitExceeded = -13030
  case nonMatchingChecksum = -13031
  case downloadSizeExceeded = -13032
  case cancelled = -13040
  case invalidArgument = -13050
  case bucketMismatch = -13051
  case internalError = -13052
  case pathError = -13053
  // Codes of our own for what the SDK folds into `unknown`, because a user acts differently on them.
  case serverUnreachable = -13100
  case timedOut = -13101
  case objectChanged = -13102
  case preconditionFailed = -13103
}

/// An error from the storage API: a code a program can switch on, and what a person needs to act.
public struct StorageError: Error, Sendable, CustomStringConvertible, Equatable {
  public var code: StorageErrorCode
  /// `gs://bucket/object` (or the bucket) the failed call was about.
  public var object: String
  /// HTTP status when the server answered, otherwise nil.
  public var httpStatus: Int?
  /// The cause, in words.
  public var detail: String
  public var serverResponse: String?

  public init(
    code: StorageErrorCode, object: String, httpStatus: Int? = nil, detail: String,
    serverResponse: String? = nil
  ) {
    self.code = code
    self.object = object
    self.httpStatus = httpStatus
    self.detail = detail
    self.serverResponse = serverResponse
  }

  public var description: String { "\(object): \(detail)" }

  /// The one mapping from an HTTP status to the SDK's error code.
  public static func code(forStatus status: Int) -> StorageErrorCode {
    switch status {
    case 401: return .unauthenticated
    case 402: return .quotaExceeded
    case 403: return .unauthorized
    case 404: return .objectNotFound
    case 409: return .nonMatchingChecksum
    case 412: return .preconditionFailed
    default: return .unknown
    }
  }

  static func from(status: Int, object: String, body: Data) -> StorageError {
    let code = code(forStatus: status)
    let detail: String
    switch code {
    case .unauthenticated: detail = "not authenticated (HTTP 401): check the token file"
    case .unauthorized: detail = "permission denied (HTTP 403)"
    case .objectNotFound: detail = "no such object (HTTP 404)"
    case .quotaExceeded: detail = "quota exceeded (HTTP 402)"
    case .preconditionFailed: detail = "the object's generation did not match (HTTP 412)"
    case .nonMatchingChecksum: detail = "the server reported a conflict (HTTP 409)"
    default: detail = "unexpected HTTP \(status) from the server"
    }
    let text = String(decoding: body.prefix(512), as: UTF8.self)
    return StorageError(
      code: code, object: object, httpStatus: status, detail: detail,
      serverResponse: text.isEmpty ? nil : text)
  }

  static func from(transport: TransportError, object: String) -> StorageError {
    switch transport.kind {
    case .unreachable:
      return StorageError(
        code: .serverUnreachable, object: object, detail: "server unreachable (\(transport.message))")
    case .timedOut:
      return StorageError(
        code: .timedOut, object: object, detail: "the server stopped answering (\(transport.message))")
    case .cancelled:
      return StorageError(code: .cancelled, object: object, detail: "cancelled")
    case .connectionLost:
      return StorageError(
        code: .retryLimitExceeded, object: object,
        detail: "the connection kept failing (\(transport.message))")
    case .bodyTooLarge:
      return StorageError(code: .downloadSizeExceeded, object: object, detail: transport.message)
    case .local, .other:
      return StorageError(code: .unknown, object: object, detail: transport.message)
    }
  }
}
