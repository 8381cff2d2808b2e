import Foundation
import TestSupport
import StorageEmulator
import Testing

/// What Google's own tools (gcloud storage, gsutil) send and rely on, as the JSON API documents
/// it (https://cloud.google.com/storage/docs/json_api/v1): scripts/interop.sh runs the tools
/// themselves; these pin each form on the raw wire.
@Suite struct GoogleToolFormTests {
  func call(_ s: Server, _ method: String, _ target: String, json: String? = nil) -> (status: Int, json: [String: Any]) {
    let body = json ?? ""
    let type = json == nil ? "" : "Content-Type: application/json\r\n"
    let answer = s.request("\(method) \(target) HTTP/1.1\r\nHost: x\r\n\(type)Content-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)")
    let status = Int(statusLine(answer).split(separator: " ").dropFirst().first ?? "") ?? 0
    let payload = answer.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n")
    return (status, (try? JSONSerialization.jsonObject(with: Data(payload.utf8))) as? [String: Any] ?? [:])
  }

  func media(_ s: Server, _ bucket: String, _ name: String) -> String {
    let answer = s.request("GET /download/storage/v1/b/\(bucket)/o/\(name)?alt=media HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    return answer.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n")
  }

  /// Python's email generator, which gcloud and gsutil build multipart bodies with, ends lines
  /// with LF alone and quotes the boundary with single quotes; Google's servers take both.
  func pythonMultipart(_ s: Server, bucket: String, name: String, _ content: String) -> (status: Int, json: [String: Any]) {
    let boundary = "===============2214275065105959829=="
    let body = "--\(boundary)\nContent-Type: application/json\nMIME-Version: 1.0\n\n{\"name\": \"\(name)\"}\n--\(boundary)\nContent-Type: text/plain\nMIME-Version: 1.0\nContent-Transfer-Encoding: binary\n\n\(content)\n--\(boundary)--\n"
    let answer = s.request(
      "POST /upload/storage/v1/b/\(bucket)/o?uploadType=multipart HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/related; boundary='\(boundary)'\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)")
    let status = Int(statusLine(answer).split(separator: " ").dropFirst().first ?? "") ?? 0
    let payload = answer.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n")
    return (status, (try? JSONSerialization.jsonObject(with: Data(payload.utf8))) as? [String: Any] ?? [:])
  }

  @Test func aMultipartBodyWithLFLinesAndAQuotedBoundaryIsTaken() throws {
    try scope(Server()) { s in
      let made = pythonMultipart(s, bucket: "bk", name: "py.txt", "hello\n")
      #expect(made.status == 200, "\(made.json)")
      #expect(made.json["size"] as? String == "6")
      #expect(media(s, "bk", "py.txt") == "hello\n")
      // Objects the GCS API made carry no Firebase download token until v0 is asked for one.
      #expect((made.json["metadata"] as? [String: Any])?["firebaseStorageDownloadTokens"] == nil)
      let v0 = call(s, "GET", "/v0/b/bk/o/py.txt")
      #expect((v0.json["downloadTokens"] as? String)?.isEmpty == false)
    }
  }

