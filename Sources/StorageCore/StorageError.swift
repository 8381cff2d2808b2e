import Foundation

/// The error domain of `StorageError` when it is seen as an `NSError`, as in the SDK.
public let StorageErrorDomain: String = "FIRStorageErrorDomain"

/// The Firebase SDK's error codes, with the SDK's numeric values. The last four are Linux
/// additions for what the SDK folds into `unknown`, because a user acts differently on them;
/// they appear only in `StorageError.code` and in the user info key
/// `StorageError.specificCodeKey`, never as an `NSError`'s code, so the SDK's `switch` still sees
/// the SDK's codes.
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
  /// Nothing listens at the address (or the name does not resolve).
  case serverUnreachable = -13100
  /// The server stopped sending for the stall timeout.
  case timedOut = -13101
  /// The object was replaced or deleted while its pinned generation was being read.
  case objectChanged = -13102
  /// A generation precondition did not hold (HTTP 412).
  case preconditionFailed = -13103

  /// The SDK's code for this one: the Linux additions are the SDK's `unknown`.
  public var sdkCode: StorageErrorCode {
    switch self {
    case .serverUnreachable, .timedOut, .objectChanged, .preconditionFailed: return .unknown
    default: return self
    }
  }
}

/// The SDK's `StorageError`: its cases, associated values, domain and codes.
///
/// Differences from the iOS SDK, all additive: `retryLimitExceeded` and `nonMatchingChecksum`
/// carry a `serverError` dictionary (the cause: the last failure, the checksums compared), and
/// every `serverError` dictionary made here also holds the keys below, read back by `code`,
/// `detail`, `object` and `httpStatus`. On Linux, `error as? NSError` succeeds only for a value
/// that *is* an `NSError`: errors handed to completion handlers and `snapshot.error` are therefore
/// `NSError`s (bridged from this enum, which stays reachable through `NSError.storageError`),
/// while async functions throw the enum itself (`error as NSError` bridges it).
public enum StorageError: Error, CustomNSError, CustomStringConvertible, @unchecked Sendable {
  case unknown(message: String, serverError: [String: Any])
  case objectNotFound(object: String, serverError: [String: Any])
  case bucketNotFound(bucket: String)
  case projectNotFound(project: String)
  case quotaExceeded(bucket: String, serverError: [String: Any])
  case unauthenticated(serverError: [String: Any])
  case unauthorized(bucket: String, object: String, serverError: [String: Any])
  case retryLimitExceeded(serverError: [String: Any])
  case nonMatchingChecksum(serverError: [String: Any])
  case downloadSizeExceeded(total: Int64, maxSize: Int64)
  case cancelled
  case invalidArgument(message: String)
  case internalError(message: String)
  case bucketMismatch(message: String)
  case pathError(message: String)

  /// User-info keys of the Linux additions.
  public static let specificCodeKey = "bucketfs.code"
  public static let detailKey = "bucketfs.detail"
  public static let objectKey = "bucketfs.object"
  /// Set when a local file failed (a destination that could not be written: a full disk).
  public static let localFileKey = "bucketfs.localFile"
  /// The keys the SDK uses for the HTTP status and body of a failed response.
  public static let responseCodeKey = "ResponseErrorCode"
  public static let responseBodyKey = "ResponseBody"
  /// Where the bridged `NSError` keeps this value.
  static let valueKey = "bucketfs.storageError"

  /// An error with a code and what a person needs to act: the case is picked from the code.
  public init(
    code: StorageErrorCode, object: String, httpStatus: Int? = nil, detail: String, serverResponse: String? = nil,
    localFile: Bool = false
  ) {
    var info: [String: Any] = [Self.detailKey: detail, Self.objectKey: object]
    if localFile { info[Self.localFileKey] = true }
    if let httpStatus { info[Self.responseCodeKey] = httpStatus }
    if let serverResponse { info[Self.responseBodyKey] = serverResponse }
    if code != code.sdkCode { info[Self.specificCodeKey] = code.rawValue }
    let (bucket, name) = Self.split(object)
    if !bucket.isEmpty { info["bucket"] = bucket }
    if !name.isEmpty { info["object"] = name }
    switch code.sdkCode {
    case .objectNotFound: self = .objectNotFound(object: name, serverError: info)
    case .bucketNotFound: self = .bucketNotFound(bucket: bucket)
    case .projectNotFound: self = .projectNotFound(project: bucket)
    case .quotaExceeded: self = .quotaExceeded(bucket: bucket, serverError: info)
    case .unauthenticated: self = .unauthenticated(serverError: info)
    case .unauthorized: self = .unauthorized(bucket: bucket, object: name, serverError: info)
    case .retryLimitExceeded: self = .retryLimitExceeded(serverError: info)
    case .nonMatchingChecksum: self = .nonMatchingChecksum(serverError: info)
    case .downloadSizeExceeded: self = .downloadSizeExceeded(total: -1, maxSize: -1)
    case .cancelled: self = .cancelled
    case .invalidArgument: self = .invalidArgument(message: Self.message(object, detail))
    case .internalError: self = .internalError(message: Self.message(object, detail))
    case .bucketMismatch: self = .bucketMismatch(message: Self.message(object, detail))
    case .pathError: self = .pathError(message: Self.message(object, detail))
    default: self = .unknown(message: Self.message(object, detail), serverError: info)
    }
  }

