import Foundation
import TestSupport
import Testing

/// A throwaway RSA key and a service account key file pointing at `tokenURI`.
func serviceAccountFile(in folder: URL, tokenURI: String, algorithm: String = "RSA") throws -> (keyPEM: String, path: String) {
  let pem = folder.appendingPathComponent("key-\(UUID().uuidString.prefix(6)).pem").path
  let key = try makePrivateKey(at: pem, algorithm: algorithm)
  let path = folder.appendingPathComponent("sa-\(UUID().uuidString.prefix(6)).json").path
  let json: [String: Any] = [
    "type": "service_account", "private_key_id": "k", "private_key": key, "client_email": "cli@test.iam.gserviceaccount.com",
    "token_uri": tokenURI,
  ]
  try JSONSerialization.data(withJSONObject: json).write(to: URL(fileURLWithPath: path))
  chmod(path, 0o600)
  return (pem, path)
}

@Suite(.serialized) struct AuthCommandTests {
  func scratch() throws -> URL {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cli-auth-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    return dir
  }

  /// Starts `serve --require-oauth` with the key of a fresh service account; returns both.
  func oauthServer(_ dir: URL, lifetime: String = "3600") throws -> (ServeProcess, String) {
    // The key file's token_uri needs the port, known only once the server runs: make the key,
    // start the server with it, then write the key file with the port.
    let placeholder = try serviceAccountFile(in: dir, tokenURI: "http://127.0.0.1:1/token")
    let server = try ServeProcess(extraArgs: ["--require-oauth", placeholder.keyPEM, "--token-lifetime", lifetime])
    let keyText = try String(contentsOfFile: placeholder.keyPEM, encoding: .utf8)
    let path = dir.appendingPathComponent("sa.json").path
    let json: [String: Any] = [
      "type": "service_account", "private_key_id": "k", "private_key": keyText, "client_email": "cli@test.iam.gserviceaccount.com",
      "token_uri": "http://127.0.0.1:\(server.port)/token",
    ]
    try JSONSerialization.data(withJSONObject: json).write(to: URL(fileURLWithPath: path))
    chmod(path, 0o600)
    return (server, path)
  }

  @Test func authShowsSourceIdentityAndTimeButNeverTheToken() throws {
    let dir = try scratch()
    defer { try? FileManager.default.removeItem(at: dir) }
    let (server, keyFile) = try oauthServer(dir)
    try scope(server) { server in
      let r = try runBucketfs(["auth", "--key-file", keyFile, "--emulator", server.address])
      #expect(r.status == 0, "\(r.stderr)")
      #expect(r.out.contains("service account key \(keyFile)"))
      #expect(r.out.contains("cli@test.iam.gserviceaccount.com"))
      #expect(r.out.contains("devstorage.read_write"))
      #expect(r.out.contains("valid for"))
      #expect(!r.out.contains("emu-") && !r.stderr.contains("emu-"), "a token was printed")
      // The same key through the environment, and with read-only scopes.
      let env = try runBucketfs(["auth", "--scopes", "read-only", "--emulator", server.address], environment: ["GOOGLE_APPLICATION_CREDENTIALS": keyFile])
      #expect(env.status == 0 && env.out.contains("devstorage.read_only"), "\(env.stderr)")
    }
  }

  @Test func brokenCredentialsEndWithOneLineAndAStatus() throws {
    let dir = try scratch()
    defer { try? FileManager.default.removeItem(at: dir) }
    let (server, keyFile) = try oauthServer(dir)
    try scope(server) { server in
      let garbage = dir.appendingPathComponent("garbage.json").path
      try "not json at all".write(toFile: garbage, atomically: true, encoding: .utf8)
      chmod(garbage, 0o600)
      var r = try runBucketfs(["auth", "--key-file", garbage, "--emulator", server.address])
      #expect(r.status == 4 && r.stderr.contains("not JSON"), "\(r.status) \(r.stderr)")
      #expect(r.stderr.split(separator: "\n").count == 1)
      let ec = try serviceAccountFile(in: dir, tokenURI: "http://127.0.0.1:\(server.port)/token", algorithm: "EC")
      r = try runBucketfs(["ls", "gs://bk", "--key-file", ec.path, "--emulator", server.address])
      #expect(r.status == 4 && r.stderr.contains("not an RSA key"), "\(r.status) \(r.stderr)")
      // A token endpoint that nothing answers: unreachable, status 5.
      let json = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: keyFile))) as! [String: Any]
      var moved = json
      moved["token_uri"] = "http://127.0.0.1:1/token"
      let nowhere = dir.appendingPathComponent("nowhere.json").path
      try JSONSerialization.data(withJSONObject: moved).write(to: URL(fileURLWithPath: nowhere))
      chmod(nowhere, 0o600)
      r = try runBucketfs(["auth", "--key-file", nowhere, "--emulator", server.address])
      #expect(r.status == 5 && r.stderr.contains("token endpoint"), "\(r.status) \(r.stderr)")
      // A key file others can read gets a warning, as ssh gives one.
      chmod(keyFile, 0o644)
      r = try runBucketfs(["auth", "--key-file", keyFile, "--emulator", server.address])
      #expect(r.status == 0 && r.stderr.contains("readable by other users"), "\(r.stderr)")
    }
  }

  /// 200 MiB up and down with 3-second tokens: many refreshes, no failure.
  @Test func copyAcrossManyTokenRefreshes() throws {
    let dir = try scratch()
    defer { try? FileManager.default.removeItem(at: dir) }
    let (server, keyFile) = try oauthServer(dir, lifetime: "3s")
    try scope(server) { server in
      let source = dir.appendingPathComponent("big.bin")
      let chunk = Data((0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 11) })
      FileManager.default.createFile(atPath: source.path, contents: nil)
      let handle = try FileHandle(forWritingTo: source)
      for i in 0..<200 { handle.write(chunk.map { $0 ^ UInt8(truncatingIfNeeded: i) }.withUnsafeBufferPointer { Data($0) }) }
      try handle.close()
      let common = ["--key-file", keyFile, "--emulator", server.address, "--no-progress"]
      var r = try runBucketfs(["cp", source.path, "gs://bk/big.bin"] + common, timeout: 300)
      #expect(r.status == 0, "\(r.stderr)")
      let back = dir.appendingPathComponent("back.bin")
      r = try runBucketfs(["cp", "gs://bk/big.bin", back.path] + common, timeout: 300)
      #expect(r.status == 0, "\(r.stderr)")
      #expect(FileManager.default.contentsEqual(atPath: source.path, andPath: back.path))
      // Anonymous is refused by this server.
      r = try runBucketfs(["ls", "gs://bk", "--anonymous", "--emulator", server.address])
      #expect(r.status == 4)
    }
  }
}
