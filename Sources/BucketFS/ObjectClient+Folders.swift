// Folders as resources of their own, on buckets with a hierarchical namespace (HNS). On a flat
// bucket (and over the Firebase API, which has no folders) a folder is the names under it and
// an optional placeholder object (`a/`); on an HNS bucket it also exists by itself, empty or
// not, is deleted only when empty, and renames in one step on the server. Clients that know
// nothing of folders (the in-memory ones of tests) are flat.
import Foundation
import StorageCore
import Synchronization

extension ObjectClient {
  package func foldersAreResources() async throws(BucketError) -> Bool { false }
  package var knownFoldersAreResources: Bool? { false }

  package func createFolder(_ folder: String) async throws(BucketError) {
    throw BucketError(code: .invalidArgument, object: folder, detail: "this bucket has no folders of its own")
  }

  package func deleteFolder(_ folder: String) async throws(BucketError) {
    throw BucketError(code: .invalidArgument, object: folder, detail: "this bucket has no folders of its own")
  }

  package func folderExists(_ folder: String) async throws(BucketError) -> Bool { false }

  package func renameFolder(_ source: String, to target: String) async throws(BucketError) {
    throw BucketError(code: .invalidArgument, object: source, detail: "this bucket has no folders of its own")
  }
}

/// What a client knows of its bucket's layout: asked once, kept for the client's life (a
/// bucket's namespace is chosen when it is made and never changes).
package final class BucketLayout: Sendable {
  enum State {
    case unknown
    /// Asked in the background after a listing, where it was not known yet.
    case asking
    case known(hierarchical: Bool)
  }

  private let state = Mutex(State.unknown)

  /// True for a hierarchical namespace, false for a flat one, nil while not known.
  var known: Bool? {
    state.withLock { if case .known(let h) = $0 { h } else { nil } }
  }

  func learned(_ hierarchical: Bool) { state.withLock { $0 = .known(hierarchical: hierarchical) } }

  /// Whether the caller is to ask now: nothing is known and nobody is asking.
  func startAsking() -> Bool {
    state.withLock { s in
      guard case .unknown = s else { return false }
      s = .asking
      return true
    }
  }

  /// An ask that failed: the next one may try again.
  func askFailed() { state.withLock { if case .asking = $0 { $0 = .unknown } } }
}

extension StorageObjectClient {
  /// A folder name ("a/b/") as the reference StorageCore's folder calls take ("a/b").
  private func folderRef(_ folder: String) -> StorageReference {
    ref(folder.withoutTrailingSlash)
  }

  package func foldersAreResources() async throws(BucketError) -> Bool {
    if let known = layout.known { return known }
    let hierarchical = try await BucketError.from { () async throws(StorageError) in try await ref("").bucketIsHierarchical() }
    layout.learned(hierarchical)
    return hierarchical
  }

  package var knownFoldersAreResources: Bool? { storage.api == .gcs ? layout.known : false }

  /// Learns the layout in the background when it is not known: a mount that started without
  /// the server lists a hierarchical bucket's empty folders once it is back, without making a
  /// listing wait for the question (a listing needs the answer only to ask for them).
  func learnLayoutSoon() {
    guard storage.api == .gcs, layout.startAsking() else { return }
    Task { [self] in
      do throws(BucketError) {
        let hierarchical = try await BucketError.from { () async throws(StorageError) in try await ref("").bucketIsHierarchical() }
        layout.learned(hierarchical)
      } catch {
        layout.askFailed()
      }
    }
  }

  package func createFolder(_ folder: String) async throws(BucketError) {
    _ = try await BucketError.from { () async throws(StorageError) in try await folderRef(folder).createFolder() }
  }

  package func deleteFolder(_ folder: String) async throws(BucketError) {
    try await BucketError.from { () async throws(StorageError) in try await folderRef(folder).deleteFolder() }
  }

  package func folderExists(_ folder: String) async throws(BucketError) -> Bool {
    try await BucketError.from { () async throws(StorageError) in try await folderRef(folder).folderExists() }
  }

  package func renameFolder(_ source: String, to target: String) async throws(BucketError) {
    try await BucketError.from { () async throws(StorageError) in try await folderRef(source).renameFolder(to: folderRef(target)) }
  }
}

extension PrefixedClient {
  package func foldersAreResources() async throws(BucketError) -> Bool { try await inner.foldersAreResources() }
  package var knownFoldersAreResources: Bool? { inner.knownFoldersAreResources }
  package func createFolder(_ folder: String) async throws(BucketError) { try await inner.createFolder(bucketName(folder)) }
  package func deleteFolder(_ folder: String) async throws(BucketError) { try await inner.deleteFolder(bucketName(folder)) }
  package func folderExists(_ folder: String) async throws(BucketError) -> Bool { try await inner.folderExists(bucketName(folder)) }
  package func renameFolder(_ source: String, to target: String) async throws(BucketError) {
    try await inner.renameFolder(bucketName(source), to: bucketName(target))
  }
}

extension MeteredClient {
  package func foldersAreResources() async throws(BucketError) -> Bool { try await inner.foldersAreResources() }
  package var knownFoldersAreResources: Bool? { inner.knownFoldersAreResources }

  package func createFolder(_ folder: String) async throws(BucketError) {
    try await count("folder_create") { () async throws(BucketError) in try await inner.createFolder(folder) }
  }

  package func deleteFolder(_ folder: String) async throws(BucketError) {
    try await count("folder_delete") { () async throws(BucketError) in try await inner.deleteFolder(folder) }
  }

  package func folderExists(_ folder: String) async throws(BucketError) -> Bool {
    try await count("folder_get") { () async throws(BucketError) -> Bool in try await inner.folderExists(folder) }
  }

  package func renameFolder(_ source: String, to target: String) async throws(BucketError) {
    try await count("folder_rename") { () async throws(BucketError) in try await inner.renameFolder(source, to: target) }
  }
}
