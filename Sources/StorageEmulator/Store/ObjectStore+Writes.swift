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
