import ChildProcess
import Foundation

/// The built `bucketfs` binary, beside the test bundle.
let bucketfsBinary: String = {
  let dir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
  for candidate in [dir, dir.deletingLastPathComponent()] {
    let path = candidate.appendingPathComponent("bucketfs").path
    if FileManager.default.isExecutableFile(atPath: path) { return path }
  }
  return dir.appendingPathComponent("bucketfs").path
}()

struct RunResult {
  var status: Int32
  var stdout: Data
  var stderr: String
  var out: String { String(decoding: stdout, as: UTF8.self) }
}

/// Runs bucketfs with `args`, feeding `stdin`, and waits (killing it after `timeout`).
func runBucketfs(_ args: [String], stdin: Data? = nil, environment: [String: String] = [:], timeout: TimeInterval = 60)
  throws -> RunResult
{
  var env = ProcessInfo.processInfo.environment
  env.removeValue(forKey: "FIREBASE_STORAGE_EMULATOR_HOST")
  for (k, v) in environment { env[k] = v }
  // An empty input still comes from a pipe that closes: a command reading stdin sees its end.
  let done = try ChildProcess.run(bucketfsBinary, args, environment: env, input: stdin ?? Data(), timeout: .seconds(timeout))
  return RunResult(status: done.status, stdout: done.output, stderr: done.errorText)
}

/// `bucketfs serve` as a child process on a free port; stopped by pid in deinit.
final class ServeProcess {
  let process: ChildProcess
  let root: URL
  /// False when the caller passed the root: it outlives this server.
  let ownsRoot: Bool
  private(set) var port = 0

  /// `fileLimit` runs the server under `ulimit -n`.
  init(extraArgs: [String] = [], fileLimit: Int? = nil, root existing: URL? = nil) throws {
    root = existing ?? FileManager.default.temporaryDirectory.appendingPathComponent("cli-serve-\(UUID().uuidString)")
    ownsRoot = existing == nil
    let serveArgs = ["serve", "--root", root.path, "--port", "0"] + extraArgs
    let environment = ProcessInfo.processInfo.environment
    if let fileLimit {
      // exec keeps the pid: the shell becomes the server.
      process = try ChildProcess(
        "/bin/sh", ["-c", "ulimit -n \(fileLimit) && exec \"$0\" \"$@\"", bucketfsBinary] + serveArgs,
        environment: environment, errors: .pipe)
    } else {
      process = try ChildProcess(bucketfsBinary, serveArgs, environment: environment, errors: .pipe)
    }
    // The first stderr line names the port.
    let text = String(decoding: process.readErrors(until: "\n", deadline: .now + .seconds(20)), as: UTF8.self)
    if let range = text.range(of: "127.0.0.1:"), let p = Int(text[range.upperBound...].prefix(while: { $0.isNumber })) {
      port = p
    }
  }

  var address: String { "127.0.0.1:\(port)" }

  /// A line of /proc/PID/status, in kB (VmHWM: peak resident memory).
  func status(_ field: String) -> Int? {
    guard let text = try? String(contentsOfFile: "/proc/\(process.pid)/status", encoding: .utf8) else { return nil }
    for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
      return Int(line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().first ?? "")
    }
    return nil
  }

  /// SIGTERM, and true when the server exited by itself within five seconds.
  func terminate() -> Bool {
    guard process.isRunning else { return false }
    process.send(SIGTERM)
    return process.wait(timeout: .seconds(5)) != nil
  }

  func stop() {
    process.stop()
  }

  deinit {
    stop()
    if ownsRoot { try? FileManager.default.removeItem(at: root) }
  }
}
