import BucketFS
import StorageCore

/// Exit statuses, one per kind of failure a script may want to tell apart.
public enum ExitStatus {
  public static let ok: Int32 = 0
  public static let failure: Int32 = 1
  public static let usage: Int32 = 2
  public static let notFound: Int32 = 3
  public static let permission: Int32 = 4
  public static let unavailable: Int32 = 5
  public static let localFile: Int32 = 6
  public static let integrity: Int32 = 7
  public static let interrupted: Int32 = 130
  /// stdout's reader went away, as a shell reports a process SIGPIPE ended.
  public static let brokenPipe: Int32 = 141

  static func of(_ error: StorageError) -> Int32 {
    if error.isLocalFileFailure { return localFile }
    switch error.code {
    case .objectNotFound, .bucketNotFound, .projectNotFound: return notFound
    case .unauthenticated, .unauthorized: return permission
    case .serverUnreachable, .timedOut, .retryLimitExceeded, .quotaExceeded: return unavailable
    case .nonMatchingChecksum, .objectChanged, .preconditionFailed: return integrity
    case .invalidArgument, .bucketMismatch, .pathError: return usage
    case .cancelled: return interrupted
    default: return failure
    }
  }
}

/// A failure that ends a command: one line for stderr and an exit status.
public enum CommandError: Error, CustomStringConvertible {
  case usage(String)
  case failed(String, status: Int32)

  public var description: String {
    switch self {
    case .usage(let s): return s
    case .failed(let s, _): return s
    }
  }

  /// What goes to stderr: a failure's line with the control characters of the object names in
  /// it escaped (a name is anyone's choice); a usage text as written.
  var printable: String {
    switch self {
    case .usage(let s): return s
    case .failed(let s, _): return TerminalText.visible(s)
    }
  }

  public var status: Int32 {
    switch self {
    case .usage: return ExitStatus.usage
    case .failed(_, let status): return status
    }
  }

  static func storage(_ error: StorageError) -> CommandError {
    var line = error.description
    if (error.code == .serverUnreachable || error.code == .timedOut) && !error.detail.contains("certificate")
      && !error.detail.contains("token endpoint")
    {
      line += " (is the emulator running? see --emulator)"
    }
    return .failed(line, status: ExitStatus.of(error))
  }

  static func local(_ path: String, _ why: String) -> CommandError {
    .failed("\(path): \(why)", status: ExitStatus.localFile)
  }
}
