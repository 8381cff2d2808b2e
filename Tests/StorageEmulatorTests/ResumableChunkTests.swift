import Foundation
import TestSupport
import StorageEmulator
import Testing

/// A chunk of a resumable upload whose size is negative, inconsistent or absurd is refused at
/// once (400), as Google refuses it, never waited for: the client keeps its connection open, so
/// a server that waited for the announced bytes would hang until the client gave up.
@Suite struct ResumableChunkTests {
  func header(_ response: String, _ name: String) -> String? {
    for line in response.split(separator: "\r\n") {
      let parts = line.split(separator: ":", maxSplits: 1)
      if parts.count == 2, parts[0].lowercased() == name.lowercased() { return parts[1].trimmingCharacters(in: .whitespaces) }
    }
    return nil
  }

  /// The path of a new resumable session of `api`.
  func session(_ s: Server, api: String) throws -> String {
    let response =
      api == "gcs"
      ? s.request(
        "POST /upload/storage/v1/b/bk/o?uploadType=resumable&name=chunked HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
      : s.request(
        "POST /v0/b/bk/o?name=chunked HTTP/1.1\r\nHost: x\r\nX-Goog-Upload-Protocol: resumable\r\nX-Goog-Upload-Command: start\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
      )
    let url = try #require(header(response, api == "gcs" ? "Location" : "X-Goog-Upload-URL"), "\(response)")
    let afterHost = try #require(url.range(of: "127.0.0.1:\(s.port)"))
    return String(url[afterHost.upperBound...])
  }

  /// Sends `request` without closing the write side: the server must answer on its own (and
  /// then closes, as asked), not wait for bytes the request announced and never sends.
  func answerWithoutEOF(_ s: Server, _ request: String) -> String {
    rawExchange(port: s.port, Data(request.utf8), closeWrite: false, timeout: 20)
  }

  @Test func badChunksOfAGCSUploadGet400AtOnce() async throws {
    try await offPool {
      try scope(Server()) { s in
        let cases: [(String, String, String)] = [
          ("a negative end", "Content-Range: bytes 0--5/10\r\nContent-Length: 5\r\n", "abcde"),
          ("an end before the start", "Content-Range: bytes 5-2/10\r\nContent-Length: 5\r\n", "abcde"),
          ("a range past the total", "Content-Range: bytes 0-19/10\r\nContent-Length: 20\r\n", "abcde"),
          ("a range that is not the body", "Content-Range: bytes 0-999/1000\r\nContent-Length: 5\r\n", "abcde"),
          ("an absurd length", "Content-Range: bytes 0-99999999999999999/*\r\nContent-Length: 99999999999999999\r\n", "abcde"),
          ("a negative HTTP chunk", "Content-Range: bytes 0-4/5\r\nTransfer-Encoding: chunked\r\n", "-5\r\nabcde\r\n0\r\n\r\n"),
          ("an absurd HTTP chunk", "Content-Range: bytes 0-4/5\r\nTransfer-Encoding: chunked\r\n", "7fffffffffffffff\r\nabcde\r\n"),
        ]
        for (what, headers, body) in cases {
          let path = try session(s, api: "gcs")
          let response = answerWithoutEOF(s, "PUT \(path) HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\(headers)\r\n\(body)")
          #expect(statusLine(response).hasPrefix("HTTP/1.1 400"), "\(what): \(response.isEmpty ? "no answer" : statusLine(response))")
        }
        // A good chunk of a fresh session still goes in whole.
        let path = try session(s, api: "gcs")
        let done = s.request("PUT \(path) HTTP/1.1\r\nHost: x\r\nContent-Range: bytes 0-4/5\r\nContent-Length: 5\r\nConnection: close\r\n\r\nabcde")
        #expect(statusLine(done).hasPrefix("HTTP/1.1 200"), "\(done)")
      }
    }
  }

  @Test func badChunksOfAFirebaseUploadGet400AtOnce() async throws {
    try await offPool {
      try scope(Server()) { s in
        let cases: [(String, String, String)] = [
          ("a negative offset", "X-Goog-Upload-Offset: -5\r\nContent-Length: 5\r\n", "abcde"),
          ("an absurd length", "X-Goog-Upload-Offset: 0\r\nContent-Length: 99999999999999999\r\n", "abcde"),
          ("an absurd HTTP chunk", "X-Goog-Upload-Offset: 0\r\nTransfer-Encoding: chunked\r\n", "7fffffffffffffff\r\nabcde\r\n"),
        ]
        for (what, headers, body) in cases {
          let path = try session(s, api: "firebase")
          let response = answerWithoutEOF(s, "POST \(path) HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Goog-Upload-Command: upload\r\n\(headers)\r\n\(body)")
          #expect(statusLine(response).hasPrefix("HTTP/1.1 400"), "\(what): \(response.isEmpty ? "no answer" : statusLine(response))")
        }
      }
    }
  }
}

/// "Resume incomplete" as Google answers it to a client that asks for no 308 (Google's Go client,
/// which rclone uses: its HTTP stack takes a 308 for a redirect).
@Suite struct NoRedirectResumeTests {
  @Test func aClientAskingForNo308Gets200WithTheOverride() async throws {
    try await offPool {
      try scope(Server()) { s in
        let path = try ResumableChunkTests().session(s, api: "gcs")
        let chunk = s.request(
          "POST \(path) HTTP/1.1\r\nHost: x\r\nX-GUploader-No-308: yes\r\nContent-Range: bytes 0-3/*\r\nContent-Length: 4\r\nConnection: close\r\n\r\nabcd")
        #expect(statusLine(chunk).hasPrefix("HTTP/1.1 200"), "\(chunk)")
        #expect(chunk.contains("X-Http-Status-Code-Override: 308") && chunk.contains("Range: bytes=0-3"), "\(chunk)")
        let plain = s.request("PUT \(path) HTTP/1.1\r\nHost: x\r\nContent-Range: bytes 4-5/*\r\nContent-Length: 2\r\nConnection: close\r\n\r\nef")
        #expect(statusLine(plain).hasPrefix("HTTP/1.1 308") && plain.contains("Range: bytes=0-5"), "\(plain)")
        let last = s.request(
          "POST \(path) HTTP/1.1\r\nHost: x\r\nX-GUploader-No-308: yes\r\nContent-Range: bytes 6-6/7\r\nContent-Length: 1\r\nConnection: close\r\n\r\ng")
        #expect(statusLine(last).hasPrefix("HTTP/1.1 200") && !last.contains("Override") && last.contains("\"size\":\"7\""), "\(last)")
      }
    }
  }
}