  private static func message(_ object: String, _ detail: String) -> String {
    object.isEmpty ? detail : "\(object): \(detail)"
  }

  /// `gs://bucket/object` → (bucket, object).
  private static func split(_ object: String) -> (String, String) {
    guard object.hasPrefix("gs://") else { return ("", "") }
    // By bytes: a "/" and a combining mark after it are one `Character`.
    let rest = object.droppingBytes(5)
    guard let slash = rest.utf8.firstIndex(of: UInt8(ascii: "/")) else { return (rest, "") }
    return (String(decoding: rest.utf8[..<slash], as: UTF8.self), String(decoding: rest.utf8[rest.utf8.index(after: slash)...], as: UTF8.self))
  }

  /// True when the failure is a local file's (the object and the server were fine).
  public var isLocalFileFailure: Bool { serverError[Self.localFileKey] as? Bool ?? false }

  /// The dictionary a case carries (empty for the cases that carry none).
  public var serverError: [String: Any] {
    switch self {
    case .unknown(_, let s), .objectNotFound(_, let s), .quotaExceeded(_, let s), .unauthenticated(let s),
      .unauthorized(_, _, let s), .retryLimitExceeded(let s), .nonMatchingChecksum(let s):
      return s
    default:
      return [:]
    }
  }

  /// The specific code: the SDK's, or one of the Linux additions (`timedOut`, …).
  public var code: StorageErrorCode {
    if let raw = serverError[Self.specificCodeKey] as? Int, let code = StorageErrorCode(rawValue: raw) { return code }
    return StorageErrorCode(rawValue: errorCode) ?? .unknown
  }

  /// What happened, in words a person can act on.
  public var detail: String {
    if let detail = serverError[Self.detailKey] as? String { return detail }
    switch self {
    case .downloadSizeExceeded(let total, let maxSize):
      return total >= 0 ? "the object is \(total) bytes, over the \(maxSize)-byte limit" : "the object is larger than the \(maxSize)-byte limit"
    case .cancelled: return "cancelled"
    case .bucketNotFound(let bucket): return "bucket \(bucket) does not exist"
    case .projectNotFound(let project): return "project \(project) does not exist"
    case .invalidArgument(let m), .internalError(let m), .bucketMismatch(let m), .pathError(let m): return m
    case .unknown(let m, _): return m
    default: return Self.sdkDescription(self)
    }
  }

  /// `gs://bucket/object` (or the bucket) the failed call was about; empty when unknown.
  public var object: String {
    if let object = serverError[Self.objectKey] as? String { return object }
    if case .bucketNotFound(let bucket) = self { return "gs://\(bucket)" }
    return ""
  }

  /// The HTTP status, when the server answered.
  public var httpStatus: Int? { serverError[Self.responseCodeKey] as? Int }

  /// The start of the server's answer, when it sent one.
  public var serverResponse: String? { serverError[Self.responseBodyKey] as? String }

  public var description: String { object.isEmpty ? detail : "\(object): \(detail)" }

  // MARK: CustomNSError

  public static var errorDomain: String { StorageErrorDomain }

  /// Always one of the SDK's codes.
  public var errorCode: Int {
    switch self {
    case .unknown: return StorageErrorCode.unknown.rawValue
    case .objectNotFound: return StorageErrorCode.objectNotFound.rawValue
    case .bucketNotFound: return StorageErrorCode.bucketNotFound.rawValue
    case .projectNotFound: return StorageErrorCode.projectNotFound.rawValue
    case .quotaExceeded: return StorageErrorCode.quotaExceeded.rawValue
    case .unauthenticated: return StorageErrorCode.unauthenticated.rawValue
    case .unauthorized: return StorageErrorCode.unauthorized.rawValue
    case .retryLimitExceeded: return StorageErrorCode.retryLimitExceeded.rawValue
    case .nonMatchingChecksum: return StorageErrorCode.nonMatchingChecksum.rawValue
    case .downloadSizeExceeded: return StorageErrorCode.downloadSizeExceeded.rawValue
    case .cancelled: return StorageErrorCode.cancelled.rawValue
    case .invalidArgument: return StorageErrorCode.invalidArgument.rawValue
    case .internalError: return StorageErrorCode.internalError.rawValue
    case .bucketMismatch: return StorageErrorCode.bucketMismatch.rawValue
    case .pathError: return StorageErrorCode.pathError.rawValue
    }
  }

