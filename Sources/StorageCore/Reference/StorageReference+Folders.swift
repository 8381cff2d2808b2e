// Folders of buckets with a hierarchical namespace (HNS): on such a bucket a folder is a
// resource of its own (it exists empty, and renames in one step on the server), where a flat
// bucket only has names with slashes. Only the GCS JSON API has them; over the Firebase API a
// bucket is taken as flat. A reference stands for the folder `fullPath + "/"`.
import Foundation

extension StorageReference {
  /// The HTTP status a folder call fails with where the API has no folders (the Firebase API).
  package static let noFoldersStatus = 501

  private func gcsWire(_ operation: String) throws(StorageError) -> GCSWire {
    guard let wire = storage.wire as? GCSWire else {
      throw StorageError(
        code: .unknown, object: description, httpStatus: Self.noFoldersStatus, detail: "\(operation): this API has no folders")
    }
    return wire
  }

  /// The folder's name as the folders resource spells it.
  private var folderName: String { fullPath + "/" }

  /// Whether the bucket has a hierarchical namespace (`storageLayout`). A server that does not
  /// know the call (404, 400, 405, 501) or does not let this client ask (403) has none that
  /// this client can use: false. Other failures (the server away) are thrown: nothing is known.
  package func bucketIsHierarchical() async throws(StorageError) -> Bool {
    guard storage.api == .gcs, let wire = storage.wire as? GCSWire else { return false }
    let response: HTTPResponse
    do throws(StorageError) {
      response = try await runnerForOperations.run(wire.storageLayout(bucket))
    } catch where [400, 403, 404, 405, 501].contains(error.httpStatus ?? 0) {
      return false
    }
    let json = (try? ExactText.jsonObject(with: response.body)) as? [String: Any]
    return (json?["hierarchicalNamespace"] as? [String: Any])?["enabled"] as? Bool == true
  }

  /// Makes this folder, and its missing parents. False when it was there already (409).
  @discardableResult
  package func createFolder() async throws(StorageError) -> Bool {
    try requireObject("createFolder")
    let wire = try gcsWire("createFolder")
    do throws(StorageError) {
      _ = try await runnerForOperations.run(wire.insertFolder(bucket, folderName, recursive: true))
      return true
    } catch where error.httpStatus == 409 {
      return false
    }
  }

  /// Whether this folder exists (as a resource: an HNS bucket's empty folder has no object).
  package func folderExists() async throws(StorageError) -> Bool {
    try requireObject("folderExists")
    let wire = try gcsWire("folderExists")
    do throws(StorageError) {
      _ = try await runnerForOperations.run(wire.getFolder(bucket, folderName))
      return true
    } catch where error.code == .objectNotFound {
      return false
    }
  }

  /// Deletes this folder. The server refuses one that holds an object or a folder: HTTP 409
  /// (`StorageError.httpStatus`); one that is not there fails with `objectNotFound`.
  package func deleteFolder() async throws(StorageError) {
    try requireObject("deleteFolder")
    let wire = try gcsWire("deleteFolder")
    _ = try await runnerForOperations.run(wire.deleteFolder(bucket, folderName))
  }

  /// Renames this folder, with everything in it, to `target` in one step on the server
  /// (`folders.rename`), and waits for the long-running operation to end, asking after it from
  /// 20 ms, doubling up to a second; `progress` hears its percentage when the server gives one.
  /// Fails with `objectNotFound` when the source is not there, HTTP 409 when the target is (or
  /// objects are under its name), and as the operation's error says when it failed. A request
  /// retried after its answer was lost (404 or 409 then, from the request or from the second
  /// operation it started), and an operation the server forgot (a restart: 404 while asking),
  /// are judged by the names: done if the target is there and the source is not.
  package func renameFolder(to target: StorageReference, progress: (@Sendable (Int) -> Void)? = nil) async throws(StorageError) {
    try requireObject("renameFolder")
    try target.requireObject("renameFolder")
    let wire = try gcsWire("renameFolder")
    let started: HTTPResponse
    do throws(StorageError) {
      started = try await runnerForOperations.run(wire.renameFolder(bucket, folderName, to: target.folderName))
    } catch where error.code == .objectNotFound || error.httpStatus == 409 {
      // A retry after an answer that was lost finds the source gone (404), or the first try's
      // rename under way (409): done if the names come to say so.
      if try await renamedByAnEarlierTry(to: target) { return }
      throw error
    }
    var state = try Self.operationState(started.body, object: description)
    var pause = Duration.milliseconds(20)
    while !state.done {
      if let percent = state.percent { progress?(percent) }
      try? await Task.sleep(for: pause)
      pause = min(pause * 2, .seconds(1))
      do throws(StorageError) {
        let polled = try await runnerForOperations.run(wire.operation(bucket, state.id))
        state = try Self.operationState(polled.body, object: description)
      } catch where error.code == .objectNotFound {
        if try await renamedByAnEarlierTry(to: target) { return }
        throw StorageError(
          code: .unknown, object: description, detail: "the server forgot the rename to \(target.folderName) before it was done")
      }
    }
    progress?(100)
    if let failure = state.error {
      // A retried request's duplicate fails so once the first one has moved everything.
      if failure.code == .objectNotFound || failure.httpStatus == 409, try await renamedByAnEarlierTry(to: target) { return }
      throw failure
    }
  }

  /// Whether the names say this folder was renamed to `target` (the target there, the source
  /// not), asked again while the source is still there (an earlier try's rename may be under
  /// way) for as long as an operation's retries may take, from 20 ms, doubling up to a second.
  private func renamedByAnEarlierTry(to target: StorageReference) async throws(StorageError) -> Bool {
    let clock = ContinuousClock()
    let deadline = clock.now + .milliseconds(Int(storage.maxOperationRetryTime * 1000))
    var pause = Duration.milliseconds(20)
    while true {
      let sourceThere = try await folderExists()
      if !sourceThere { return try await target.folderExists() }
      guard try await target.folderExists(), clock.now + pause < deadline else { return false }
      try? await Task.sleep(for: pause)
      pause = min(pause * 2, .seconds(1))
    }
  }

  /// What an operation's JSON says: its id (the last part of its name), whether it is done,
  /// its progress, and its error (`code` an HTTP status or a google.rpc code).
  private static func operationState(_ body: Data, object: String) throws(StorageError)
    -> (id: String, done: Bool, percent: Int?, error: StorageError?)
  {
    guard let json = (try? ExactText.jsonObject(with: body)) as? [String: Any], let name = json["name"] as? String,
      let id = name.split(separator: "/").last
    else {
      throw StorageError(code: .unknown, object: object, detail: "the server's answer is not a long-running operation")
    }
    let common = (json["metadata"] as? [String: Any])?["commonMetadata"] as? [String: Any]
    let percent = (common?["progressPercent"] as? Int).flatMap { $0 >= 0 ? $0 : nil }
    var failure: StorageError? = nil
    if let error = json["error"] as? [String: Any] {
      let message = error["message"] as? String ?? "the operation failed"
      // google.rpc codes: 5 not found, 6 already exists, 9 failed precondition.
      let status: Int =
        switch error["code"] as? Int ?? 0 {
        case 5, 404: 404
        case 6, 409: 409
        case 9, 412: 412
        case let other: other >= 400 ? other : 500
        }
      failure = StorageError(code: StorageError.code(forStatus: status), object: object, httpStatus: status, detail: message)
    }
    return (String(id), json["done"] as? Bool == true, percent, failure)
  }
}
