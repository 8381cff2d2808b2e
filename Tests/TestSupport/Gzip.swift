import Foundation

/// `data` compressed by the system's gzip (`gzip -c -n`), as `gsutil cp -z` would store it.
package func gzip(_ data: Data) throws -> Data {
  let p = Process()
  p.executableURL = URL(fileURLWithPath: "/usr/bin/gzip")
  p.arguments = ["-c", "-n"]
  let input = Pipe(), output = Pipe()
  p.standardInput = input
  p.standardOutput = output
  try p.run()
  // Written from a thread of its own: a large input would fill the pipe while nobody reads.
  let writer = Thread { input.fileHandleForWriting.write(data); try? input.fileHandleForWriting.close() }
  writer.start()
  let out = output.fileHandleForReading.readDataToEndOfFile()
  p.waitUntilExit()
  return out
}
