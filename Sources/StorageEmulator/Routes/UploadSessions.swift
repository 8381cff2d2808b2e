import Foundation
import Synchronization

/// Resumable upload sessions: bytes append to a temporary file until the session is finalised.
final class UploadSessions: @unchecked Sendable {
  final class Session: @unchecked Sendable {
    let id: String
    let bucket: String
    let name: String
    let metadata: [String: Any]
    let temporaryPath: String
    let fd: Int32
    let hashes = ObjectHashes()
    /// Guards the fields below and serialises appends.
    let lock = NSLock()
    var received: Int64 = 0
    var status = "active"
    var final: ObjectRecord?
    /// GCS preconditions given when the session started, checked when it completes.
    var preconditions: [String: String] = [:]

    init(id: String, bucket: String, name: String, metadata: [String: Any], temporaryPath: String, fd: Int32) {
      self.id = id
      self.bucket = bucket
      self.name = name
      self.metadata = metadata
      self.temporaryPath = temporaryPath
      self.fd = fd
    }
  }

  private let sessions = Mutex<[String: Session]>([:])

  func create(bucket: String, name: String, metadata: [String: Any], store: ObjectStore) -> Session {
    let (path, fd) = store.temporaryFile()
    let session = Session(
      id: UUID().uuidString.lowercased(), bucket: bucket, name: name, metadata: metadata,
      temporaryPath: path, fd: fd)
    sessions.withLock { $0[session.id] = session }
    return session
  }

  func get(_ id: String) -> Session? { sessions.withLock { $0[id] } }

  func remove(_ id: String) { _ = sessions.withLock { $0.removeValue(forKey: id) } }
}
