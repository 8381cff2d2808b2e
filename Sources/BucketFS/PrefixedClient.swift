import Foundation
import StorageCore

/// A bucket seen from below a prefix: names in and out are relative to it, so the filesystem
/// above never adds or strips the prefix itself.
package struct PrefixedClient: ObjectClient {
  let inner: any ObjectClient
  /// Ends with "/".
  let prefix: String

  private init(_ inner: any ObjectClient, prefix: String) {
    self.inner = inner
    self.prefix = prefix
  }

  /// `client` below `prefix` (slashes as the SDKs normalize them); `client` itself for none.
  package static func view(_ client: any ObjectClient, below prefix: String) -> any ObjectClient {
    let normalized = StoragePath.normalize(prefix)
    return normalized.isEmpty ? client : PrefixedClient(client, prefix: normalized + "/")
  }

  package var bucket: String { inner.bucket }
  package func bucketName(_ name: String) -> String { prefix + name }
  package func viewName(_ bucketName: String) -> String? {
    bucketName.hasBytePrefix(prefix) ? bucketName.droppingBytes(prefix.utf8.count) : nil
  }
  package var bucketWide: any ObjectClient { inner }

  package func metadata(of name: String) async throws(BucketError) -> StorageMetadata {
    try await inner.metadata(of: bucketName(name))
  }

  package func listPage(prefix listed: String, pageToken: String?, maxResults: Int?) async throws(BucketError) -> ListPage {
    let page = try await inner.listPage(prefix: bucketName(listed), pageToken: pageToken, maxResults: maxResults)
    // Every name the server returns starts with what was listed, and so with the prefix.
    let strip = prefix.utf8.count
    func view(_ name: String) -> String { name.droppingBytes(strip) }
    var viewed = ListPage(
      prefixes: page.prefixes.map(view), items: page.items.map(view), itemMetadata: page.itemMetadata, nextPageToken: page.nextPageToken)
    viewed.holdsFolderObjects = page.holdsFolderObjects
    viewed.inNameOrder = page.inNameOrder
    return viewed
  }

  package func listTreePage(prefix listed: String, pageToken: String?) async throws(BucketError) -> ListPage {
    let page = try await inner.listTreePage(prefix: bucketName(listed), pageToken: pageToken)
    let strip = prefix.utf8.count
    var viewed = ListPage(
      prefixes: [], items: page.items.map { $0.droppingBytes(strip) }, itemMetadata: page.itemMetadata, nextPageToken: page.nextPageToken)
    viewed.inNameOrder = page.inNameOrder
    return viewed
  }

  package func read(_ name: String, range: Range<Int64>, generation: Int64) async throws(BucketError) -> Data {
    try await inner.read(bucketName(name), range: range, generation: generation)
  }

  package func read(
    _ name: String, range: Range<Int64>, generation: Int64,
    valve: DeliveryValve?, into deliver: @escaping @Sendable (UnsafeRawBufferPointer, Int64) -> HTTPTransfer.Flow
  ) async throws(BucketError) -> Int64 {
    try await inner.read(bucketName(name), range: range, generation: generation, valve: valve, into: deliver)
  }

  package func downloadURL(name: String, token: String) -> String { inner.downloadURL(name: bucketName(name), token: token) }

  package func upload(
    _ name: String, file path: String, contentType: String, custom: [String: String], ifGenerationMatch: Int64?,
    session: UploadSession?
  ) async throws(BucketError) -> StorageMetadata {
    try await inner.upload(
      bucketName(name), file: path, contentType: contentType, custom: custom, ifGenerationMatch: ifGenerationMatch, session: session)
  }

  package func delete(_ name: String, ifGenerationMatch: Int64?) async throws(BucketError) {
    try await inner.delete(bucketName(name), ifGenerationMatch: ifGenerationMatch)
  }

  package func updateMetadata(
    _ name: String, contentType: String?, custom: [String: String], ifGenerationMatch: Int64?
  ) async throws(BucketError) -> StorageMetadata {
    try await inner.updateMetadata(bucketName(name), contentType: contentType, custom: custom, ifGenerationMatch: ifGenerationMatch)
  }

  package var copiesOnServer: Bool { inner.copiesOnServer }
  package var listsAttributes: Bool { inner.listsAttributes }

  package var movesOnServer: Bool { inner.movesOnServer }

  package func move(_ source: String, generation: Int64, to target: String, ifGenerationMatch: Int64?) async throws(BucketError) -> StorageMetadata {
    try await inner.move(bucketName(source), generation: generation, to: bucketName(target), ifGenerationMatch: ifGenerationMatch)
  }

  package func copy(_ source: String, generation: Int64, to target: String, ifGenerationMatch: Int64?) async throws(BucketError) -> StorageMetadata {
    try await inner.copy(bucketName(source), generation: generation, to: bucketName(target), ifGenerationMatch: ifGenerationMatch)
  }
}
