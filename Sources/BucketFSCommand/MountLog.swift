import BucketFS
import Foundation

/// The mount's log: one line per event with the object and the cause, filtered by level, as text
/// (`bucketfs[PID]: …`, with a timestamp unless systemd's journal adds its own) or as JSON lines
/// for log shippers. It goes to standard error (the log file of a background mount).
struct MountLog: Sendable {
  enum Level: Int, Comparable, Sendable {
    case error = 0, warn, info, debug
    static func < (a: Level, b: Level) -> Bool { a.rawValue < b.rawValue }
    var name: String { ["error", "warn", "info", "debug"][rawValue] }
    init?(name: String) {
      switch name {
      case "error": self = .error
      case "warn", "warning": self = .warn
      case "info": self = .info
      case "debug": self = .debug
      default: return nil
      }
    }
  }

  let level: Level
  let json: Bool
  /// Under systemd (JOURNAL_STREAM or INVOCATION_ID set), the journal stamps each line.
  let underSystemd: Bool

  init(level: Level, json: Bool, environment: [String: String]) {
    self.level = level
    self.json = json
    underSystemd = environment["JOURNAL_STREAM"] != nil || environment["INVOCATION_ID"] != nil
  }

  func write(_ level: Level, _ message: String) {
    guard level <= self.level else { return }
    let line: String
    if json {
      let object: [String: Any] = [
        "time": ISO8601DateFormatter().string(from: Date()), "level": level.name, "pid": Int(getpid()), "message": message,
      ]
      let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
      line = String(decoding: data, as: UTF8.self)
    } else if underSystemd {
      line = "\(level.name): \(TerminalText.oneLine(message))"
    } else {
      line = "\(ISO8601DateFormatter().string(from: Date())) bucketfs[\(getpid())] \(level.name): \(TerminalText.oneLine(message))"
    }
    FileHandle.standardError.write(Data((line + "\n").utf8))
  }
}
