import Foundation
import Synchronization

/// Resumable upload sessions (both APIs): bytes append to a temporary file until the session is
/// finalised. The session's state lock is never held across a socket read: a query answers at
/// once with what has landed, while one request at a time appends (its turn, which a second
/// appender waits for, as the server would finish with a broken connection first).
final class UploadSessions: Sendable {
  final class Session: @unchecked Sendable {
    /// A session's life.
    enum Phase {
      /// Taking bytes.
      case active
      /// Complete, as this object.
      case final(ObjectRecord)
      case cancelled
    }

    /// Why an append did not take the body.
    enum Refusal: Error {
      /// The body starts elsewhere than where the bytes so far end.
      case offset(received: Int64)
      case notActive(Phase)
      /// Another request is still appending after this long.
      case busy
      /// The body broke off (what arrived before is kept) or could not be written.
      case body(String)
      /// Answered as this instead (a precondition at completion).
      case refused(ServerResponse)
      /// The bytes could not be stored as the object.
      case cannotStore
    }

    let id: String
    let bucket: String
    let name: String
    /// Set when the session starts, read when it completes (JSON values: not Sendable).
    let metadata: [String: Any]
    /// GCS preconditions given when the session started, checked when it completes.
    let preconditions: [String: String]
    let temporaryPath: String
    private let fd: Int32
    /// Touched only by the request that has the turn.
    private let hashes = ObjectHashes()
    private struct State {
      var phase = Phase.active
      var received: Int64 = 0
      /// The file is closed and removed (a cancelled session's).
      var dropped = false
    }
    private let state = Mutex(State())
    private let turn = DispatchSemaphore(value: 1)
    static let turnWait: TimeInterval = 30

    init(id: String, bucket: String, name: String, metadata: [String: Any], preconditions: [String: String], temporaryPath: String, fd: Int32) {
      self.id = id
      self.bucket = bucket
      self.name = name
      self.metadata = metadata
      self.preconditions = preconditions
      self.temporaryPath = temporaryPath
      self.fd = fd
    }

    var isOpen: Bool { fd >= 0 }
    var phase: Phase { state.withLock { $0.phase } }
    var received: Int64 { state.withLock { $0.received } }

    /// The one session append: `body`'s bytes written after those received (`RequestBody.drain`,
    /// as a whole upload's are), hashed, and counted as each chunk lands, so a body that breaks
    /// off keeps what arrived. `offset`, when the client names one, must be where the bytes so
    /// far end.
    func append(_ body: RequestBody, at offset: Int64?) -> Result<Int64, Refusal> {
      guard turn.wait(timeout: .now() + Self.turnWait) == .success else { return .failure(.busy) }
      defer {
        dropIfCancelled()
        turn.signal()
      }
      let (phase, start) = state.withLock { ($0.phase, $0.received) }
      guard case .active = phase else { return .failure(.notActive(phase)) }
      if let offset, offset != start { return .failure(.offset(received: start)) }
      guard lseek(fd, off_t(start), SEEK_SET) == off_t(start) else { return .failure(.body("cannot seek in the upload")) }
      do throws(RequestBody.Failure) {
        let n = try body.drain(into: fd, hashes: hashes) { total in
          state.withLock { s in
            s.received = start + total
            if case .active = s.phase { return true } else { return false }
          }
        }
        return .success(start + n)
      } catch .stopped {
        return .failure(.notActive(self.phase))
      } catch .local(let why) {
        return .failure(.body("cannot write the upload: \(why)"))
      } catch {
        return .failure(.body("the body broke off after \(received - start) bytes"))
      }
    }

    /// Completes the session with `commit` (which stores the bytes as the object), once: a
    /// session already final answers its object. `refusal` is asked first, with the turn (a
    /// precondition that no longer holds): its answer leaves the session as it is.
    func finish(
      unless refusal: () -> ServerResponse? = { nil }, _ commit: (_ size: Int64, _ hashes: ObjectHashes) throws -> ObjectRecord
    ) -> Result<ObjectRecord, Refusal> {
      guard turn.wait(timeout: .now() + Self.turnWait) == .success else { return .failure(.busy) }
      defer { turn.signal() }
      let (phase, size) = state.withLock { ($0.phase, $0.received) }
      switch phase {
      case .final(let record): return .success(record)
      case .cancelled: return .failure(.notActive(phase))
      case .active: break
      }
      if let refused = refusal() { return .failure(.refused(refused)) }
      close(fd)
      state.withLock { $0.dropped = true }
      do {
        let record = try commit(size, hashes)
        state.withLock { $0.phase = .final(record) }
        return .success(record)
      } catch ObjectStore.Refusal.preconditionFailed {
        // Someone else's write came first: refused as the check before would have.
        state.withLock { $0.phase = .cancelled }
        return .failure(.refused(refusal() ?? PreconditionCheck.failed("ifGenerationMatch")))
      } catch {
        unlink(temporaryPath)
        state.withLock { $0.phase = .cancelled }
        return .failure(.cannotStore)
      }
    }

    /// Ends an active session and drops its bytes; false when it was final already. With a
    /// request still appending, that request drops them as it ends (the descriptor is its own
    /// until then).
    func cancel() -> Bool {
      let wasFinal = state.withLock { s -> Bool in
        if case .final = s.phase { return true }
        s.phase = .cancelled
        return false
      }
      if wasFinal { return false }
      if turn.wait(timeout: .now()) == .success {
        dropIfCancelled()
        turn.signal()
      }
      return true
    }

    /// With the turn: a cancelled session's file goes (once).
    private func dropIfCancelled() {
      let drop = state.withLock { s -> Bool in
        guard case .cancelled = s.phase, !s.dropped else { return false }
        s.dropped = true
        return true
      }
      if drop {
        close(fd)
        unlink(temporaryPath)
      }
    }
  }

  private let sessions = Mutex<[String: Session]>([:])

  func create(bucket: String, name: String, metadata: [String: Any], preconditions: [String: String] = [:], store: ObjectStore) -> Session {
    let (path, fd) = store.temporaryFile()
    let session = Session(
      id: UUID().uuidString.lowercased(), bucket: bucket, name: name, metadata: metadata, preconditions: preconditions,
      temporaryPath: path, fd: fd)
    sessions.withLock { $0[session.id] = session }
    return session
  }

  func get(_ id: String) -> Session? { sessions.withLock { $0[id] } }

  func remove(_ id: String) { _ = sessions.withLock { $0.removeValue(forKey: id) } }
}