  /// `compose`: the bytes in order, a CRC32C and no MD5 (GCS keeps none for a composite), a
  /// componentCount; a source's generation precondition is checked.
  @Test func composeJoinsSourcesAndKeepsNoMD5() throws {
    try scope(Server()) { s in
      let a = pythonMultipart(s, bucket: "bk", name: "a", "first-")
      _ = pythonMultipart(s, bucket: "bk", name: "b", "second")
      let generation = try #require(a.json["generation"] as? String)
      let request = "{\"sourceObjects\":[{\"name\":\"a\",\"objectPreconditions\":{\"ifGenerationMatch\":\"\(generation)\"}},{\"name\":\"b\"}],\"destination\":{\"contentType\":\"text/x-joined\"}}"
      let joined = call(s, "POST", "/storage/v1/b/bk/o/joined/compose", json: request)
      #expect(joined.status == 200, "\(joined.json)")
      #expect(joined.json["componentCount"] as? Int == 2 && joined.json["md5Hash"] == nil && joined.json["crc32c"] != nil)
      #expect(joined.json["contentType"] as? String == "text/x-joined")
      #expect(media(s, "bk", "joined") == "first-second")
      let again = call(s, "POST", "/storage/v1/b/bk/o/joined2/compose", json: "{\"sourceObjects\":[{\"name\":\"joined\"},{\"name\":\"a\"}]}")
      #expect(again.json["componentCount"] as? Int == 3)
      let stale = "{\"sourceObjects\":[{\"name\":\"a\",\"objectPreconditions\":{\"ifGenerationMatch\":\"1\"}}]}"
      #expect(call(s, "POST", "/storage/v1/b/bk/o/x/compose", json: stale).status == 412)
      #expect(call(s, "POST", "/storage/v1/b/bk/o/x/compose", json: "{\"sourceObjects\":[{\"name\":\"nope\"}]}").status == 404)
    }
  }

  /// A rewrite may take many calls: with `maxBytesRewrittenPerCall`, each call that is not the
  /// last answers `done: false` and a token the next call presents.
  @Test func aRewriteInStepsHandsOnAToken() throws {
    try scope(Server()) { s in
      let content = String(repeating: "0123456789abcdef", count: (3 << 20) / 16)
      let upload = call(s, "POST", "/upload/storage/v1/b/bk/o?uploadType=media&name=big", json: content)
      #expect(upload.status == 200)
      var target = "/storage/v1/b/bk/o/big/rewriteTo/b/other/o/copy?maxBytesRewrittenPerCall=1048576"
      var steps = 0
      var last: [String: Any] = [:]
      while steps < 10 {
        let step = call(s, "POST", target)
        #expect(step.status == 200, "\(step.json)")
        steps += 1
        last = step.json
        if step.json["done"] as? Bool == true { break }
        let token = try #require(step.json["rewriteToken"] as? String)
        target = "/storage/v1/b/bk/o/big/rewriteTo/b/other/o/copy?maxBytesRewrittenPerCall=1048576&rewriteToken="
          + (token.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? token)
      }
      #expect(steps == 3)
      #expect(last["totalBytesRewritten"] as? String == String(3 << 20))
      #expect(media(s, "other", "copy") == content)
      #expect(call(s, "POST", "/storage/v1/b/bk/o/big/rewriteTo/b/other/o/c2?maxBytesRewrittenPerCall=1000").status == 400)
    }
  }

  /// `fields` cuts an answer down to the named parts: `items(name,size)`, `a/b`, `nextPageToken`.
  @Test func fieldsSelectPartsOfTheAnswer() throws {
    try scope(Server()) { s in
      for name in ["f1", "f2", "f3"] { _ = pythonMultipart(s, bucket: "bk", name: name, name) }
      let page = call(s, "GET", "/storage/v1/b/bk/o?maxResults=2&fields=items(name,size),nextPageToken")
      let items = try #require(page.json["items"] as? [[String: Any]])
      #expect(items.count == 2 && items.allSatisfy { Set($0.keys) == ["name", "size"] }, "\(items)")
      #expect(Set(page.json.keys) == ["items", "nextPageToken"])
      let one = call(s, "GET", "/storage/v1/b/bk/o/f1?fields=name,generation")
      #expect(Set(one.json.keys) == ["name", "generation"])
      #expect(call(s, "GET", "/storage/v1/b/bk/o/f1?fields=name(").status == 400)
    }
  }

