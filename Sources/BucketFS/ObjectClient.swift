import Foundation
import StorageCore
import Synchronization

/// What the filesystem needs from a bucket. The real one goes through StorageCore; tests use an
/// in-memory one so that the filesystem logic runs without a kernel or a server.
package protocol ObjectClient: Sendable {
  var bucket: String { get }
  func metadata(of name: String) async throws(BucketError) -> StorageMetadata
  /// One page of names under `prefix` with delimiter `/`; with the GCS API, the items include
  /// the placeholders (`a/`) of the folders listed, with their metadata.
  func listPage(prefix: String, pageToken: String?, maxResults: Int?) async throws(BucketError) -> ListPage
  /// One page of up to 1,000 names under `prefix` at every depth (no delimiter: no prefixes,
  /// folder placeholders among the items): a pin's tree costs a request per 1,000 objects, not
  /// one per folder. With the GCS API the items carry their metadata; a v0 page has names only.
  func listTreePage(prefix: String, pageToken: String?) async throws(BucketError) -> ListPage
  /// Bytes `range` of generation `generation`; another generation fails with `objectChanged`.
  func read(_ name: String, range: Range<Int64>, generation: Int64) async throws(BucketError) -> Data
  /// Bytes `range` of generation `generation`, handed to `deliver` as they arrive with their
  /// offset in the object (each byte once, in order); returns how many were delivered.
  /// `deliver` runs on the transfer thread and must not wait: when it cannot take bytes now it
  /// answers `.pause`, and the same bytes come again once `valve` is opened.
  func read(
    _ name: String, range: Range<Int64>, generation: Int64,
    valve: DeliveryValve?, into deliver: @escaping @Sendable (UnsafeRawBufferPointer, Int64) -> HTTPTransfer.Flow
  ) async throws(BucketError) -> Int64
  /// The Firebase download URL for a token.
  func downloadURL(name: String, token: String) -> String
  /// Stores the file at `path` as object `name` — only while the object's generation is
  /// `ifGenerationMatch` (0: only if there is none; nil: whatever is there).
  func upload(
    _ name: String, file path: String, contentType: String, custom: [String: String], ifGenerationMatch: Int64?,
    session: UploadSession?
  ) async throws(BucketError) -> StorageMetadata
  /// Deletes object `name`, only while its generation is `ifGenerationMatch` (nil: any).
  func delete(_ name: String, ifGenerationMatch: Int64?) async throws(BucketError)
  /// Sets the content type (when given) and custom metadata entries of object `name`, only while
  /// its generation is `ifGenerationMatch`.
  func updateMetadata(
    _ name: String, contentType: String?, custom: [String: String], ifGenerationMatch: Int64?
  ) async throws(BucketError) -> StorageMetadata
  /// Whether `copy` works: the bucket copies objects itself, without the bytes passing here.
  var copiesOnServer: Bool { get }
  /// Whether a listing page carries each object's attributes (the GCS JSON API's does; a
  /// Firebase Storage REST page has names only).
  var listsAttributes: Bool { get }
  /// The name in the bucket of `name` as this client sees it (a view below a prefix adds it).
  func bucketName(_ name: String) -> String
  /// `bucketName` as this client sees it; nil when it is outside the client's view.
  func viewName(_ bucketName: String) -> String?
  /// The client for names in the bucket (itself, unless it is a view below a prefix).
  var bucketWide: any ObjectClient { get }
  /// Copies generation `generation` of `source` to `target` on the server (bytes and metadata),
  /// only while `target`'s generation is `ifGenerationMatch`; a generation no longer kept fails
  /// with `objectNotFound`.
  func copy(_ source: String, generation: Int64, to target: String, ifGenerationMatch: Int64?) async throws(BucketError) -> StorageMetadata
  /// Whether `move` is worth trying: the API has it and the server has not said it lacks it.
  var movesOnServer: Bool { get }
  /// Moves generation `generation` of `source` to `target` in one step on the server (bytes and
  /// metadata, no copy), only while `target`'s generation is `ifGenerationMatch`; a server
  /// without the call fails with `BucketError.isMoveUnsupported`, and nothing changed.
  func move(_ source: String, generation: Int64, to target: String, ifGenerationMatch: Int64?) async throws(BucketError) -> StorageMetadata

  // Folders as resources (`ObjectClient+Folders.swift`); folder names end in "/".
  /// Whether the bucket's folders are resources of their own (a hierarchical namespace):
  /// asked of the server the first time, then known. Thrown while the server cannot say.
  func foldersAreResources() async throws(BucketError) -> Bool
  /// What `foldersAreResources` found, without asking: nil while nothing is known.
  var knownFoldersAreResources: Bool? { get }
  /// Makes folder `folder` and its missing parents; one that is there already is fine.
  func createFolder(_ folder: String) async throws(BucketError)
  /// Deletes folder `folder`: `objectNotFound` when it is not there, HTTP 409 when it holds
  /// something on the server.
  func deleteFolder(_ folder: String) async throws(BucketError)
  func folderExists(_ folder: String) async throws(BucketError) -> Bool
  /// Renames `source` and everything in it to `target` in one step on the server, waiting
  /// until it is done.
  func renameFolder(_ source: String, to target: String) async throws(BucketError)
}

