import Foundation
import StorageCore

/// One change made through a writable mount and not yet in the bucket, as it is kept on disk
/// (`NNNNNNNNNNNN.json`, with the bytes of an upload beside it in `NNNNNNNNNNNN.data`).
struct PendingChange: Codable, Sendable, Equatable {
  enum Kind: String, Codable, Sendable {
    /// The bytes (and content type, custom metadata and time) of a new version.
    case upload
    case delete
    /// Content type and custom metadata of the object as it is (`setfattr`).
    case metadata
    /// Another object's version (`source`) copied under this name by the server: a rename
    /// where the bucket can copy, so the bytes need not be here.
    case copy

    /// Whether the change puts a new version under its name.
    var putsVersion: Bool { self == .upload || self == .copy }
  }

  /// The object version a `.copy` puts under `name`.
  struct Source: Codable, Sendable, Equatable {
    var name: String
    var generation: Int64
    var size: Int64
    var crc32c: String?
    var md5Hash: String?
  }

  /// What the object must be for the change to apply: nothing overwrites or deletes a version
  /// the change was not based on.
  enum Base: Codable, Sendable, Equatable {
    /// This generation (0: no object by that name).
    case generation(Int64)
    /// Whatever is there (folder placeholders).
    case any
    /// What this queue's previous change of the same name left there.
    case previous
  }

  enum State: String, Codable, Sendable {
    /// Waiting its turn (or for the server to answer again).
    case pending
    /// Being carried out; a restart carries it out again.
    case started
    /// Done, with `produced`; the record goes once the changes after it know the generation.
    case done
    /// Refused for good (`error` says why); kept, so that nothing is lost, until removed by hand.
    case failed
  }

  var sequence: UInt64
  var kind: Kind
  /// The object name relative to the mount's prefix.
  var name: String
  var base: Base
  var contentType: String?
  /// Seconds since 1970; kept in the object's custom metadata (`mtime`, as rclone writes it).
  var mtime: Double?
  /// Custom metadata entries to set (`user.meta.KEY`).
  var custom: [String: String]?
  /// The resumable session of a large upload, kept so that an upload cut short by a crash
  /// continues where the server has it instead of starting over.
  var sessionURL: String?
  var source: Source?
  var state: State = .pending
  var error: String?
  /// The generation an upload made (0 after a delete); nil after a conflict, so that the
  /// changes based on it go beside the object too.
  var produced: Int64?
  /// Set when the bucket held another version: where our bytes went instead.
  var conflictName: String?
  /// An upload's bytes as they were queued: checked when a later mount reads the queue, so
  /// that a truncated or changed `.data` file is never uploaded as the object (nil in records
  /// written before they were kept).
  var dataSize: Int64?
  var dataCRC32C: UInt32?

  var fileName: String { String(format: "%012llu", sequence) }
}

extension StorageMetadata {
  /// Whether this version has the bytes of `source` (same size and hash).
  func holdsBytes(of source: PendingChange.Source?) -> Bool {
    guard let source, size == source.size else { return false }
    if let crc = source.crc32c, let mine = crc32c { return crc == mine }
    if let md5 = source.md5Hash, let mine = md5Hash { return md5 == mine }
    return false
  }

  /// Whether this version has the bytes of the file at `path`: the same size and CRC32C (else
  /// MD5). A version with neither hash cannot be told apart, and is not.
  func holdsBytes(ofFile path: String) -> Bool {
    var st = stat()
    guard crc32c != nil || md5Hash != nil, stat(path, &st) == 0, Int64(st.st_size) == size else { return false }
    return CopyVerification.checkWhole(path: path, metadata: self) != nil
  }
}
