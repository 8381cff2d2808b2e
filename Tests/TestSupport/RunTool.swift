import Foundation

/// Runs `tool` with `args` (and `env` added to this process's environment) to its end; its exit
/// status and its standard output and error together.
package func runTool(_ tool: String, _ args: [String], env: [String: String] = [:]) -> (Int32, String) {
  let process = Process()
  process.executableURL = URL(fileURLWithPath: tool)
  process.arguments = args
  if !env.isEmpty { process.environment = ProcessInfo.processInfo.environment.merging(env) { _, new in new } }
  let pipe = Pipe()
  process.standardOutput = pipe
  process.standardError = pipe
  do {
    try process.run()
  } catch {
    return (-1, "\(error)")
  }
  let output = pipe.fileHandleForReading.readDataToEndOfFile()
  process.waitUntilExit()
  return (process.terminationStatus, String(decoding: output, as: UTF8.self))
}
