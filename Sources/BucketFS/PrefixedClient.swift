import Foundation
import StorageCore

/// A bucket seen from below a prefix: names in and out are relative to it, so the filesystem
/// above never adds or strips the prefix itself.
struct PrefixedClient: ObjectClient {
  let inner: any ObjectClient
  /// Ends with "/".
  let prefix: String

  init(_ inner: any ObjectClient, prefix: String) {
    self.inner = inner
    self.prefix = prefix
  }

  var bucket: String { inner.bucket }

  func metadata(of name: String) async throws(StorageError) -> StorageMetadata {
    try await inner.metadata(of: prefix + name)
  }

  func listPage(prefix listed: String, pageToken: String?, maxResults: Int?) async throws(StorageError) -> ListPage {
    let page = try await inner.listPage(prefix: prefix + listed, pageToken: pageToken, maxResults: maxResults)
    let strip = prefix.count
    // Every name the server returns starts with what was listed, and so with the prefix.
    var metadata: [String: StorageMetadata] = [:]
    for (name, m) in page.metadata { metadata[String(name.dropFirst(strip))] = m }
    return ListPage(
      prefixes: page.prefixes.map { String($0.dropFirst(strip)) }, items: page.items.map { String($0.dropFirst(strip)) },
      metadata: metadata, nextPageToken: page.nextPageToken)
  }

  func read(_ name: String, range: Range<Int64>, generation: Int64) async throws(StorageError) -> Data {
    try await inner.read(prefix + name, range: range, generation: generation)
  }

  func read(
    _ name: String, range: Range<Int64>, generation: Int64,
    valve: DeliveryValve?, into deliver: @escaping @Sendable (UnsafeRawBufferPointer, Int64) -> HTTPTransfer.Flow
  ) async throws(StorageError) -> Int64 {
    try await inner.read(prefix + name, range: range, generation: generation, valve: valve, into: deliver)
  }

  func downloadURL(name: String, token: String) -> String { inner.downloadURL(name: prefix + name, token: token) }

  func upload(
    _ name: String, file path: String, contentType: String, custom: [String: String], ifGenerationMatch: Int64?,
    session: UploadSession?
  ) async throws(StorageError) -> StorageMetadata {
    try await inner.upload(
      prefix + name, file: path, contentType: contentType, custom: custom, ifGenerationMatch: ifGenerationMatch, session: session)
  }

  func delete(_ name: String, ifGenerationMatch: Int64?) async throws(StorageError) {
    try await inner.delete(prefix + name, ifGenerationMatch: ifGenerationMatch)
  }

  func updateMetadata(
    _ name: String, contentType: String?, custom: [String: String], ifGenerationMatch: Int64?
  ) async throws(StorageError) -> StorageMetadata {
    try await inner.updateMetadata(prefix + name, contentType: contentType, custom: custom, ifGenerationMatch: ifGenerationMatch)
  }

  var copiesOnServer: Bool { inner.copiesOnServer }

  func copy(_ source: String, generation: Int64, to target: String, ifGenerationMatch: Int64?) async throws(StorageError) -> StorageMetadata {
    try await inner.copy(prefix + source, generation: generation, to: prefix + target, ifGenerationMatch: ifGenerationMatch)
  }
}
