import ChildProcess
import Foundation

/// `data` compressed by the system's gzip (`gzip -c -n`), as `gsutil cp -z` would store it.
package func gzip(_ data: Data) throws -> Data {
  let done = try ChildProcess.run(
    "/usr/bin/gzip", ["-c", "-n"], environment: ProcessInfo.processInfo.environment, input: data, timeout: .seconds(120))
  guard done.termination == .exited(0) else { throw ToolFailed(tool: "gzip", output: done) }
  return done.output
}

/// A tool that ended otherwise than with status 0.
package struct ToolFailed: Error, CustomStringConvertible {
  package let tool: String
  package let output: ChildProcess.Output
  package var description: String { "\(tool) \(output.termination): \(output.errorText)" }
}
