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
  let process = Process()
  process.executableURL = URL(fileURLWithPath: bucketfsBinary)
  process.arguments = args
  var env = ProcessInfo.processInfo.environment
  env.removeValue(forKey: "FIREBASE_STORAGE_EMULATOR_HOST")
  for (k, v) in environment { env[k] = v }
  process.environment = env
  let outPipe = Pipe()
  let errPipe = Pipe()
  let inPipe = Pipe()
  process.standardOutput = outPipe
  process.standardError = errPipe
  process.standardInput = inPipe
  try process.run()
  // The parent's copies of the child's ends must close, or EOF never arrives.
  try? outPipe.fileHandleForWriting.close()
  try? errPipe.fileHandleForWriting.close()
  try? inPipe.fileHandleForReading.close()
  let outData = DataBox()
  let errData = DataBox()
  let group = DispatchGroup()
  for (pipe, box) in [(outPipe, outData), (errPipe, errData)] {
    group.enter()
    DispatchQueue.global().async {
      box.data = pipe.fileHandleForReading.readDataToEndOfFile()
      group.leave()
    }
  }
  if let stdin { inPipe.fileHandleForWriting.write(stdin) }
  try? inPipe.fileHandleForWriting.close()
  if group.wait(timeout: .now() + timeout) == .timedOut {
    kill(process.processIdentifier, SIGKILL)
    _ = group.wait(timeout: .now() + 5)
  }
  process.waitUntilExit()
  return RunResult(status: process.terminationStatus, stdout: outData.data, stderr: String(decoding: errData.data, as: UTF8.self))
}

final class DataBox: @unchecked Sendable { var data = Data() }

/// `bucketfs serve` as a child process on a free port; stopped by pid in deinit.
final class ServeProcess {
  let process = Process()
  let root: URL
  /// False when the caller passed the root: it outlives this server.
  let ownsRoot: Bool
  private(set) var port = 0

  /// `fileLimit` runs the server under `ulimit -n`.
  init(extraArgs: [String] = [], fileLimit: Int? = nil, root existing: URL? = nil) throws {
    root = existing ?? FileManager.default.temporaryDirectory.appendingPathComponent("cli-serve-\(UUID().uuidString)")
    ownsRoot = existing == nil
    let serveArgs = ["serve", "--root", root.path, "--port", "0"] + extraArgs
    if let fileLimit {
      // exec keeps the pid: the shell becomes the server.
      process.executableURL = URL(fileURLWithPath: "/bin/sh")
      process.arguments = ["-c", "ulimit -n \(fileLimit) && exec \"$0\" \"$@\"", bucketfsBinary] + serveArgs
    } else {
      process.executableURL = URL(fileURLWithPath: bucketfsBinary)
      process.arguments = serveArgs
    }
    let err = Pipe()
    process.standardError = err
    process.standardOutput = FileHandle.nullDevice
    try process.run()
    try? err.fileHandleForWriting.close()
    // The first stderr line names the port.
    var text = ""
    let handle = err.fileHandleForReading
    let deadline = Date().addingTimeInterval(20)
    while !text.contains("\n") && Date() < deadline {
      let chunk = handle.availableData
      if chunk.isEmpty { break }
      text += String(decoding: chunk, as: UTF8.self)
    }
    if let range = text.range(of: "127.0.0.1:"), let p = Int(text[range.upperBound...].prefix(while: { $0.isNumber })) {
      port = p
    }
  }

  var address: String { "127.0.0.1:\(port)" }

  /// A line of /proc/PID/status, in kB (VmHWM: peak resident memory).
  func status(_ field: String) -> Int? {
    guard let text = try? String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8) else { return nil }
    for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
      return Int(line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().first ?? "")
    }
    return nil
  }

  /// SIGTERM, and true when the server exited by itself within five seconds.
  func terminate() -> Bool {
    guard process.isRunning else { return false }
    kill(process.processIdentifier, SIGTERM)
    let deadline = Date().addingTimeInterval(5)
    while process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
    return !process.isRunning
  }

  func stop() {
    guard process.isRunning else { return }
    kill(process.processIdentifier, SIGTERM)
    let deadline = Date().addingTimeInterval(5)
    while process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
    if process.isRunning {
      kill(process.processIdentifier, SIGKILL)
      process.waitUntilExit()
    }
  }

  deinit {
    stop()
    if ownsRoot { try? FileManager.default.removeItem(at: root) }
  }
}