extension ObjectClient {
  /// For in-memory test clients, which list one level at a time: every level under `prefix`
  /// as one page (the real client and every client that wraps another answer it themselves).
  package func listTreePage(prefix: String, pageToken: String?) async throws(BucketError) -> ListPage {
    var items: [String] = []
    var metadata: [StorageMetadata?] = []
    var level = [prefix]
    while let folder = level.popLast() {
      let page = try await ListPage.all { token async throws(BucketError) in try await listPage(prefix: folder, pageToken: token, maxResults: nil) }
      items += page.items
      metadata += page.itemMetadata
      level += page.prefixes
    }
    return ListPage(prefixes: [], items: items, itemMetadata: metadata, nextPageToken: nil)
  }

  /// A client that cannot change the bucket (a read-only test double) refuses.
  package func upload(
    _ name: String, file path: String, contentType: String, custom: [String: String], ifGenerationMatch: Int64?,
    session: UploadSession?
  ) async throws(BucketError) -> StorageMetadata {
    throw BucketError(code: .unauthorized, object: name, detail: "this client cannot write")
  }

  package func delete(_ name: String, ifGenerationMatch: Int64?) async throws(BucketError) {
    throw BucketError(code: .unauthorized, object: name, detail: "this client cannot delete")
  }

  package func updateMetadata(
    _ name: String, contentType: String?, custom: [String: String], ifGenerationMatch: Int64?
  ) async throws(BucketError) -> StorageMetadata {
    throw BucketError(code: .unauthorized, object: name, detail: "this client cannot change metadata")
  }

  package var copiesOnServer: Bool { false }
  package var listsAttributes: Bool { false }
  package func bucketName(_ name: String) -> String { name }
  package func viewName(_ bucketName: String) -> String? { bucketName }
  package var bucketWide: any ObjectClient { self }

  package func copy(_ source: String, generation: Int64, to target: String, ifGenerationMatch: Int64?) async throws(BucketError)
    -> StorageMetadata
  {
    throw BucketError(code: .invalidArgument, object: source, detail: "this client cannot copy on the server")
  }

  package var movesOnServer: Bool { false }

  package func move(_ source: String, generation: Int64, to target: String, ifGenerationMatch: Int64?) async throws(BucketError)
    -> StorageMetadata
  {
    throw BucketError.moveUnsupported(source)
  }

  /// For clients that hold bytes in memory anyway: one delivery of the whole range.
  package func read(
    _ name: String, range: Range<Int64>, generation: Int64,
    valve: DeliveryValve?, into deliver: @escaping @Sendable (UnsafeRawBufferPointer, Int64) -> HTTPTransfer.Flow
  ) async throws(BucketError) -> Int64 {
    let data = try await read(name, range: range, generation: generation)
    // In pieces the size libcurl hands on, each taken whole or paused for, as a transfer would.
    let piece = 64 << 10
    var start = 0
    while start < data.count {
      let end = min(data.count, start + piece)
      let flow = data.withUnsafeBytes { raw in
        deliver(UnsafeRawBufferPointer(rebasing: raw[start..<end]), range.lowerBound + Int64(start))
      }
      switch flow {
      case .accept:
        start = end
      case .stop:
        throw BucketError(code: .cancelled, object: name, detail: "cancelled")
      case .pause:
        guard let valve else { throw BucketError(code: .cancelled, object: name, detail: "paused without a valve") }
        await valve.waitUntilOpened()
      }
    }
    return Int64(data.count)
  }
}

