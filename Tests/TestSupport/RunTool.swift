import ChildProcess
import Foundation

/// Runs `tool` with `args` (and `env` added to this process's environment) to its end; its exit
/// status and its standard output and error together.
package func runTool(_ tool: String, _ args: [String], env: [String: String] = [:], timeout: Duration = .seconds(300))
  -> (Int32, String)
{
  do {
    let done = try ChildProcess.run(
      tool, args, environment: ProcessInfo.processInfo.environment.merging(env) { _, new in new },
      errors: .sameAsOutput, timeout: timeout)
    return (done.status, done.text + (done.timedOut ? "\n(killed after \(timeout))" : ""))
  } catch {
    return (-1, "\(error)")
  }
}