  public var errorUserInfo: [String: Any] {
    var info = serverError
    info[NSLocalizedDescriptionKey] = Self.sdkDescription(self)
    if let detail = serverError[Self.detailKey] as? String {
      info[NSLocalizedFailureReasonErrorKey] = detail
    }
    if case .downloadSizeExceeded(let total, let maxSize) = self {
      info["totalSize"] = total
      info["maxAllowedSize"] = maxSize
    }
    if code != code.sdkCode { info[Self.specificCodeKey] = code.rawValue }
    return info
  }

  /// The SDK's sentence for each case.
  static func sdkDescription(_ error: StorageError) -> String {
    switch error {
    case .unknown(let message, _): return message
    case .objectNotFound(let object, _): return "Object \(object) does not exist."
    case .bucketNotFound(let bucket): return "Bucket \(bucket) does not exist."
    case .projectNotFound(let project): return "Project \(project) does not exist."
    case .quotaExceeded(let bucket, _):
      return "Quota for bucket \(bucket) exceeded, please view quota on firebase.google.com."
    case .unauthenticated:
      return "User is not authenticated, please authenticate using Firebase Authentication and try again."
    case .unauthorized(let bucket, let object, _): return "User does not have permission to access gs://\(bucket)/\(object)."
    case .retryLimitExceeded: return "Max retry time for operation exceeded, please try again."
    case .nonMatchingChecksum:
      return "The object's checksum does not match the server's checksum. Please retry the upload/download."
    case .downloadSizeExceeded(let total, let maxSize):
      return "Attempted to download object with size of \(total) bytes, which exceeds the maximum size of \(maxSize) bytes. "
        + "Consider raising the maximum download maxSize, or using StorageReference.write"
    case .cancelled: return "User cancelled the upload/download."
    case .invalidArgument(let m), .internalError(let m), .bucketMismatch(let m), .pathError(let m): return m
    }
  }

  /// This error as the SDK hands errors to completion handlers and snapshots: an `NSError`
  /// instance (so `error as? NSError` works on Linux too) that keeps this value.
  public var asNSError: NSError {
    var info = errorUserInfo
    info[Self.valueKey] = StorageErrorBox(self)
    return NSError(domain: StorageErrorDomain, code: errorCode, userInfo: info)
  }

  /// A copy with another code and detail, keeping the object, status and response.
  func replacing(code: StorageErrorCode, detail: String) -> StorageError {
    StorageError(code: code, object: object, httpStatus: httpStatus, detail: detail, serverResponse: serverResponse)
  }

  // MARK: the mapping from HTTP and the transport

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
    case .unauthenticated: detail = "not authenticated (HTTP 401): check the credentials"
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

  /// A read pinned to generation `expected` was answered with another one's bytes.
  static func objectChanged(_ object: String, from expected: Int64?, to served: Int64) -> StorageError {
    StorageError(code: .objectChanged, object: object, detail: "the object changed on the server (generation \(expected ?? 0) → \(served))")
  }

  /// A read pinned to `generation` found it gone (404).
  static func generationGone(_ object: String, _ generation: Int64) -> StorageError {
    StorageError(
      code: .objectChanged, object: object, httpStatus: 404, detail: "generation \(generation) of the object is gone (overwritten or deleted)")
  }

  /// A body that ended before the bytes it announced.
  static func shortBody(_ object: String, received: Int64, of expected: Int64) -> StorageError {
    StorageError(code: .unknown, object: object, detail: "short body: \(received) of \(expected) bytes")
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
      return .cancelled
    case .connectionLost:
      return StorageError(
        code: .retryLimitExceeded, object: object,
        detail: "the connection kept failing (\(transport.message))")
    case .bodyTooLarge:
      return StorageError(code: .downloadSizeExceeded, object: object, detail: transport.message)
    case .certificate:
      return StorageError(
        code: .serverUnreachable, object: object,
        detail: "TLS certificate verification failed (\(transport.message)): the server's certificate is not signed by a trusted CA; name the right CA bundle with --ca-file or SSL_CERT_FILE")
    case .local, .other:
      return StorageError(code: .unknown, object: object, detail: transport.message)
    }
  }
}

/// Carries a `StorageError` inside an `NSError`'s user info.
final class StorageErrorBox: NSObject, @unchecked Sendable {
  let value: StorageError
  init(_ value: StorageError) { self.value = value }
}

extension NSError {
  /// The `StorageError` this error was bridged from, when it was one.
  public var storageError: StorageError? {
    (userInfo[StorageError.valueKey] as? StorageErrorBox)?.value
  }
}

extension Error {
  /// This error as a `StorageError`: the value itself, or the one an `NSError` from a
  /// completion handler or a snapshot carries.
  public var asStorageError: StorageError? {
    if let error = self as? StorageError { return error }
    return (self as? NSError)?.storageError
  }
}
