import Foundation
import TestSupport
import StorageEmulator
import Synchronization
import Testing

/// What a hostile probe found in the emulator: a store other users could read (its side files
/// hold download tokens), names GCS refuses, and generations that went backwards under
/// concurrent commits of one name.
@Suite struct EmulatorHardeningTests {
  func upload(_ s: Server, _ name: String, _ body: String) -> String {
    let encoded = name.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? name
    return s.request(
      "POST /v0/b/bk/o?name=\(encoded) HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)")
  }

  func generation(_ response: String) -> Int64? {
    guard let range = response.range(of: "\"generation\":\""), let end = response[range.upperBound...].firstIndex(of: "\"")
    else { return nil }
    return Int64(response[range.upperBound..<end])
  }

  @Test func theStoreIsPrivateToItsOwner() throws {
    try scope(Server()) { s in
      #expect(upload(s, "a/secret.txt", "tokens live beside me").hasPrefix("HTTP/1.1 200"))
      func mode(_ path: String) -> mode_t {
        var st = stat()
        return lstat(path, &st) == 0 ? st.st_mode & 0o777 : 0o7777
      }
      #expect(mode(s.root.path) == 0o700)
      let entries = try FileManager.default.subpathsOfDirectory(atPath: s.root.path)
      #expect(entries.contains { $0.hasSuffix(".json") })
      for entry in entries {
        let path = s.root.appendingPathComponent(entry).path
        var isDir: ObjCBool = false
        _ = FileManager.default.fileExists(atPath: path, isDirectory: &isDir)
        #expect(mode(path) == (isDir.boolValue ? 0o700 : 0o600), "\(entry): \(String(mode(path), radix: 8))")
      }
    }
  }

  @Test func namesGCSRefusesGet400() throws {
    try scope(Server()) { s in
      for name in ["line\nfeed", "carriage\rreturn", String(repeating: "é", count: 513), ".", ".."] {
        let r = upload(s, name, "x")
        #expect(r.hasPrefix("HTTP/1.1 400"), "\(name.debugDescription.prefix(30)): \(r.prefix(60))")
      }
      // 1,024 bytes is still a name.
      #expect(upload(s, String(repeating: "n", count: 1024), "x").hasPrefix("HTTP/1.1 200"))
    }
  }

  /// Commits of one name racing: the object left is the one with the highest generation any
  /// writer was given, and its bytes are that writer's.
  @Test func concurrentCommitsKeepTheHighestGeneration() throws {
    try scope(Server()) { s in
      for round in 0..<10 {
        let results = Mutex<[(Int64, String)]>([])
        DispatchQueue.concurrentPerform(iterations: 8) { i in
          let body = "round \(round) writer \(i) " + String(repeating: "x", count: 2000 * i)
          let r = upload(s, "race.txt", body)
          if let g = generation(r) { results.withLock { $0.append((g, body)) } }
        }
        let all = results.withLock { $0 }
        #expect(all.count == 8)
        let highest = try #require(all.max { $0.0 < $1.0 })
        let meta = s.request("GET /v0/b/bk/o/race.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        #expect(generation(meta) == highest.0, "round \(round): stored \(generation(meta) ?? 0), highest given \(highest.0)")
        let media = s.request("GET /v0/b/bk/o/race.txt?alt=media HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        #expect(media.hasSuffix("\r\n\r\n" + highest.1), "round \(round): the bytes are not the highest generation's")
      }
    }
  }

  /// Links in answers point back the way the request came: a client behind a delaying proxy
  /// (what the far-bucket bench puts in front of us) downloads through the proxy too, as a real
  /// bucket's media links name the host the client used. A Host that is not a loopback address
  /// gets our own address, never the name it sent.
  @Test func linksPointBackTheWayTheRequestCame() throws {
    try scope(Server()) { s in
      #expect(upload(s, "dir/a.txt", "hello").hasPrefix("HTTP/1.1 200"))
      func mediaLink(host: String) -> String {
        let answer = s.request("GET /storage/v1/b/bk/o/dir%2Fa.txt HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n\r\n")
        guard let r = answer.range(of: "\"mediaLink\":\""), let end = answer[r.upperBound...].firstIndex(of: "\"") else { return "" }
        return String(answer[r.upperBound..<end]).replacingOccurrences(of: "\\/", with: "/")
      }
      #expect(mediaLink(host: "127.0.0.1:4711").hasPrefix("http://127.0.0.1:4711/download/storage/v1/b/bk/o/"))
      #expect(mediaLink(host: "[::1]:4711").hasPrefix("http://[::1]:4711/download/"))
      for hostile in ["evil.example:80", "127.0.0.1.evil.example:80", "127.0.0.1:80/x", "x"] {
        #expect(mediaLink(host: hostile).hasPrefix("http://127.0.0.1:\(s.port)/download/"), "Host: \(hostile)")
      }
      let start = s.request(
        "POST /upload/storage/v1/b/bk/o?uploadType=resumable&name=big HTTP/1.1\r\nHost: 127.0.0.1:4712\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
      #expect(start.lowercased().contains("location: http://127.0.0.1:4712/upload/storage/v1/b/bk/o?"), "\(start)")
    }
  }
}
