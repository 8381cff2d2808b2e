import Foundation
import TestSupport
import StorageEmulator
import Testing

final class Server: @unchecked Sendable {
  let root: URL
  let emulator: StorageEmulator
  init(hierarchical: Set<String> = []) throws {
    root = FileManager.default.temporaryDirectory.appendingPathComponent("emu-test-\(UUID().uuidString)")
    var config = StorageEmulator.Configuration(root: root)
    config.port = 0
    config.hierarchicalBuckets = hierarchical
    emulator = try StorageEmulator(config)
  }
  var port: Int { emulator.port }
  func request(_ text: String) -> String { rawExchange(port: port, Data(text.utf8)) }
  deinit {
    emulator.stop()
    try? FileManager.default.removeItem(at: root)
  }
}

@Suite struct EmulatorTests {
  func upload(_ s: Server, _ name: String, _ body: String) -> String {
    let encoded = name.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? name
    return s.request(
      "POST /v0/b/bk/o?name=\(encoded) HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)")
  }

  @Test func malformedRequestsGet4xxAndServerStaysUp() throws {
    try scope(Server()) { s in
      #expect(upload(s, "file.txt", "0123456789").hasPrefix("HTTP/1.1 200"))
      let cases: [(String, String)] = [
        ("garbage\r\n\r\n", "400"),
        ("GET /v0/b/bk/o/file.txt\r\n\r\n", "400"),
        ("GET /v0/b/bk/o/file.txt HTTP/1.1\r\nX-Big: \(String(repeating: "a", count: 70_000))\r\n\r\n", "431"),
        ("GET /v0/b/bk/o/%zz HTTP/1.1\r\nConnection: close\r\n\r\n", "400"),
        ("GET /v0/b/bk/o?prefix=%G1 HTTP/1.1\r\nConnection: close\r\n\r\n", "400"),
        ("GET /v0/b/bk/o/file.txt?alt=media HTTP/1.1\r\nRange: bytes=zz-1\r\nConnection: close\r\n\r\n", "400"),
        ("GET /v0/b/bk/o/file.txt?alt=media HTTP/1.1\r\nRange: bytes=5-2\r\nConnection: close\r\n\r\n", "400"),
        // v0 answers a range past the end with the whole object, as the official emulator does.
        ("GET /v0/b/bk/o/file.txt?alt=media HTTP/1.1\r\nRange: bytes=10-\r\nConnection: close\r\n\r\n", "200"),
        ("GET /download/storage/v1/b/bk/o/file.txt?alt=media HTTP/1.1\r\nRange: bytes=10-\r\nConnection: close\r\n\r\n", "416"),
        ("GET /v0/b/bk/o/file.txt HTTP/1.1\r\nContent-Length: -4\r\n\r\n", "400"),
        ("GET /v0/b/bk/o/missing HTTP/1.1\r\nConnection: close\r\n\r\n", "404"),
      ]
      for (request, status) in cases {
        let response = s.request(request)
        #expect(statusLine(response).contains(" \(status) "), "\(request.prefix(60).debugDescription) → \(statusLine(response))")
      }
      let ranged = s.request("GET /v0/b/bk/o/file.txt?alt=media HTTP/1.1\r\nRange: bytes=2-4\r\nConnection: close\r\n\r\n")
      #expect(ranged.hasPrefix("HTTP/1.1 206"))
      #expect(ranged.contains("Content-Range: bytes 2-4/10"))
      #expect(ranged.hasSuffix("234"))
      let suffix = s.request("GET /v0/b/bk/o/file.txt?alt=media HTTP/1.1\r\nRange: bytes=-3\r\nConnection: close\r\n\r\n")
      #expect(suffix.hasSuffix("789"))
      // Still serving.
      #expect(s.request("GET /v0/b/bk/o/file.txt HTTP/1.1\r\nConnection: close\r\n\r\n").hasPrefix("HTTP/1.1 200"))
    }
  }

  @Test func shortBodyNeverBecomesAnObject() throws {
    try scope(Server()) { s in
      let response = s.request("POST /v0/b/bk/o?name=half.txt HTTP/1.1\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\nonly a few bytes")
      #expect(!response.hasPrefix("HTTP/1.1 200"))
      let check = s.request("GET /v0/b/bk/o/half.txt HTTP/1.1\r\nConnection: close\r\n\r\n")
      #expect(check.hasPrefix("HTTP/1.1 404"))
      let list = s.request("GET /v0/b/bk/o HTTP/1.1\r\nConnection: close\r\n\r\n")
      #expect(!list.contains("half.txt"))
    }
  }

