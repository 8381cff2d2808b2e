import Foundation
@testable import StorageCore
import Testing

/// Secrets from files and token endpoints are credentials only when they look like one, and no
/// header value can carry a line break into a request.
@Suite struct HeaderSafetyTests {
  @Test func aHeaderWithALineBreakIsNeverSent() async throws {
    try await EmulatorFixture.scope { fx in
      let url = "http://127.0.0.1:\(fx.emulator.port)/v0/b/test-bucket/o"
      let before = fx.emulator.requestsServed
      for value in ["Bearer abc\r\nX-Injected: 1", "Bearer abc\nX-Injected: 1", "Bearer a\u{0}b"] {
        do throws(TransportError) {
          _ = try await HTTPClient.shared.send(HTTPRequest(method: "GET", url: url, headers: [("Authorization", value)]))
          Issue.record("a header with a control character was sent")
        } catch {
          #expect(error.kind == .local)
          #expect(!error.message.contains("abc"), "the value leaked into the message: \(error.message)")
        }
      }
      #expect(fx.emulator.requestsServed == before)
      // An ordinary request still goes.
      let ok = try await HTTPClient.shared.send(HTTPRequest(method: "GET", url: url, headers: [("Authorization", "Bearer abc.def-_~+/=")]))
      #expect(ok.status == 200)
    }
  }

  @Test func tokensAreTokens() {
    #expect(SecretFile.isToken("ya29.a0AfB_byC-xyz~+/=="))
    #expect(SecretFile.isToken("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln"))
    for bad in ["root:$y$j9T$abc:19000:0:99999:7:::", "a\r\nX: 1", "a b", "", "ab=c", "tok\u{0}"] {
      #expect(!SecretFile.isToken(bad), "\(bad.debugDescription)")
    }
  }

  /// A token file replaced by a symlink to /etc/shadow is refused (its first line is not a
  /// token), and so is a symlink someone else owns.
  @Test func aTokenFileThatIsNotATokenIsRefused() throws {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("secrets-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: dir) }
    let shadowLink = dir.appendingPathComponent("token").path
    try FileManager.default.createSymbolicLink(atPath: shadowLink, withDestinationPath: "/etc/shadow")
    #expect(throws: StorageError.self) { _ = try TokenFileSource(path: shadowLink) }
    do {
      _ = try TokenFileSource(path: shadowLink)
    } catch {
      #expect(error.code == .unauthenticated)
      #expect(error.detail.contains("not a token") && !error.detail.contains("root:"), "\(error.detail)")
    }
    let good = dir.appendingPathComponent("good").path
    try "a-real.token_1\n".write(toFile: good, atomically: true, encoding: .utf8)
    #expect((try? TokenFileSource(path: good)) != nil)
    // A symlink owned by another user, pointing at a good token, is still refused.
    let foreign = dir.appendingPathComponent("foreign").path
    try FileManager.default.createSymbolicLink(atPath: foreign, withDestinationPath: good)
    guard lchown(foreign, 4242, 4242) == 0 else { return }  // not root: nothing more to check
    #expect(throws: StorageError.self) { _ = try TokenFileSource(path: foreign) }
    // A large file is no token file either.
    let big = dir.appendingPathComponent("big").path
    try Data(count: 2 << 20).write(to: URL(fileURLWithPath: big))
    #expect(throws: StorageError.self) { _ = try TokenFileSource(path: big) }
  }

  @Test func aTokenEndpointsLifetimeIsKeptSane() throws {
    for seconds: Any in [1e300, -5, Double.infinity, "1e300", 3600] {
      let token = try TokenEndpoint.token(
        from: ["access_token": "abc", "expires_in": seconds], scheme: "Bearer", what: "test", url: "http://127.0.0.1/")
      let lifetime = token.expiry!.timeIntervalSinceNow
      #expect(lifetime >= -1 && lifetime <= 86_401, "\(seconds) became \(lifetime)")
    }
    #expect(throws: StorageError.self) {
      _ = try TokenEndpoint.token(
        from: ["access_token": "abc\r\nX-Injected: 1", "expires_in": 3600], scheme: "Bearer", what: "test", url: "http://127.0.0.1/")
    }
  }
}
