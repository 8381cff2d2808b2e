import Foundation
import ChildProcess
import TestSupport
import StorageCore
import StorageEmulator
import Synchronization
import Testing

/// A mount of a bucket whose tokens live 3 seconds keeps working: the daemon refreshes ahead of
/// expiry, once per half-lifetime, and never shows a reader EACCES.
@Suite(.serialized) struct CredentialMountTests {
  /// A key made at test time, the emulator trusting it, and the key file (token_uri → emulator).
  func oauthFixture(lifetime: Duration) throws -> (MountFixture, String) {
    let keyFolder = FileManager.default.temporaryDirectory.appendingPathComponent("mount-key-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: keyFolder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: keyFolder) }
    let pem = keyFolder.appendingPathComponent("key.pem").path
    let key = try makePrivateKey(at: pem)
    var tokens = TokenAuthority.Configuration()
    tokens.publicKeyPEM = key
    tokens.tokenLifetime = lifetime
    let fx = try MountFixture(tokens: tokens)
    let keyFile = fx.root.appendingPathComponent("sa.json").path
    let json: [String: Any] = [
      "type": "service_account", "private_key_id": "k", "private_key": key, "client_email": "mount@test.iam.gserviceaccount.com",
      "token_uri": "http://127.0.0.1:\(fx.port)/token",
    ]
    try JSONSerialization.data(withJSONObject: json).write(to: URL(fileURLWithPath: keyFile))
    chmod(keyFile, 0o600)
    var options = CredentialOptions()
    options.keyFile = keyFile
    fx.storage.credentials = Credentials(source: try CredentialChain.keyFileSource(keyFile, scopes: [StorageScope.readWrite], client: .shared))
    return (fx, keyFile)
  }

  /// Reads and listings for a while (15 s; BUCKETFS_TOKEN_SOAK_SECONDS for longer) with tokens
  /// that live 3 s: none fails, and tokens are granted once per half-lifetime, not per request.
  @Test func readsAcrossManyShortTokens() async throws {
    let seconds = Double(ProcessInfo.processInfo.environment["BUCKETFS_TOKEN_SOAK_SECONDS"] ?? "") ?? 15
    let (fx, keyFile) = try oauthFixture(lifetime: .seconds(3))
    try await scope(fx) { fx in
      let data = randomData(16 << 20, seed: 81)
      _ = try await fx.put("tokens/big.bin", data)
      for i in 0..<20 { _ = try await fx.put("tokens/small-\(i).txt", Data("small \(i)".utf8)) }
      // Reads go to the server all along: no staging, a small cache, short metadata TTL.
      let m = try fx.mount(options: ["stage_max_file=0", "cache_size=4M", "metadata_ttl=1", "read_timeout=10"], extra: ["--key-file", keyFile])
      // The daemon logs its credentials just after the mount comes up.
      _ = await eventually(timeout: .seconds(5)) { m.log.contains("credentials: ") }
      #expect(m.log.contains("credentials: service account key"), "\(m.log)")
      let grantsBefore = fx.emulator?.tokenGrants ?? 0
      let failures = Mutex<[String]>([])
      let reads = Atomic<Int>(0)
      let listings = Atomic<Int>(0)
      let deadline = Date().addingTimeInterval(seconds)
      let bigPath = m.path("tokens/big.bin")
      let folder = m.path("tokens")
      let reader = Thread {
        while Date() < deadline {
          switch readFile(bigPath, chunk: 1 << 20) {
          case .success(let bytes) where bytes == data: reads.add(1, ordering: .relaxed)
          case .success(let bytes): failures.withLock { $0.append("wrong bytes (\(bytes.count))") }
          case .failure(let e): failures.withLock { $0.append("read: \(e)") }
          }
        }
      }
      let lister = Thread {
        while Date() < deadline {
          do {
            let names = try FileManager.default.contentsOfDirectory(atPath: folder)
            if names.count != 21 { failures.withLock { $0.append("ls showed \(names.count) names") } }
            listings.add(1, ordering: .relaxed)
          } catch {
            failures.withLock { $0.append("ls: \(error)") }
          }
          Thread.sleep(forTimeInterval: 0.2)
        }
      }
      reader.start()
      lister.start()
      while Date() < deadline.addingTimeInterval(15) && (reader.isExecuting || lister.isExecuting || !reader.isFinished) {
        try await Task.sleep(for: .milliseconds(200))
        if reader.isFinished && lister.isFinished { break }
      }
      let grants = (fx.emulator?.tokenGrants ?? 0) - grantsBefore
      #expect(failures.withLock { $0 }.isEmpty, "\(failures.withLock { $0.prefix(5) })")
      #expect(reads.load(ordering: .relaxed) >= 2 && listings.load(ordering: .relaxed) >= Int(seconds))
      // One grant per half-lifetime (about 10 in 15 s, 40 in 60 s), not one per request.
      #expect(
        Double(grants) >= seconds / 2.4 && Double(grants) <= seconds,
        "\(grants) token grants in \(Int(seconds)) s of 3-second tokens")
    }
  }

  @Test func aMountWithBrokenCredentialsRefusesToStart() async throws {
    let (fx, _) = try oauthFixture(lifetime: .seconds(3600))
    try await scope(fx) { fx in
      let broken = fx.root.appendingPathComponent("broken.json").path
      try "{\"type\": \"service_account\"".write(toFile: broken, atomically: true, encoding: .utf8)
      chmod(broken, 0o600)
      #expect(throws: MountedBucket.MountFailure.self) { _ = try fx.mount(extra: ["--key-file", broken], name: "broken") }
      // Without credentials the server refuses (401), and the mount says so instead of mounting.
      #expect(throws: MountedBucket.MountFailure.self) { _ = try fx.mount(extra: ["--anonymous"], name: "anon") }
    }
  }
}
