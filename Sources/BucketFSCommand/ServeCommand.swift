import Foundation
import StorageEmulator

/// `bucketfs serve`: the local bucket server in the foreground until SIGINT/SIGTERM.
struct ServeCommand {
  static let usage = """
    usage: bucketfs serve --root DIR [--host 127.0.0.1] [--port 9199] [--require-token TOKEN_FILE]
                          [--latency MS] [--fail-status CODE --fail-fraction F [--retry-after S]]
                          [--reset-after BYTES] [--stall-after BYTES] [--fault-limit N]
                          [--idle-timeout S] [--header-timeout S] [--max-connections N]
                          [--require-oauth KEY_FILE] [--token-lifetime S] [--refresh-tokens FILE]
                          [--firebase-api-key KEY] [--metadata-server] [--public-url URL]
                          [--ignore-v0-preconditions] [--hierarchical-namespace BUCKET]...
                          [--no-move]

    Serves the Firebase Storage REST API (v0) from DIR on a loopback address. Objects are stored
    under DIR by hash, so no object name can reach outside it. The fault options make the server
    misbehave on purpose, for tests: added latency, a fraction of requests answered with an error
    status, connections reset or stalled after a number of body bytes. Keep-alive connections idle
    for --idle-timeout (60 s) are closed, request headers must arrive within --header-timeout
    (10 s), and at most --max-connections (1000, and 64 below the descriptor limit) are served at
    once: the longest-idle connection makes room for a new one.

    Token endpoints, to test credentials offline: POST /token (the JWT bearer grant of the service
    account whose key file or PEM public key is KEY_FILE, and the refresh-token grant of the tokens
    listed one per line in --refresh-tokens), POST /v1/token?key= (Firebase secure-token refresh,
    which replaces the refresh token it is given), and with --metadata-server the metadata server's
    token route. Issued tokens live --token-lifetime (3600 s). With --require-oauth every data
    route wants an issued, unexpired token (401 otherwise).

    Links in answers (media links, resumable upload session URLs) name the loopback address the
    client used (a proxy in front is followed); behind a TLS terminator give its URL with
    --public-url https://127.0.0.1:PORT. --ignore-v0-preconditions ignores ifGenerationMatch and
    ifMetagenerationMatch on the Firebase API, as the official emulator does.

    A bucket named with --hierarchical-namespace (repeatable), or made through the JSON API with
    {"hierarchicalNamespace": {"enabled": true}}, has folders of its own: the folders resource
    (insert, get, list, delete, and rename as a long-running operation polled at
    b/BUCKET/operations/ID), empty folders listed as prefixes with includeFoldersAsPrefixes=true,
    and the parent folders of every object written to it. --no-move answers objects.move (moveTo)
    with 404, as a server that predates it does, so that copy-then-delete can be compared.
    """

  static func run(_ args: inout Arguments) throws -> Int32 {
    guard let root = try args.value("--root") else { throw CommandError.usage("serve needs --root DIR") }
    var config = StorageEmulator.Configuration(root: URL(fileURLWithPath: root))
    config.host = try args.value("--host") ?? "127.0.0.1"
    config.port = try args.int("--port", in: 0...65535) ?? 9199
    if let tokenFile = try args.value("--require-token") {
      guard let text = try? String(contentsOfFile: tokenFile, encoding: .utf8),
        let token = text.split(whereSeparator: \.isNewline).first.map({ $0.trimmingCharacters(in: .whitespaces) }),
        !token.isEmpty
      else { throw CommandError.usage("cannot read a token from \(tokenFile)") }
      config.requiredToken = token
    }
    var faults = Faults()
    if let ms = try args.int("--latency", in: 0...600_000) { faults.latency = .milliseconds(ms) }
    if let status = try args.int("--fail-status", in: 100...599) { faults.errorStatus = status }
    if let fraction = try args.value("--fail-fraction") {
      guard let f = Double(fraction), (0...1).contains(f) else { throw CommandError.usage("--fail-fraction takes 0…1") }
      faults.errorFraction = f
    }
    faults.retryAfter = try args.int("--retry-after", in: 0...86_400)
    faults.resetAfterBytes = try args.int("--reset-after").map(Int64.init)
    faults.stallAfterBytes = try args.int("--stall-after").map(Int64.init)
    faults.limit = try args.int("--fault-limit")
    if let s = try args.seconds("--idle-timeout") { config.limits.idleTimeout = .milliseconds(Int(s * 1000)) }
    if let s = try args.seconds("--header-timeout") { config.limits.headerTimeout = .milliseconds(Int(s * 1000)) }
    if let n = try args.int("--max-connections") {
      guard n > 0 else { throw CommandError.usage("--max-connections takes a positive number") }
      config.limits.maxConnections = n
    }
    var tokens = TokenAuthority.Configuration()
    var wantsTokens = false
    if let keyFile = try args.value("--require-oauth") {
      tokens.publicKeyPEM = try publicKey(from: keyFile)
      config.requireOAuth = true
      wantsTokens = true
    }
    if let seconds = try args.seconds("--token-lifetime") { tokens.tokenLifetime = .milliseconds(Int(seconds * 1000)) }
    if let file = try args.value("--refresh-tokens") {
      guard let text = try? String(contentsOfFile: file, encoding: .utf8) else {
        throw CommandError.usage("cannot read refresh tokens from \(file)")
      }
      tokens.refreshTokens = Set(text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty })
      wantsTokens = true
    }
    if let key = try args.value("--firebase-api-key") {
      tokens.firebaseAPIKey = key
      wantsTokens = true
    }
    if args.flag("--metadata-server") {
      tokens.metadataServer = true
      wantsTokens = true
    }
    if wantsTokens { config.tokens = tokens }
    config.ignoresFirebasePreconditions = args.flag("--ignore-v0-preconditions")
    config.movesObjects = !args.flag("--no-move")
    for bucket in try args.values("--hierarchical-namespace") {
      config.hierarchicalBuckets.insert(bucket)
    }
    if let url = try args.value("--public-url") {
      guard let parsed = URLComponents(string: url), parsed.scheme == "http" || parsed.scheme == "https", parsed.host?.isEmpty == false,
        parsed.path.isEmpty || parsed.path == "/", parsed.query == nil, parsed.fragment == nil, parsed.user == nil
      else { throw CommandError.usage("--public-url takes http(s)://HOST[:PORT], not \(url.debugDescription)") }
      config.publicURL = url.hasSuffix("/") ? String(url.dropLast()) : url
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

  /// The PEM key that verifies service-account JWTs: a key file's `private_key`, or a PEM file.
  static func publicKey(from path: String) throws -> String {
    guard let data = FileManager.default.contents(atPath: path) else {
      throw CommandError.usage("--require-oauth: cannot read \(path)")
    }
    if let json = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any], let pem = json["private_key"] as? String {
      return pem
    }
    let text = String(decoding: data, as: UTF8.self)
    guard text.contains("-----BEGIN") else {
      throw CommandError.usage("--require-oauth: \(path) is neither a service account key file nor a PEM key")
    }
    return text
  }
}
