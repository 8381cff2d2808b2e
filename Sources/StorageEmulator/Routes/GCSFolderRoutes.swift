// The `folders` resource of buckets with a hierarchical namespace: insert, get, list, delete and
// rename, which answers a long-running operation polled at `b/B/operations/ID`. The rename is
// carried out on another thread, all of it in one step of the object index, so a poll sees it
// either not begun or done. On a flat bucket the collection lists nothing (gcloud asks before
// `cp -r`) and the other methods answer 400, as GCS does.
import Dispatch
import Foundation
import Synchronization

/// Long-running operations, kept in memory: a restarted server has forgotten them (GCS keeps
/// them for a while; a client polling across a restart gets 404 and looks at the names).
final class Operations: Sendable {
  struct Operation {
    var id: String
    var bucket: String
    var source: String
    var target: String
    var created: Int64
    var updated: Int64
    var done = false
    var error: (code: Int, message: String)?
    var folder: FolderStore.Folder?
  }

  private let all = Mutex<[String: Operation]>([:])

  func add(_ operation: Operation) { all.withLock { $0[operation.id] = operation } }
  func get(_ id: String) -> Operation? { all.withLock { $0[id] } }
  func finish(_ id: String, folder: FolderStore.Folder?, error: (Int, String)?) {
    all.withLock { all in
      all[id]?.done = true
      all[id]?.updated = Int64(Date().timeIntervalSince1970 * 1000)
      all[id]?.folder = folder
      all[id]?.error = error.map { (code: $0.0, message: $0.1) }
    }
  }
}

extension GCSRoutes {
  private func notHierarchical(_ bucket: String) -> ServerResponse? {
    registry.isHierarchical(bucket)
      ? nil : Self.error(400, "invalid", "The bucket \(bucket) does not have hierarchical namespace enabled.")
  }

  func folderResource(_ folder: FolderStore.Folder, base: String) -> [String: Any] {
    [
      "kind": "storage#folder", "id": "\(folder.bucket)/\(folder.name)", "name": folder.name, "bucket": folder.bucket,
      "selfLink": "\(base)/storage/v1/b/\(FirebaseRoutes.encode(folder.bucket))/folders/\(FirebaseRoutes.encode(folder.name))",
      "metageneration": String(folder.metageneration), "createTime": ObjectRecord.formatTime(folder.created),
      "updateTime": ObjectRecord.formatTime(folder.updated),
    ]
  }

  private func metagenerationFailure(_ folder: FolderStore.Folder, _ query: [String: String], prefix: String = "if") -> ServerResponse? {
    let failed = GCSRoutes.error(412, "conditionNotMet", "At least one of the pre-conditions you specified did not hold.")
    if let v = query[prefix + "MetagenerationMatch"], Int64(v) != folder.metageneration { return failed }
    if let v = query[prefix + "MetagenerationNotMatch"], Int64(v) == folder.metageneration { return failed }
    return nil
  }

  /// GET lists (`prefix`, which ends in `/`; `delimiter=/` for one level; `startOffset`,
  /// `endOffset`; `pageSize` (or `maxResults`) and `pageToken`); POST inserts (`recursive=true`
  /// makes missing parents, else a missing parent is 404; apitools spells it `True`).
  func folderCollection(_ bucket: String, request: inout ServerRequest) -> ServerResponse {
    switch request.method {
    case "GET":
      guard registry.isHierarchical(bucket) else { return .json(200, ["kind": "storage#folders"]) }
      let prefix = request.query["prefix"] ?? ""
      guard prefix.isEmpty || prefix.utf8.last == UInt8(ascii: "/") else { return Self.error(400, "invalid", "The prefix must end with /.") }
      if let d = request.query["delimiter"], d != "/" { return Self.error(400, "invalid", "The only delimiter supported is /.") }
      var pageSize = 1000
      if let text = request.query["pageSize"] ?? request.query["maxResults"] {
        guard let n = Int(text), n > 0 else { return Self.error(400, "invalid", "pageSize must be a positive integer") }
        pageSize = min(n, 1000)
      }
      var start = request.query["startOffset"]
      if let token = request.query["pageToken"] {
        guard let data = Data(base64Encoded: token), let name = String(validating: data, as: UTF8.self) else {
          return Self.error(400, "invalid", "Invalid page token")
        }
        start = name
      }
      let found = folders.list(bucket, prefix: prefix, oneLevel: request.query["delimiter"] == "/", start: start, end: request.query["endOffset"])
      var body: [String: Any] = ["kind": "storage#folders"]
      let page = found.prefix(pageSize)
      if !page.isEmpty { body["items"] = page.map { folderResource($0, base: request.publicBase) } }
      if found.count > pageSize { body["nextPageToken"] = Data(found[pageSize].name.utf8).base64EncodedString() }
      return .json(200, body)
    case "POST":
      if let refused = notHierarchical(bucket) { return refused }
      guard let json = request.jsonObjectBody(), let name = json["name"] as? String else {
        return Self.error(400, "required", "Required field name is missing")
      }
      if let problem = FolderStore.nameProblem(name) { return Self.error(400, "invalid", problem) }
      switch folders.insert(bucket, name, recursive: request.query["recursive"]?.lowercased() == "true") {
      case .made(let folder): return .json(200, folderResource(folder, base: request.publicBase))
      case .exists: return Self.error(409, "conflict", "The folder you tried to create already exists.")
      case .noParent(let parent): return Self.error(404, "notFound", "The parent folder \(parent) does not exist.")
      }
    default:
      return Self.error(405, "invalid", "method not allowed")
    }
  }