/// The real client: StorageCore against a server.
package struct StorageObjectClient: ObjectClient {
  package let storage: Storage
  /// Set once the server said it has no `objects.move`: renames copy, then delete, from then on.
  private let noMove = MoveSupport()
  /// Whether the bucket has a hierarchical namespace, once the server said.
  let layout = BucketLayout()

  package init(storage: Storage) { self.storage = storage }

  package var bucket: String { storage.bucket }

  func ref(_ name: String) -> StorageReference { storage.reference().object(named: name) }

  package func metadata(of name: String) async throws(BucketError) -> StorageMetadata {
    try await BucketError.from { () async throws(StorageError) in try await ref(name).getMetadata() }
  }

  package func listPage(prefix: String, pageToken: String?, maxResults: Int?) async throws(BucketError) -> ListPage {
    // A reference's list adds "/" itself; list the folder reference of the prefix.
    let folder = prefix.withoutTrailingSlash
    defer { if layout.known == nil { learnLayoutSoon() } }
    return try await BucketError.from { () async throws(StorageError) in
      // Folder placeholders with their metadata (a folder's mode, owner and times), where the
      // API can list them.
      // A hierarchical bucket's empty folders are folders too: listed among the prefixes.
      try await ref(folder).listPage(
        delimiter: "/", pageToken: pageToken, maxResults: maxResults, matchGlob: nil, folderObjects: true,
        foldersAsPrefixes: layout.known == true)
    }
  }

  package func listTreePage(prefix: String, pageToken: String?) async throws(BucketError) -> ListPage {
    let folder = prefix.withoutTrailingSlash
    return try await BucketError.from { () async throws(StorageError) in
      try await ref(folder).listPage(delimiter: nil, pageToken: pageToken, maxResults: 1000, matchGlob: nil)
    }
  }

  package func read(_ name: String, range: Range<Int64>, generation: Int64) async throws(BucketError) -> Data {
    try await BucketError.from { () async throws(StorageError) in try await ref(name).data(range: range, generation: generation) }
  }

  package func read(
    _ name: String, range: Range<Int64>, generation: Int64,
    valve: DeliveryValve?, into deliver: @escaping @Sendable (UnsafeRawBufferPointer, Int64) -> HTTPTransfer.Flow
  ) async throws(BucketError) -> Int64 {
    try await BucketError.from { () async throws(StorageError) in
      try await ref(name).read(range: range, generation: generation, valve: valve, into: deliver)
    }
  }

  package func downloadURL(name: String, token: String) -> String {
    storage.downloadURL(bucket: bucket, name: name, token: token)
  }

  package func upload(
    _ name: String, file path: String, contentType: String, custom: [String: String], ifGenerationMatch: Int64?,
    session: UploadSession?
  ) async throws(BucketError) -> StorageMetadata {
    let metadata = StorageMetadata()
    metadata.contentType = contentType
    if !custom.isEmpty { metadata.customMetadata = custom }
    return try await BucketError.from { () async throws(StorageError) in
      try await ref(name).upload(file: path, metadata: metadata, preconditions: Preconditions(ifGenerationMatch: ifGenerationMatch), session: session)
    }
  }

  package func delete(_ name: String, ifGenerationMatch: Int64?) async throws(BucketError) {
    try await BucketError.from { () async throws(StorageError) in
      try await ref(name).delete(preconditions: Preconditions(ifGenerationMatch: ifGenerationMatch))
    }
  }

  package func updateMetadata(
    _ name: String, contentType: String?, custom: [String: String], ifGenerationMatch: Int64?
  ) async throws(BucketError) -> StorageMetadata {
    let metadata = StorageMetadata()
    if let contentType { metadata.contentType = contentType }
    if !custom.isEmpty { metadata.customMetadata = custom }
    return try await BucketError.from { () async throws(StorageError) in
      try await ref(name).updateMetadata(metadata, preconditions: Preconditions(ifGenerationMatch: ifGenerationMatch))
    }
  }

  /// Only the GCS JSON API copies; Firebase Storage REST has no copy.
  package var copiesOnServer: Bool { storage.api == .gcs }
  package var listsAttributes: Bool { storage.api == .gcs }

  package func copy(_ source: String, generation: Int64, to target: String, ifGenerationMatch: Int64?) async throws(BucketError)
    -> StorageMetadata
  {
    try await BucketError.from { () async throws(StorageError) in
      try await ref(source).copy(to: ref(target), generation: generation, preconditions: Preconditions(ifGenerationMatch: ifGenerationMatch))
    }
  }

  package var movesOnServer: Bool { storage.api == .gcs && !noMove.known.load(ordering: .relaxed) }

  package func move(_ source: String, generation: Int64, to target: String, ifGenerationMatch: Int64?) async throws(BucketError)
    -> StorageMetadata
  {
    do throws(BucketError) {
      return try await BucketError.from { () async throws(StorageError) in
        try await ref(source).move(to: ref(target), ifSourceGenerationMatch: generation, preconditions: Preconditions(ifGenerationMatch: ifGenerationMatch))
      }
    } catch where error.isMoveUnsupported {
      noMove.known.store(true, ordering: .relaxed)
      throw error
    }
  }
}

/// Whether the server said it has no `objects.move`, shared by every copy of a client.
private final class MoveSupport: Sendable {
  let known = Atomic<Bool>(false)
}
