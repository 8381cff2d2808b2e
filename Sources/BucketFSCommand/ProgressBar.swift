import BucketFS
import Foundation
import Synchronization

/// A one-line progress bar on stderr (bytes, rate, ETA), drawn only when stderr is a terminal.
final class ProgressBar: Sendable {
  private let label: String
  private let enabled: Bool
  private let started = Date()
  private let lastDraw = Mutex(Date.distantPast)

  init(label: String, force: Bool = false) {
    self.label = TerminalText.visible(label)
    self.enabled = force || isatty(2) == 1
  }

  /// `detail`: shown after the label (a count of files, say).
  func update(done: Int64, total: Int64, detail: String = "") {
    guard enabled else { return }
    let now = Date()
    // One drawing per 0.1 s, claimed under the lock; the line is written outside it.
    let due = lastDraw.withLock { last in
      guard now.timeIntervalSince(last) >= 0.1 || done == total else { return false }
      last = now
      return true
    }
    guard due else { return }
    let elapsed = max(now.timeIntervalSince(started), 0.001)
    let rate = Double(done) / elapsed
    var line = "\r\(label)\(detail.isEmpty ? "" : "  " + detail)  \(Self.bytes(done))"
    if total > 0 {
      let percent = Int(Double(done) * 100 / Double(total))
      let width = 20
      let filled = min(width, Int(Double(done) / Double(total) * Double(width)))
      line += "/\(Self.bytes(total)) [\(String(repeating: "#", count: filled))\(String(repeating: " ", count: width - filled))] \(percent)%"
      if rate > 0 && done < total {
        line += " ETA \(Self.duration(Double(total - done) / rate))"
      }
    }
    line += "  \(Self.bytes(Int64(rate)))/s\u{1B}[K"
    FileHandle.standardError.write(Data(line.utf8))
  }

  func finish() {
    guard enabled else { return }
    FileHandle.standardError.write(Data("\n".utf8))
  }

  static func bytes(_ n: Int64) -> String { ByteCount(n).description }

  static func duration(_ seconds: Double) -> String {
    let s = Int(seconds.rounded())
    return String(format: "%d:%02d", s / 60, s % 60)
  }
}