  /// GET answers the folder; DELETE removes it when empty (no object and no folder inside:
  /// else 409), both with `ifMetagenerationMatch`/`NotMatch`.
  func folder(_ bucket: String, _ name: String, request: inout ServerRequest) -> ServerResponse {
    if let refused = notHierarchical(bucket) { return refused }
    guard let folder = folders.get(bucket, name) else { return Self.error(404, "notFound", "The folder \(bucket)/\(name) does not exist.") }
    if let failed = metagenerationFailure(folder, request.query) { return failed }
    switch request.method {
    case "GET":
      return .json(200, folderResource(folder, base: request.publicBase))
    case "DELETE":
      let objects = store.list(bucket: bucket, prefix: name, delimiter: nil, pageToken: nil, maxResults: 1)
      guard objects.items.isEmpty, !folders.hasSubfolders(bucket, name) else {
        return Self.error(409, "conflict", "The folder you tried to delete is not empty.")
      }
      return folders.delete(bucket, name) ? ServerResponse(status: 204) : Self.error(404, "notFound", "The folder \(bucket)/\(name) does not exist.")
    default:
      return Self.error(405, "invalid", "method not allowed")
    }
  }

  /// Starts the rename of `source` (and everything in it) to `target` and answers its operation,
  /// not yet done. 404 without the source, 409 when the target exists, 400 for a target inside
  /// the source; `ifSourceMetagenerationMatch`/`NotMatch` are checked against the source.
  func renameFolder(_ bucket: String, _ source: String, _ target: String, request: inout ServerRequest) -> ServerResponse {
    guard request.method == "POST" else { return Self.error(405, "invalid", "method not allowed") }
    if let refused = notHierarchical(bucket) { return refused }
    if let problem = FolderStore.nameProblem(source) ?? FolderStore.nameProblem(target) { return Self.error(400, "invalid", problem) }
    guard let folder = folders.get(bucket, source) else { return Self.error(404, "notFound", "The folder \(bucket)/\(source) does not exist.") }
    if let failed = metagenerationFailure(folder, request.query, prefix: "ifSource") { return failed }
    // Bytes: NFD "cafe\u{301}/x/" has NFC "caf\u{e9}/" for a `hasPrefix`, and is not inside it.
    guard !target.utf8.starts(with: source.utf8) else { return Self.error(400, "invalid", "A folder cannot be renamed into itself.") }
    guard folders.get(bucket, target) == nil else { return Self.error(409, "conflict", "The destination folder \(target) already exists.") }
    let now = Int64(Date().timeIntervalSince1970 * 1000)
    let id = UUID().uuidString.lowercased()
    operations.add(Operations.Operation(id: id, bucket: bucket, source: source, target: target, created: now, updated: now))
    let (store, folders, operations) = (self.store, self.folders, self.operations)
    DispatchQueue.global().async {
      guard store.moveAll(bucket: bucket, prefix: source, newPrefix: target) != nil else {
        operations.finish(id, folder: nil, error: (409, "Objects already exist under the destination folder \(target)."))
        return
      }
      folders.rename(bucket, source, to: target)
      operations.finish(id, folder: folders.get(bucket, target), error: nil)
    }
    return .json(200, operationResource(operations.get(id)!, base: request.publicBase))
  }

  func operation(_ bucket: String, _ id: String, request: inout ServerRequest) -> ServerResponse {
    guard request.method == "GET" else { return Self.error(405, "invalid", "method not allowed") }
    guard let operation = operations.get(id), operation.bucket == bucket else {
      return Self.error(404, "notFound", "The operation \(id) does not exist.")
    }
    return .json(200, operationResource(operation, base: request.publicBase))
  }

  private func operationResource(_ operation: Operations.Operation, base: String) -> [String: Any] {
    var resource: [String: Any] = [
      "kind": "storage#operation", "name": "projects/_/buckets/\(operation.bucket)/operations/\(operation.id)",
      "selfLink": "\(base)/storage/v1/b/\(FirebaseRoutes.encode(operation.bucket))/operations/\(operation.id)",
      "done": operation.done,
      "metadata": [
        "@type": "type.googleapis.com/google.storage.control.v2.RenameFolderMetadata",
        "commonMetadata": [
          "createTime": ObjectRecord.formatTime(operation.created), "updateTime": ObjectRecord.formatTime(operation.updated),
          "type": "rename-folder", "requestedCancellation": false, "progressPercent": operation.done ? 100 : -1,
        ],
        "sourceFolderId": operation.source, "destinationFolderId": operation.target,
      ],
    ]
    if let error = operation.error {
      resource["error"] = ["code": error.code, "message": error.message]
    } else if let folder = operation.folder {
      var response = folderResource(folder, base: base)
      response["@type"] = "type.googleapis.com/google.storage.control.v2.Folder"
      resource["response"] = response
    }
    return resource
  }
}
