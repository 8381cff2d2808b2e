import Foundation
import TestSupport
import StorageEmulator
import Testing

/// The forms of our emulator's answers where the two APIs differ and a raw client could notice,
/// as Google's code writes them (the client's side: `StorageCoreTests.ContractTests`).
@Suite struct ContractFormTests {
  func upload(_ s: Server, _ name: String, _ body: String, contentEncoding: String? = nil) -> String {
    let encoded = name.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? name
    let metadata = contentEncoding.map { "{\"contentEncoding\":\"\($0)\"}" } ?? "{}"
    let boundary = "b0undary"
    let multipart = "--\(boundary)\r\nContent-Type: application/json\r\n\r\n\(metadata)\r\n--\(boundary)\r\nContent-Type: text/plain\r\n\r\n\(body)\r\n--\(boundary)--\r\n"
    return s.request(
      "POST /v0/b/bk/o?name=\(encoded) HTTP/1.1\r\nHost: x\r\nX-Goog-Upload-Protocol: multipart\r\nContent-Type: multipart/related; boundary=\(boundary)\r\nContent-Length: \(multipart.utf8.count)\r\nConnection: close\r\n\r\n\(multipart)")
  }

  func headerLines(_ response: String, _ name: String) -> [String] {
    response.components(separatedBy: "\r\n\r\n").first!.components(separatedBy: "\r\n")
      .filter { $0.lowercased().hasPrefix(name.lowercased() + ":") }
  }

  /// v0 media: one comma-joined `x-goog-hash` (firebase-tools `src/emulator/storage/apis/shared.ts`,
  /// `sendFileBytes`); GCS sends one line per hash. A client must take both.
  @Test func hashHeadersAreOneLineOnV0AndTwoOnGCS() throws {
    try scope(Server()) { s in
      #expect(upload(s, "h.txt", "hashed").hasPrefix("HTTP/1.1 200"))
      let v0 = s.request("GET /v0/b/bk/o/h.txt?alt=media HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
      let v0Lines = headerLines(v0, "x-goog-hash")
      #expect(v0Lines.count == 1 && v0Lines[0].contains("crc32c=") && v0Lines[0].contains(",md5="), "\(v0Lines)")
      let gcs = s.request("GET /download/storage/v1/b/bk/o/h.txt?alt=media HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
      #expect(headerLines(gcs, "x-goog-hash").count == 2)
    }
  }

  /// A Range starting at the size: the official emulator sends the whole object with 200
  /// (`sendFileBytes`: Express's `req.range` is unsatisfiable, the body goes out whole); GCS 416.
  @Test func aRangeAtTheEndIs200OnV0And416OnGCS() throws {
    try scope(Server()) { s in
      #expect(upload(s, "e.txt", "0123456789").hasPrefix("HTTP/1.1 200"))
      let v0 = s.request("GET /v0/b/bk/o/e.txt?alt=media HTTP/1.1\r\nHost: x\r\nRange: bytes=10-\r\nConnection: close\r\n\r\n")
      #expect(v0.hasPrefix("HTTP/1.1 200") && v0.hasSuffix("\r\n\r\n0123456789"))
      let gcs = s.request("GET /download/storage/v1/b/bk/o/e.txt?alt=media HTTP/1.1\r\nHost: x\r\nRange: bytes=10-\r\nConnection: close\r\n\r\n")
      #expect(gcs.hasPrefix("HTTP/1.1 416") && gcs.contains("bytes */10"))
    }
  }

  /// A transcoded answer has no Content-Length: it goes out chunked, as GCS sends it, and says
  /// what was stored (`X-Goog-Stored-Content-Encoding`).
  @Test func aTranscodedAnswerIsChunked() throws {
    try scope(Server()) { s in
      let gz = Data([0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0xcb, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00, 0x86, 0xa6, 0x10, 0x36, 0x05, 0x00, 0x00, 0x00])
      // "hello", gzip-compressed; sent as raw bytes through a media upload.
      let head = "POST /upload/storage/v1/b/bk/o?uploadType=media&name=g.txt HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: \(gz.count)\r\nConnection: close\r\n\r\n"
      #expect(statusLine(rawExchange(port: s.port, Data(head.utf8) + gz)).contains("200"))
      let patch = "{\"contentEncoding\":\"gzip\"}"
      #expect(s.request("PATCH /storage/v1/b/bk/o/g.txt HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: \(patch.utf8.count)\r\nConnection: close\r\n\r\n\(patch)").hasPrefix("HTTP/1.1 200"))
      let plain = s.request("GET /v0/b/bk/o/g.txt?alt=media HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
      #expect(headerLines(plain, "content-length").isEmpty)
      #expect(headerLines(plain, "transfer-encoding") == ["Transfer-Encoding: chunked"])
      #expect(plain.hasSuffix("\r\n\r\n5\r\nhello\r\n0\r\n\r\n"), "\(plain)")
      let stored = s.request("GET /v0/b/bk/o/g.txt?alt=media HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n")
      #expect(headerLines(stored, "content-encoding") == ["Content-Encoding: gzip"])
      #expect(headerLines(stored, "content-length") == ["Content-Length: \(gz.count)"])
    }
  }
}