  /// `matchGlob` filters an object list: `*` stays within a folder, `**` crosses them, `{a,b}`.
  @Test func matchGlobFiltersTheList() throws {
    try scope(Server()) { s in
      for name in ["a/x.jpg", "a/y.png", "a/deep/z.jpg", "b.jpg"] { _ = pythonMultipart(s, bucket: "bk", name: name, name) }
      func names(_ glob: String) -> [String] {
        let encoded = glob.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? glob
        return (call(s, "GET", "/storage/v1/b/bk/o?matchGlob=\(encoded)").json["items"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String }
      }
      #expect(names("a/*.jpg") == ["a/x.jpg"])
      #expect(names("a/**.jpg") == ["a/deep/z.jpg", "a/x.jpg"])
      #expect(names("**.{jpg,png}") == ["a/deep/z.jpg", "a/x.jpg", "a/y.png", "b.jpg"])
      #expect(names("a/[!x]*") == ["a/y.png"])
      #expect(call(s, "GET", "/storage/v1/b/bk/o?matchGlob=%5Ba").status == 400)
    }
  }

  /// `includeTrailingDelimiter` lists a folder's placeholder (`a/`) among the items as well as
  /// its prefix, counted once toward `maxResults`; without it, only the prefix.
  @Test func includeTrailingDelimiterListsPlaceholders() throws {
    try scope(Server()) { s in
      for name in ["a/", "a/x", "b/y", "c"] { _ = pythonMultipart(s, bucket: "bk", name: name, name) }
      func page(_ query: String) -> (items: [String], prefixes: [String], token: String?) {
        let json = call(s, "GET", "/storage/v1/b/bk/o?delimiter=/\(query)").json
        return ((json["items"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String }, json["prefixes"] as? [String] ?? [],
          json["nextPageToken"] as? String)
      }
      let with = page("&includeTrailingDelimiter=true")
      #expect(with.items == ["a/", "c"] && with.prefixes == ["a/", "b/"], "\(with)")
      let without = page("")
      #expect(without.items == ["c"] && without.prefixes == ["a/", "b/"], "\(without)")
      let first = page("&includeTrailingDelimiter=true&maxResults=2")
      #expect(first.items == ["a/"] && first.prefixes == ["a/", "b/"] && first.token != nil, "\(first)")
    }
  }

  /// Buckets: insert, list by project (with the buckets that hold objects), a second insert of
  /// the name is 409, deleting a bucket that holds objects is 409, an empty one goes.
  @Test func bucketsAreMadeListedAndDeleted() throws {
    try scope(Server()) { s in
      #expect(call(s, "POST", "/storage/v1/b?project=p1", json: "{\"name\":\"made-here\"}").status == 200)
      #expect(call(s, "POST", "/storage/v1/b?project=p1", json: "{\"name\":\"made-here\"}").status == 409)
      #expect(call(s, "POST", "/storage/v1/b?project=p1", json: "{\"name\":\"Bad Name\"}").status == 400)
      _ = pythonMultipart(s, bucket: "with-objects", name: "x", "x")
      let listed = call(s, "GET", "/storage/v1/b?project=p1")
      let names = (listed.json["items"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String }
      #expect(names == ["made-here", "with-objects"], "\(listed.json)")
      let other = call(s, "GET", "/storage/v1/b?project=p2")
      #expect((other.json["items"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String } == ["with-objects"])
      #expect(call(s, "GET", "/storage/v1/b").status == 400)
      #expect(call(s, "DELETE", "/storage/v1/b/with-objects").status == 409)
      #expect(call(s, "DELETE", "/storage/v1/b/made-here").status == 204)
      #expect(call(s, "GET", "/storage/v1/b/bk/storageLayout").json["kind"] as? String == "storage#storageLayout")
      #expect(call(s, "GET", "/storage/v1/b/bk/managedFolders").status == 200)
      // Resumable uploads may start at /resumable/upload/…, as gcloud starts them.
      let start = s.request("POST /resumable/upload/storage/v1/b/bk/o?uploadType=resumable&name=r HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
      #expect(start.hasPrefix("HTTP/1.1 200") && start.contains("upload_id="), "\(start)")
    }
  }
}
