import Foundation
import StorageCore

/// An object client that counts what goes through it: requests by operation and outcome, and
/// the object bytes received.
package struct MeteredClient: ObjectClient {
  let inner: any ObjectClient
  let metrics: Metrics

  package init(_ inner: any ObjectClient, metrics: Metrics) {
    self.inner = inner
    self.metrics = metrics
  }

  package var bucket: String { inner.bucket }

  /// The outcome label of a failure: the error's specific code.
  private static func outcome(_ error: BucketError) -> String { String(describing: error.code) }

  func count<T>(_ operation: String, _ body: () async throws(BucketError) -> T) async throws(BucketError) -> T {
    do throws(BucketError) {
      let value = try await body()
      metrics.request(operation, outcome: "ok")
      return value
    } catch {
      metrics.request(operation, outcome: Self.outcome(error))
      throw error
    }
  }

  package func metadata(of name: String) async throws(BucketError) -> StorageMetadata {
    try await count("metadata") { () async throws(BucketError) -> StorageMetadata in try await inner.metadata(of: name) }
  }

  package func listPage(prefix: String, pageToken: String?, maxResults: Int?) async throws(BucketError) -> ListPage {
    try await count("list") { () async throws(BucketError) -> ListPage in
      try await inner.listPage(prefix: prefix, pageToken: pageToken, maxResults: maxResults)
    }
  }

  package func listTreePage(prefix: String, pageToken: String?) async throws(BucketError) -> ListPage {
    try await count("list") { () async throws(BucketError) -> ListPage in try await inner.listTreePage(prefix: prefix, pageToken: pageToken) }
  }

  package func read(_ name: String, range: Range<Int64>, generation: Int64) async throws(BucketError) -> Data {
    let data = try await count("read") { () async throws(BucketError) -> Data in
      try await inner.read(name, range: range, generation: generation)
    }
    metrics.fetched(data.count)
    return data
  }

  package func read(
    _ name: String, range: Range<Int64>, generation: Int64,
    valve: DeliveryValve?, into deliver: @escaping @Sendable (UnsafeRawBufferPointer, Int64) -> HTTPTransfer.Flow
  ) async throws(BucketError) -> Int64 {
    let count = try await self.count("read") { () async throws(BucketError) -> Int64 in
      try await inner.read(name, range: range, generation: generation, valve: valve, into: deliver)
    }
    metrics.fetched(Int(count))
    return count
  }

  package func downloadURL(name: String, token: String) -> String { inner.downloadURL(name: name, token: token) }

  package func upload(
    _ name: String, file path: String, contentType: String, custom: [String: String], ifGenerationMatch: Int64?,
    session: UploadSession?
  ) async throws(BucketError) -> StorageMetadata {
    try await count("upload") { () async throws(BucketError) -> StorageMetadata in
      try await inner.upload(
        name, file: path, contentType: contentType, custom: custom, ifGenerationMatch: ifGenerationMatch, session: session)
    }
  }

  package func delete(_ name: String, ifGenerationMatch: Int64?) async throws(BucketError) {
    try await count("delete") { () async throws(BucketError) -> Void in
      try await inner.delete(name, ifGenerationMatch: ifGenerationMatch)
    }
  }

  package func updateMetadata(
    _ name: String, contentType: String?, custom: [String: String], ifGenerationMatch: Int64?
  ) async throws(BucketError) -> StorageMetadata {
    try await count("metadata_update") { () async throws(BucketError) -> StorageMetadata in
      try await inner.updateMetadata(name, contentType: contentType, custom: custom, ifGenerationMatch: ifGenerationMatch)
    }
  }

  package var copiesOnServer: Bool { inner.copiesOnServer }
  package var listsAttributes: Bool { inner.listsAttributes }

  package func copy(_ source: String, generation: Int64, to target: String, ifGenerationMatch: Int64?) async throws(BucketError)
    -> StorageMetadata
  {
    try await count("copy") { () async throws(BucketError) -> StorageMetadata in
      try await inner.copy(source, generation: generation, to: target, ifGenerationMatch: ifGenerationMatch)
    }
  }

  package var movesOnServer: Bool { inner.movesOnServer }

  package func move(_ source: String, generation: Int64, to target: String, ifGenerationMatch: Int64?) async throws(BucketError)
    -> StorageMetadata
  {
    try await count("move") { () async throws(BucketError) -> StorageMetadata in
      try await inner.move(source, generation: generation, to: target, ifGenerationMatch: ifGenerationMatch)
    }
  }
}