  @Test func keepAliveServesManyRequestsOnOneConnection() throws {
    try scope(Server()) { s in
      _ = upload(s, "k.txt", "abc")
      let one = "GET /v0/b/bk/o/k.txt?alt=media HTTP/1.1\r\nHost: x\r\n\r\n"
      let response = rawExchange(port: s.port, Data(String(repeating: one, count: 5).utf8))
      #expect(response.components(separatedBy: "HTTP/1.1 200 OK").count - 1 == 5)
    }
  }

  @Test func generationsGrowAndNamesStayInsideRoot() throws {
    try scope(Server()) { s in
      var generations: [Int64] = []
      for name in ["../escape", "/abs/path", "a/../../b", String(repeating: "n", count: 1024)] {
        for body in ["one", "two"] {
          let r = upload(s, name, body)
          #expect(r.hasPrefix("HTTP/1.1 200"), "\(name.prefix(20))")
          if let range = r.range(of: "\"generation\":\""), let end = r[range.upperBound...].firstIndex(of: "\"") {
            generations.append(Int64(r[range.upperBound..<end])!)
          }
        }
      }
      #expect(generations.count == 8)
      #expect(generations == generations.sorted() && Set(generations).count == 8)
      let parent = s.root.deletingLastPathComponent()
      #expect(!FileManager.default.fileExists(atPath: parent.appendingPathComponent("escape").path))
      #expect(!FileManager.default.fileExists(atPath: "/abs/path"))
      // Every file the server wrote is inside its root.
      let contents = try FileManager.default.subpathsOfDirectory(atPath: s.root.path)
      #expect(contents.allSatisfy { !$0.contains("..") })
    }
  }

  @Test func resumableUploadQueryAndFinalize() throws {
    try scope(Server()) { s in
      let start = s.request(
        "POST /v0/b/bk/o?name=r.bin HTTP/1.1\r\nX-Goog-Upload-Protocol: resumable\r\nX-Goog-Upload-Command: start\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
      #expect(start.contains("X-Goog-Upload-Status: active"))
      guard let line = start.split(separator: "\r\n").first(where: { $0.hasPrefix("X-Goog-Upload-URL: ") }),
        let url = URL(string: String(line.dropFirst("X-Goog-Upload-URL: ".count)))
      else {
        Issue.record("no session URL")
        return
      }
      let target = url.path + "?" + (url.query ?? "")
      let chunk = s.request("POST \(target) HTTP/1.1\r\nX-Goog-Upload-Command: upload\r\nX-Goog-Upload-Offset: 0\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")
      #expect(chunk.contains("X-Goog-Upload-Size-Received: 5"))
      let wrongOffset = s.request("POST \(target) HTTP/1.1\r\nX-Goog-Upload-Command: upload\r\nX-Goog-Upload-Offset: 2\r\nContent-Length: 1\r\nConnection: close\r\n\r\nx")
      #expect(wrongOffset.hasPrefix("HTTP/1.1 400"))
      let query = s.request("POST \(target) HTTP/1.1\r\nX-Goog-Upload-Command: query\r\nConnection: close\r\n\r\n")
      #expect(query.contains("X-Goog-Upload-Size-Received: 5"))
      #expect(s.request("GET /v0/b/bk/o/r.bin HTTP/1.1\r\nConnection: close\r\n\r\n").hasPrefix("HTTP/1.1 404"))
      let final = s.request("POST \(target) HTTP/1.1\r\nX-Goog-Upload-Command: upload, finalize\r\nX-Goog-Upload-Offset: 5\r\nContent-Length: 6\r\nConnection: close\r\n\r\n world")
      #expect(final.contains("X-Goog-Upload-Status: final"))
      #expect(final.contains("\"size\":\"11\""))
      let media = s.request("GET /v0/b/bk/o/r.bin?alt=media HTTP/1.1\r\nConnection: close\r\n\r\n")
      #expect(media.hasSuffix("hello world"))
    }
  }

  @Test func restartKeepsObjects() throws {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("emu-restart-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: root) }
    var config = StorageEmulator.Configuration(root: root)
    config.port = 0
    let first = try StorageEmulator(config)
    let r = rawExchange(port: first.port, Data("POST /v0/b/bk/o?name=keep.txt HTTP/1.1\r\nContent-Length: 4\r\nConnection: close\r\n\r\nkeep".utf8))
    #expect(r.hasPrefix("HTTP/1.1 200"))
    first.stop()
    let second = try StorageEmulator(config)
    defer { second.stop() }
    let media = rawExchange(port: second.port, Data("GET /v0/b/bk/o/keep.txt?alt=media HTTP/1.1\r\nConnection: close\r\n\r\n".utf8))
    #expect(media.hasSuffix("keep"))
  }
}
