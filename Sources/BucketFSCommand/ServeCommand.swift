import Foundation
import StorageEmulator

/// `bucketfs serve`: the local bucket server in the foreground until SIGINT/SIGTERM.
struct ServeCommand {
  static let usage = """
    usage: bucketfs serve --root DIR [--host 127.0.0.1] [--port 9199] [--require-token TOKEN_FILE]
                          [--latency MS] [--fail-status CODE --fail-fraction F [--retry-after S]]
                          [--reset-after BYTES] [--stall-after BYTES] [--fault-limit N]
                          [--idle-timeout S] [--header-timeout S] [--max-connections N]

    Serves the Firebase Storage REST API (v0) from DIR on a loopback address. Objects are stored
    under DIR by hash, so no object name can reach outside it. The fault options make the server
    misbehave on purpose, for tests: added latency, a fraction of requests answered with an error
    status, connections reset or stalled after a number of body bytes. Keep-alive connections idle
    for --idle-timeout (60 s) are closed, request headers must arrive within --header-timeout
    (10 s), and at most --max-connections (1000, and 64 below the descriptor limit) are served at
    once: the longest-idle connection makes room for a new one.
    """

  static func run(_ args: inout Arguments) throws -> Int32 {
    guard let root = try args.value("--root") else { throw CommandError.usage("serve needs --root DIR") }
    var config = StorageEmulator.Configuration(root: URL(fileURLWithPath: root))
    config.host = try args.value("--host") ?? "127.0.0.1"
    config.port = try args.int("--port") ?? 9199
    if let tokenFile = try args.value("--require-token") {
      guard let text = try? String(contentsOfFile: tokenFile, encoding: .utf8),
        let token = text.split(whereSeparator: \.isNewline).first.map({ $0.trimmingCharacters(in: .whitespaces) }),
        !token.isEmpty
      else { throw CommandError.usage("cannot read a token from \(tokenFile)") }
      config.requiredToken = token
    }
    var faults = Faults()
    if let ms = try args.int("--latency") { faults.latency = .milliseconds(ms) }
    if let status = try args.int("--fail-status") { faults.errorStatus = status }
    if let fraction = try args.value("--fail-fraction") {
      guard let f = Double(fraction), (0...1).contains(f) else { throw CommandError.usage("--fail-fraction takes 0…1") }
      faults.errorFraction = f
    }
    faults.retryAfter = try args.int("--retry-after")
    faults.resetAfterBytes = try args.int("--reset-after").map(Int64.init)
    faults.stallAfterBytes = try args.int("--stall-after").map(Int64.init)
    faults.limit = try args.int("--fault-limit")
    if let seconds = try args.value("--idle-timeout") {
      guard let s = Double(seconds), s > 0 else { throw CommandError.usage("--idle-timeout takes seconds") }
      config.limits.idleTimeout = .milliseconds(Int(s * 1000))
    }
    if let seconds = try args.value("--header-timeout") {
      guard let s = Double(seconds), s > 0 else { throw CommandError.usage("--header-timeout takes seconds") }
      config.limits.headerTimeout = .milliseconds(Int(s * 1000))
    }
    if let n = try args.int("--max-connections") {
      guard n > 0 else { throw CommandError.usage("--max-connections takes a positive number") }
      config.limits.maxConnections = n
    }
    try args.finish()
    config.faults = faults

    let emulator: StorageEmulator
    do {
      emulator = try StorageEmulator(config)
    } catch {
      throw CommandError.failed("serve: \(error)", status: ExitStatus.unavailable)
    }
    FileHandle.standardError.write(Data("bucketfs serve: listening on http://\(emulator.address) (root \(root))\n".utf8))
    SignalWaiter.waitForTermination()
    emulator.stop()
    return 0
  }
}
