import Foundation
import StorageEmulator
import Synchronization
import TestSupport
import Testing

/// Writers racing with one `ifGenerationMatch`: as on GCS, exactly one of them makes the next
/// generation and every other gets 412, whatever order their bodies finish in, on each upload
/// form of both APIs. The check once came before the body was read, so two writers of the same
/// generation could both succeed, and the one whose commit a newer generation overtook was told
/// it landed (the appends of two mounts lost lines that way).
@Suite struct ConditionalWriteTests {
  enum Form: String, CaseIterable, Sendable { case gcsMedia, gcsMultipart, firebaseRaw }

  func put(_ s: Server, _ form: Form, _ body: String, ifGenerationMatch g: String) -> (status: Int, json: [String: Any]) {
    let request: String
    switch form {
    case .gcsMedia:
      request = "POST /upload/storage/v1/b/bk/o?uploadType=media&name=f&ifGenerationMatch=\(g) HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)"
    case .gcsMultipart:
      let part = "--b\r\nContent-Type: application/json\r\n\r\n{\"name\":\"f\"}\r\n--b\r\nContent-Type: text/plain\r\n\r\n\(body)\r\n--b--\r\n"
      request = "POST /upload/storage/v1/b/bk/o?uploadType=multipart&ifGenerationMatch=\(g) HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/related; boundary=b\r\nContent-Length: \(part.utf8.count)\r\nConnection: close\r\n\r\n\(part)"
    case .firebaseRaw:
      request = "POST /v0/b/bk/o?name=f&ifGenerationMatch=\(g) HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)"
    }
    let answer = s.request(request)
    let status = Int(statusLine(answer).split(separator: " ").dropFirst().first ?? "") ?? 0
    let payload = answer.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n")
    return (status, (try? JSONSerialization.jsonObject(with: Data(payload.utf8))) as? [String: Any] ?? [:])
  }

  @Test(arguments: Form.allCases) func oneOfTheWritersOfAGenerationWinsTheRestGet412(form: Form) throws {
    try scope(Server()) { s in
      for round in 0..<8 {
        let first = put(s, form, "base-\(round)", ifGenerationMatch: round == 0 ? "0" : current(s))
        #expect(first.status == 200, "round \(round): \(first)")
        let generation = current(s)
        let writers = 12
        let statuses = Mutex<[Int: Int]>([:])
        DispatchQueue.concurrentPerform(iterations: writers) { i in
          // Bodies of different lengths, so that they finish arriving in no set order.
          let status = put(s, form, String(repeating: "w\(i)-", count: 1 + (i * 7919) % 4000), ifGenerationMatch: generation).status
          statuses.withLock { $0[i] = status }
        }
        let all = statuses.withLock { $0 }
        let winners = all.filter { $0.value == 200 }.map(\.key)
        #expect(winners.count == 1, "round \(round): \(all.sorted { $0.key < $1.key })")
        #expect(all.values.allSatisfy { $0 == 200 || $0 == 412 }, "\(all)")
        if let winner = winners.first {
          let held = s.request("GET /storage/v1/b/bk/o/f?alt=media HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
          #expect(held.hasSuffix(String(repeating: "w\(winner)-", count: 1 + (winner * 7919) % 4000)), "the object is not the winner's bytes")
        }
      }
    }
  }

  func current(_ s: Server) -> String {
    let answer = s.request("GET /storage/v1/b/bk/o/f HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    let payload = answer.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n")
    let json = (try? JSONSerialization.jsonObject(with: Data(payload.utf8))) as? [String: Any] ?? [:]
    return json["generation"] as? String ?? "0"
  }
}
