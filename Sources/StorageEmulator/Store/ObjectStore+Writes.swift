import Foundation

extension ObjectStore {
  enum WriteFailure: Error {
    /// The request body ended early or broke: nothing was stored.
    case incompleteBody
    case local
  }

  /// Stores a request body as the new generation of `name`; on any failure nothing is visible.
  func store(bucket: String, name: String, body: RequestBody, metadata: [String: Any]) throws(WriteFailure) -> ObjectRecord {
    let (path, fd) = temporaryFile()
    defer { close(fd) }
    let hashes = ObjectHashes()
    let size: Int64
    do {
      size = try body.drain(into: fd, hashes: hashes)
    } catch {
      unlink(path)
      throw .incompleteBody
    }
    do {
      return try commit(bucket: bucket, name: name, temporaryPath: path, size: size, hashes: hashes, metadata: metadata)
    } catch {
      unlink(path)
      throw .local
    }
  }
}

extension ObjectStore {
  /// A new generation of `name` in `bucket` with the bytes and metadata of `source`, changed by
  /// the fields in `metadata` (the server-side copy of `rewriteTo` / `copyTo`).
  func copy(_ source: ObjectRecord, bucket: String, name: String, metadata: [String: Any]) throws -> ObjectRecord {
    let path = tmpFolder.appendingPathComponent(UUID().uuidString).path
    // Stored bytes never change once written, so a second link to them is a copy.
    guard link(dataPath(source), path) == 0 else { throw WriteFailure.local }
    do {
      return try commit(bucket: bucket, name: name, temporaryPath: path, size: source.size, copied: source, metadata: metadata)
    } catch {
      unlink(path)
      throw error
    }
  }
}
