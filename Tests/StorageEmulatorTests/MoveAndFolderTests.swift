import Foundation
import StorageEmulator
import TestSupport
import Testing

/// `objects.move` and the `folders` resource of HNS buckets as a raw client sees them
/// (https://cloud.google.com/storage/docs/json_api/v1/objects/move, …/folders, …/operations).
@Suite struct MoveAndFolderTests {
  func call(_ s: Server, _ method: String, _ target: String, json: String? = nil) -> (status: Int, json: [String: Any]) {
    let body = json ?? ""
    let type = json == nil ? "" : "Content-Type: application/json\r\n"
    let answer = s.request("\(method) \(target) HTTP/1.1\r\nHost: x\r\n\(type)Content-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)")
    let status = Int(statusLine(answer).split(separator: " ").dropFirst().first ?? "") ?? 0
    let payload = answer.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n")
    return (status, (try? JSONSerialization.jsonObject(with: Data(payload.utf8))) as? [String: Any] ?? [:])
  }

  static func path(_ name: String) -> String {
    name.addingPercentEncoding(withAllowedCharacters: CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")) ?? name
  }

  @discardableResult
  func put(_ s: Server, _ bucket: String, _ name: String, _ body: String, contentType: String = "text/plain") -> [String: Any] {
    let answer = s.request(
      "POST /upload/storage/v1/b/\(bucket)/o?uploadType=media&name=\(Self.path(name)) HTTP/1.1\r\nHost: x\r\nContent-Type: \(contentType)\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)")
    let payload = answer.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n")
    return (try? JSONSerialization.jsonObject(with: Data(payload.utf8))) as? [String: Any] ?? [:]
  }

  func media(_ s: Server, _ bucket: String, _ name: String) -> String? {
    let answer = s.request("GET /download/storage/v1/b/\(bucket)/o/\(Self.path(name))?alt=media HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    guard statusLine(answer).contains("200") else { return nil }
    return answer.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n")
  }

  func move(_ s: Server, _ bucket: String, _ from: String, _ to: String, _ query: String = "") -> (status: Int, json: [String: Any]) {
    call(s, "POST", "/storage/v1/b/\(bucket)/o/\(Self.path(from))/moveTo/o/\(Self.path(to))\(query.isEmpty ? "" : "?" + query)")
  }

  @Test func aMoveRenamesInOneStepKeepingBytesAndMetadata() throws {
    try scope(Server()) { s in
      let bytes = String(repeating: "0123456789abcdef", count: 3 << 16)  // 3 MiB
      let made = put(s, "bk", "big.bin", bytes, contentType: "application/x-big")
      #expect(call(s, "PATCH", "/storage/v1/b/bk/o/big.bin", json: #"{"metadata":{"colour":"blue"}}"#).status == 200)
      let received = s.emulator.bodyBytesReceived
      let moved = move(s, "bk", "big.bin", "renamed.bin", "ifSourceGenerationMatch=\(made["generation"] as! String)&ifGenerationMatch=0")
      #expect(moved.status == 200, "\(moved.json)")
      #expect(moved.json["name"] as? String == "renamed.bin")
      #expect(moved.json["metageneration"] as? String == "1")
      #expect(moved.json["contentType"] as? String == "application/x-big")
      #expect((moved.json["metadata"] as? [String: String])?["colour"] == "blue")
      #expect(moved.json["md5Hash"] as? String == made["md5Hash"] as? String)
      #expect(Int64(moved.json["generation"] as? String ?? "") ?? 0 > Int64(made["generation"] as! String)!)
      // The request carried no bytes: the server renamed them.
      #expect(s.emulator.bodyBytesReceived - received < 1024)
      #expect(media(s, "bk", "big.bin") == nil)
      #expect(media(s, "bk", "renamed.bin") == bytes)
      let listed = call(s, "GET", "/storage/v1/b/bk/o")
      #expect((listed.json["items"] as? [[String: Any]])?.compactMap { $0["name"] as? String } == ["renamed.bin"])
    }
  }

  @Test func everyPreconditionIsCheckedAndAFailureChangesNothing() throws {
    try scope(Server()) { s in
      let source = put(s, "bk", "s", "source")
      let target = put(s, "bk", "t", "target")
      let sg = source["generation"] as! String
      let tg = target["generation"] as! String
      let refused = [
        "ifSourceGenerationMatch=\(Int64(sg)! + 1)", "ifSourceGenerationNotMatch=\(sg)", "ifSourceMetagenerationMatch=2",
        "ifSourceMetagenerationNotMatch=1", "ifGenerationMatch=0", "ifGenerationMatch=\(Int64(tg)! - 1)", "ifGenerationNotMatch=\(tg)",
        "ifMetagenerationMatch=5", "ifMetagenerationNotMatch=1",
      ]
      for query in refused {
        let answer = move(s, "bk", "s", "t", query)
        #expect(answer.status == 412, "\(query): \(answer)")
        // The answer names the parameter that failed, as it was sent.
        let message = ((answer.json["error"] as? [String: Any])?["message"] as? String) ?? ""
        #expect(message.contains("(\(query.split(separator: "=")[0]))"), "\(query): \(message)")
        #expect(media(s, "bk", "s") == "source" && media(s, "bk", "t") == "target", "\(query)")
      }
      #expect(move(s, "bk", "s", "t", "ifGenerationMatch=abc").status == 400)
      #expect(move(s, "bk", "s", "s").status == 400)
      #expect(move(s, "bk", "nothing", "t").status == 404)
      // ifGenerationMatch=0 onto a free name, and the target's generation to replace it.
      #expect(move(s, "bk", "t", "u", "ifGenerationMatch=0&ifSourceMetagenerationMatch=1").status == 200)
      let replaced = move(s, "bk", "s", "u", "ifSourceGenerationMatch=\(sg)&ifGenerationNotMatch=\(sg)&ifMetagenerationMatch=1")
      #expect(replaced.status == 200, "\(replaced.json)")
      #expect(media(s, "bk", "u") == "source" && media(s, "bk", "s") == nil && media(s, "bk", "t") == nil)
    }
  }

  /// Names are bytes: `café` spelled NFC and NFD are two objects, and one moves onto the other
  /// (it answered 400 "must be different", comparing them as Swift strings).
  @Test func aMoveBetweenTwoSpellingsOfOneNameIsAMove() throws {
    try scope(Server()) { s in
      let (nfc, nfd) = ("caf\u{e9}", "cafe\u{301}")
      put(s, "bk", nfc, "composed")
      let answer = move(s, "bk", nfc, nfd, "ifGenerationMatch=0")
      #expect(answer.status == 200, "\(answer)")
      #expect(media(s, "bk", nfd) == "composed" && media(s, "bk", nfc) == nil)
    }
  }

  @Test func oddNamesSurviveThePathOfAMove() throws {
    try scope(Server()) { s in
      let names = ["a b.txt", "100%.txt", "x#y?z&w=1", "dir/sub/ü ñ 日本.txt", "moveTo/o/trap", "+plus", "back\\slash", "tab\there"]
      for (i, name) in names.enumerated() {
        put(s, "bk", name, "n\(i)")
        let target = "moved/" + name + "-\(i)"
        let answer = move(s, "bk", name, target)
        #expect(answer.status == 200, "\(name): \(answer)")
        #expect(answer.json["name"] as? String == target)
        #expect(media(s, "bk", target) == "n\(i)", "\(name)")
        #expect(media(s, "bk", name) == nil, "\(name)")
      }
    }
  }

  /// Many movers at once, each on its own thread: a source moves once (the rest get 404), and
  /// with ifGenerationMatch=0 a target is taken once (the rest get 412); no object is lost or doubled.
  @Test func concurrentMovesNeverDuplicateOrLoseAnObject() async throws {
    let s = try Server()
    put(s, "bk", "one", "only one")
    let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
      for i in 0..<8 { group.addTask { try await offPool { self.move(s, "bk", "one", "to-\(i)").status } } }
      return try await group.reduce(into: []) { $0.append($1) }
    }
    #expect(statuses.filter { $0 == 200 }.count == 1 && statuses.filter { $0 == 404 }.count == 7, "\(statuses)")
    for i in 0..<8 { put(s, "bk", "src-\(i)", "src \(i)") }
    let claims = try await withThrowingTaskGroup(of: Int.self) { group in
      for i in 0..<8 { group.addTask { try await offPool { self.move(s, "bk", "src-\(i)", "claimed", "ifGenerationMatch=0").status } } }
      return try await group.reduce(into: []) { $0.append($1) }
    }
    #expect(claims.filter { $0 == 200 }.count == 1 && claims.filter { $0 == 412 }.count == 7, "\(claims)")
    let names = (call(s, "GET", "/storage/v1/b/bk/o").json["items"] as? [[String: Any]])?.compactMap { $0["name"] as? String } ?? []
    #expect(names.count == 9 && names.contains("claimed"), "\(names)")
  }

  @Test func aMoveSurvivesARestart() throws {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("emu-move-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: root) }
    var config = StorageEmulator.Configuration(root: root)
    config.port = 0
    var port = 0
    do {
      let first = try StorageEmulator(config)
      defer { first.stop() }
      port = first.port
      let up = "POST /upload/storage/v1/b/bk/o?uploadType=media&name=a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello"
      #expect(statusLine(rawExchange(port: port, Data(up.utf8))).contains("200"))
      #expect(statusLine(rawExchange(port: port, Data("POST /storage/v1/b/bk/o/a/moveTo/o/b HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".utf8))).contains("200"))
    }
    let second = try StorageEmulator(config)
    defer { second.stop() }
    let a = rawExchange(port: second.port, Data("GET /download/storage/v1/b/bk/o/a?alt=media HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8))
    let b = rawExchange(port: second.port, Data("GET /download/storage/v1/b/bk/o/b?alt=media HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8))
    #expect(statusLine(a).contains("404") && b.hasSuffix("\r\n\r\nhello"), "\(a)\n\(b)")
  }

  @Test func aFlatBucketHasNoFolders() throws {
    try scope(Server()) { s in
      put(s, "bk", "a/b.txt", "x")
      #expect(call(s, "GET", "/storage/v1/b/bk/folders").json["items"] == nil)
      #expect(call(s, "POST", "/storage/v1/b/bk/folders", json: #"{"name":"d/"}"#).status == 400)
      #expect(call(s, "GET", "/storage/v1/b/bk/folders/a%2F").status == 400)
      #expect((call(s, "GET", "/storage/v1/b/bk/storageLayout").json["hierarchicalNamespace"] as? [String: Any])?["enabled"] as? Bool == false)
      #expect(call(s, "GET", "/storage/v1/b/bk").json["hierarchicalNamespace"] == nil)
    }
  }

  /// Issue 55: NFC "café/" (c3 a9) and NFD "café/" (65 cc 81) are two folders, as they are two
  /// prefixes of objects: made, got, listed, renamed and deleted apart. Keyed by `String`, the
  /// second was refused as existing and a listing showed one.
  @Test func foldersNamedByCanonicallyEqualStringsAreTwoFolders() throws {
    let nfc = "caf\u{e9}/"
    let nfd = "cafe\u{301}/"
    try scope(Server(hierarchical: ["hns"])) { s in
      #expect(call(s, "POST", "/storage/v1/b/hns/folders", json: #"{"name":"\#(nfc)"}"#).status == 200)
      #expect(call(s, "POST", "/storage/v1/b/hns/folders", json: #"{"name":"\#(nfd)"}"#).status == 200)
      put(s, "hns", nfd + "x/file.txt", "x")  // makes NFD's x/, not NFC's
      let names = (call(s, "GET", "/storage/v1/b/hns/folders").json["items"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String }
      #expect(names.map { Array($0.utf8) } == [nfd, nfd + "x/", nfc].map { Array($0.utf8) }, "\(names)")
      let under = (call(s, "GET", "/storage/v1/b/hns/folders?prefix=\(Self.path(nfc))").json["items"] as? [[String: Any]] ?? [])
        .compactMap { $0["name"] as? String }
      #expect(under.map { Array($0.utf8) } == [Array(nfc.utf8)], "\(under)")
      #expect(call(s, "GET", "/storage/v1/b/hns/folders/\(Self.path(nfc))").json["name"] as? String == nfc)
      #expect(call(s, "DELETE", "/storage/v1/b/hns/folders/\(Self.path(nfc))").status == 204)
      let left = (call(s, "GET", "/storage/v1/b/hns/folders").json["items"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String }
      #expect(left.map { Array($0.utf8) } == [nfd, nfd + "x/"].map { Array($0.utf8) }, "\(left)")
    }
  }

  @Test func foldersOfAnHNSBucketAreMadeListedAndDeleted() throws {
    try scope(Server(hierarchical: ["hns"])) { s in
      #expect((call(s, "GET", "/storage/v1/b/hns").json["hierarchicalNamespace"] as? [String: Any])?["enabled"] as? Bool == true)
      #expect((call(s, "GET", "/storage/v1/b/hns/storageLayout").json["hierarchicalNamespace"] as? [String: Any])?["enabled"] as? Bool == true)
      let made = call(s, "POST", "/storage/v1/b/hns/folders", json: #"{"name":"empty/"}"#)
      #expect(made.status == 200 && made.json["kind"] as? String == "storage#folder" && made.json["metageneration"] as? String == "1")
      #expect(call(s, "POST", "/storage/v1/b/hns/folders", json: #"{"name":"empty/"}"#).status == 409)
      #expect(call(s, "POST", "/storage/v1/b/hns/folders", json: #"{"name":"p/q/"}"#).status == 404)
      #expect(call(s, "POST", "/storage/v1/b/hns/folders?recursive=true", json: #"{"name":"p/q/"}"#).status == 200)
      #expect(call(s, "POST", "/storage/v1/b/hns/folders", json: #"{"name":"no-slash"}"#).status == 400)
      put(s, "hns", "full/deep/file.txt", "x")  // makes full/ and full/deep/
      #expect(call(s, "GET", "/storage/v1/b/hns/folders/full%2Fdeep%2F").json["name"] as? String == "full/deep/")
      #expect(call(s, "GET", "/storage/v1/b/hns/folders/full%2Fdeep").json["name"] as? String == "full/deep/")
      #expect(call(s, "GET", "/storage/v1/b/hns/folders/none%2F").status == 404)

      // Every folder, page by page, in byte order.
      var names: [String] = []
      var token: String?
      var pages = 0
      repeat {
        let page = call(s, "GET", "/storage/v1/b/hns/folders?pageSize=2" + (token.map { "&pageToken=" + Self.path($0) } ?? ""))
        names += (page.json["items"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String }
        token = page.json["nextPageToken"] as? String
        pages += 1
      } while token != nil && pages < 10
      #expect(names == ["empty/", "full/", "full/deep/", "p/", "p/q/"] && pages == 3, "\(names) in \(pages)")
      let oneLevel = call(s, "GET", "/storage/v1/b/hns/folders?delimiter=/").json["items"] as? [[String: Any]]
      #expect(oneLevel?.compactMap { $0["name"] as? String } == ["empty/", "full/", "p/"])
      let under = call(s, "GET", "/storage/v1/b/hns/folders?prefix=full/").json["items"] as? [[String: Any]]
      #expect(under?.compactMap { $0["name"] as? String } == ["full/", "full/deep/"])
      let range = call(s, "GET", "/storage/v1/b/hns/folders?startOffset=full/&endOffset=p/").json["items"] as? [[String: Any]]
      #expect(range?.compactMap { $0["name"] as? String } == ["full/", "full/deep/"])
      #expect(call(s, "GET", "/storage/v1/b/hns/folders?prefix=full").status == 400)

      // An empty folder lists as a prefix when asked for.
      let listed = call(s, "GET", "/storage/v1/b/hns/o?delimiter=/&includeFoldersAsPrefixes=True")
      #expect(listed.json["prefixes"] as? [String] == ["empty/", "full/", "p/"], "\(listed.json)")
      #expect(call(s, "GET", "/storage/v1/b/hns/o?delimiter=/").json["prefixes"] as? [String] == ["full/"])

      #expect(call(s, "DELETE", "/storage/v1/b/hns/folders/full%2Fdeep%2F").status == 409)
      #expect(call(s, "DELETE", "/storage/v1/b/hns/folders/p%2F").status == 409)
      #expect(call(s, "DELETE", "/storage/v1/b/hns/folders/empty%2F?ifMetagenerationMatch=2").status == 412)
      #expect(call(s, "DELETE", "/storage/v1/b/hns/folders/empty%2F?ifMetagenerationMatch=1").status == 204)
      #expect(call(s, "DELETE", "/storage/v1/b/hns/folders/empty%2F").status == 404)
      #expect(call(s, "DELETE", "/storage/v1/b/hns/o/full%2Fdeep%2Ffile.txt").status == 204)
      // The folder outlives its last object, and can then go.
      #expect(call(s, "GET", "/storage/v1/b/hns/folders/full%2Fdeep%2F").status == 200)
      #expect(call(s, "DELETE", "/storage/v1/b/hns/folders/full%2Fdeep%2F").status == 204)
    }
  }

  @Test func aBucketMadeWithHierarchicalNamespaceHasFolders() throws {
    try scope(Server()) { s in
      let made = call(s, "POST", "/storage/v1/b?project=p", json: #"{"name":"made-hns","hierarchicalNamespace":{"enabled":true}}"#)
      #expect((made.json["hierarchicalNamespace"] as? [String: Any])?["enabled"] as? Bool == true, "\(made.json)")
      #expect(call(s, "POST", "/storage/v1/b/made-hns/folders", json: #"{"name":"d/"}"#).status == 200)
      #expect(call(s, "POST", "/storage/v1/b?project=p", json: #"{"name":"made-flat"}"#).json["hierarchicalNamespace"] == nil)
      #expect(call(s, "POST", "/storage/v1/b/made-flat/folders", json: #"{"name":"d/"}"#).status == 400)
    }
  }

  @Test func aFolderRenameIsAnOperationPolledToItsEnd() throws {
    try scope(Server(hierarchical: ["hns"])) { s in
      for i in 0..<50 { put(s, "hns", "src/sub/f\(i).txt", "file \(i)") }
      put(s, "hns", "src/top.txt", "top")
      put(s, "hns", "srcx/keep.txt", "not inside src/")
      #expect(call(s, "POST", "/storage/v1/b/hns/folders", json: #"{"name":"src/empty/"}"#).status == 200)
      #expect(call(s, "POST", "/storage/v1/b/hns/folders/src%2F/renameTo/folders/src%2Finner%2F").status == 400)
      #expect(call(s, "POST", "/storage/v1/b/hns/folders/none%2F/renameTo/folders/x%2F").status == 404)
      #expect(call(s, "POST", "/storage/v1/b/hns/folders/src%2F/renameTo/folders/srcx%2F").status == 409)
      #expect(call(s, "POST", "/storage/v1/b/hns/folders/src%2F/renameTo/folders/d%2F?ifSourceMetagenerationMatch=3").status == 412)

      let started = call(s, "POST", "/storage/v1/b/hns/folders/src%2F/renameTo/folders/dst%2Fnew")
      #expect(started.status == 200 && started.json["kind"] as? String == "storage#operation", "\(started.json)")
      let name = started.json["name"] as? String ?? ""
      let id = String(name.split(separator: "/").last ?? "")
      #expect(name == "projects/_/buckets/hns/operations/\(id)")
      var polled = started.json
      #expect(waitUntil(timeout: 60) {
        polled = call(s, "GET", "/storage/v1/b/hns/operations/\(id)").json
        return polled["done"] as? Bool == true
      }, "the rename never finished: \(polled)")
      #expect(polled["error"] == nil && (polled["response"] as? [String: Any])?["name"] as? String == "dst/new/", "\(polled)")
      #expect(media(s, "hns", "dst/new/sub/f7.txt") == "file 7" && media(s, "hns", "dst/new/top.txt") == "top")
      #expect(media(s, "hns", "src/sub/f7.txt") == nil && media(s, "hns", "srcx/keep.txt") == "not inside src/")
      let all = (call(s, "GET", "/storage/v1/b/hns/o").json["items"] as? [[String: Any]])?.compactMap { $0["name"] as? String } ?? []
      #expect(all.count == 52 && all.filter { $0.hasPrefix("src/") }.isEmpty, "\(all)")
      let folders = (call(s, "GET", "/storage/v1/b/hns/folders").json["items"] as? [[String: Any]])?.compactMap { $0["name"] as? String }
      #expect(folders == ["dst/", "dst/new/", "dst/new/empty/", "dst/new/sub/", "srcx/"], "\(String(describing: folders))")
      #expect(call(s, "GET", "/storage/v1/b/hns/operations/nope").status == 404)
      #expect(call(s, "GET", "/storage/v1/b/other/operations/\(id)").status == 404)
    }
  }
}
