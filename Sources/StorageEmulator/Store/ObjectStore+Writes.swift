import Foundation

extension ObjectStore {
  /// New metadata for an object as it is (both APIs' PATCH, and GCS's PUT with `replacing`, which
  /// clears the writable fields first): `json`'s fields set, one metageneration more. Nil when it
  /// cannot be saved.
  func updateMetadata(_ record: ObjectRecord, with json: [String: Any], replacing: Bool = false) -> ObjectRecord? {
    var updated = record
    if replacing { updated.clearWritableFields() }
    updated.apply(json)
    updated.metageneration += 1
    updated.updated = Int64(Date().timeIntervalSince1970 * 1000)
    guard (try? save(updated)) != nil else { return nil }
    return updated
  }

  enum WriteFailure: Error {
    /// The request body ended early or broke: nothing was stored.
    case incompleteBody
    case local
    /// The preconditions did not hold when the new generation was to be made.
    case preconditionFailed
  }

  /// Stores a request body as the new generation of `name`; on any failure nothing is visible.
  func store(
    bucket: String, name: String, body: RequestBody, downloadToken: Bool, metadata: [String: Any],
    unless refused: ((ObjectRecord?) -> Bool)? = nil
  ) throws(WriteFailure) -> ObjectRecord {
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
      return try commit(
        bucket: bucket, name: name, temporaryPath: path, size: size, hashes: hashes, downloadToken: downloadToken, metadata: metadata,
        unless: refused)
    } catch Refusal.preconditionFailed {
      throw .preconditionFailed
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

extension ObjectStore {
  /// A new generation of `name` holding the bytes of `sources` one after another (`compose`),
  /// made of `componentCount` uploaded objects. As on GCS, it has a CRC32C but no MD5.
  func compose(
    _ sources: [ObjectRecord], componentCount: Int, bucket: String, name: String, metadata: [String: Any]
  ) throws -> ObjectRecord {
    let (path, fd) = temporaryFile()
    guard fd >= 0 else { throw WriteFailure.local }
    defer { close(fd) }
    let hashes = ObjectHashes()
    var size: Int64 = 0
    var buffer = [UInt8](repeating: 0, count: 1 << 20)
    do {
      for source in sources {
        let input = open(dataPath(source), O_RDONLY | O_CLOEXEC)
        guard input >= 0 else { throw WriteFailure.local }
        defer { close(input) }
        while true {
          let n = buffer.withUnsafeMutableBytes { read(input, $0.baseAddress!, $0.count) }
          if n < 0 && errno == EINTR { continue }
          guard n >= 0 else { throw WriteFailure.local }
          if n == 0 { break }
          let written = buffer.withUnsafeBytes { raw -> Bool in
            let bytes = UnsafeRawBufferPointer(rebasing: raw[0..<n])
            hashes.update(bytes)
            return writeAll(fd, bytes)
          }
          guard written else { throw WriteFailure.local }
          size += Int64(n)
        }
      }
      return try commit(
        bucket: bucket, name: name, temporaryPath: path, size: size, hashes: hashes, componentCount: componentCount,
        downloadToken: false, metadata: metadata)
    } catch {
      unlink(path)
      throw error
    }
  }
}
