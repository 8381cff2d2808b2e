// Tasks are state machines behind one lock: a transition changes state under the lock and returns
// the events to fire; handlers run afterwards on the storage's callback queue, never under the lock.
import Foundation
import Synchronization

public class StorageTask: @unchecked Sendable {
  public typealias Handler = @Sendable (StorageTaskSnapshot) -> Void

  enum Phase: Equatable {
    case notStarted, running, paused, succeeded, failed, cancelled
    var isFinal: Bool { self == .succeeded || self == .failed || self == .cancelled }
  }

  struct State {
    var phase: Phase = .notStarted
    var observers: [StorageTaskStatus: [(String, Handler)]] = [:]
    var completed: Int64 = 0
    var total: Int64 = -1
    var metadata: StorageMetadata?
    var error: StorageError?
    var waiters: [CheckedContinuation<Void, Never>] = []
  }

  public let reference: StorageReference
  let state = Mutex(State())
  /// The task doing the transfer; cancelled by pause and cancel, replaced by resume.
  private let driver = Mutex<Task<Void, Never>?>(nil)

  init(reference: StorageReference) {
    self.reference = reference
  }

  // MARK: observers

  /// Registers `handler` for `status`; fires at once when the task is already there.
  @discardableResult
  public func observe(_ status: StorageTaskStatus, handler: @escaping Handler) -> String {
    precondition(status != .unknown, "observing .unknown is not allowed")
    let handle = UUID().uuidString
    let fireNow: StorageTaskSnapshot? = state.withLock { s in
      s.observers[status, default: []].append((handle, handler))
      let matches: Bool
      switch (status, s.phase) {
      case (.success, .succeeded), (.failure, .failed), (.pause, .paused),
        (.resume, .running), (.progress, .running):
        matches = true
      default:
        matches = false
      }
      return matches ? snapshot(s, status: status) : nil
    }
    if let fireNow { reference.storage.callbackQueue.async { handler(fireNow) } }
    return handle
  }

  public func removeObserver(withHandle handle: String) {
    state.withLock { s in
      for key in s.observers.keys { s.observers[key]?.removeAll { $0.0 == handle } }
    }
  }

  public func removeAllObservers(for status: StorageTaskStatus) {
    _ = state.withLock { $0.observers.removeValue(forKey: status) }
  }

  public func removeAllObservers() {
    state.withLock { $0.observers.removeAll() }
  }

  public var snapshot: StorageTaskSnapshot {
    state.withLock { s in
      let status: StorageTaskStatus
      switch s.phase {
      case .notStarted: status = .unknown
      case .running: status = .progress
      case .paused: status = .pause
      case .succeeded: status = .success
      case .failed, .cancelled: status = .failure
      }
      return snapshot(s, status: status)
    }
  }

  func snapshot(_ s: State, status: StorageTaskStatus) -> StorageTaskSnapshot {
    StorageTaskSnapshot(
      task: self, reference: reference, metadata: s.metadata, completed: s.completed, total: s.total,
      error: s.error, status: status)
  }

  /// Fires `status` to its observers (in registration order, on the callback queue).
  func fire(_ events: [StorageTaskStatus], removeAllAfter: Bool = false) {
    let deliveries: [(Handler, StorageTaskSnapshot)] = state.withLock { s in
      var out: [(Handler, StorageTaskSnapshot)] = []
      for status in events {
        let snap = snapshot(s, status: status)
        for (_, handler) in s.observers[status] ?? [] { out.append((handler, snap)) }
      }
      if removeAllAfter { s.observers.removeAll() }
      return out
    }
    guard !deliveries.isEmpty else { return }
    reference.storage.callbackQueue.async {
      for (handler, snap) in deliveries { handler(snap) }
    }
  }

  /// Moves to a final phase once; later calls do nothing.
  func finish(_ phase: Phase, metadata: StorageMetadata? = nil, error: StorageError? = nil) {
    let waiters: [CheckedContinuation<Void, Never>]? = state.withLock { s in
      guard !s.phase.isFinal else { return nil }
      s.phase = phase
      if let metadata { s.metadata = metadata }
      s.error = error
      let w = s.waiters
      s.waiters.removeAll()
      return w
    }
    guard let waiters else { return }
    fire([.progress, phase == .succeeded ? .success : .failure], removeAllAfter: true)
    // Resume waiters after the final events are queued so that `result()` returns after them.
    reference.storage.callbackQueue.async {
      for w in waiters { w.resume() }
    }
  }

  /// Waits for the task to end and returns its final snapshot's metadata, or throws its error.
  @discardableResult
  public func result() async throws(StorageError) -> StorageMetadata? {
    await withCheckedContinuation { (cont: CheckedContinuation<Void, Never>) in
      let done = state.withLock { s -> Bool in
        if s.phase.isFinal { return true }
        s.waiters.append(cont)
        return false
      }
      if done { cont.resume() }
    }
    let (error, metadata) = state.withLock { ($0.error, $0.metadata) }
    if let error { throw error }
    return metadata
  }

  func updateProgress(completed: Int64, total: Int64? = nil) {
    state.withLock { s in
      s.completed = completed
      if let total { s.total = total }
    }
  }

  var phase: Phase { state.withLock { $0.phase } }

  /// Bytes transferred so far (without making a snapshot).
  public var bytesTransferred: Int64 { state.withLock { $0.completed } }

  // MARK: lifecycle shared by downloads and uploads

  /// The transfer itself, run by the driver task; subclasses implement it. It returns when the
  /// task finished or was paused (then `Task.isCancelled` is true).
  func drive() async {}

  /// Moves `from` → `to` under the lock; true when the task was in `from`.
  private func transition(from: Phase, to: Phase) -> Bool {
    state.withLock { s in
      guard s.phase == from else { return false }
      s.phase = to
      return true
    }
  }

  func start() {
    if reference.fullPath.isEmpty {
      // The bucket's root is not an object: the task fails as the SDK's does.
      finish(.failed, error: StorageError(
        code: .invalidArgument, object: reference.description, detail: "a transfer needs an object, not the bucket root"))
      return
    }
    guard transition(from: .notStarted, to: .running) else { return }
    fire([.resume])
    launch()
  }

  /// Stops the transfer and keeps what it achieved; `resume()` continues from there.
  public func pause() {
    guard transition(from: .running, to: .paused) else { return }
    stopDriver()
    fire([.pause])
  }

  public func resume() {
    guard transition(from: .paused, to: .running) else { return }
    fire([.resume])
    launch()
  }

  func stopDriver() {
    driver.withLock { $0?.cancel() }
  }

  /// Runs `drive()` after the previous driver (one paused a moment ago) has wound down.
  private func launch() {
    let running = reference.storage
    running.transfersRunning.add(1, ordering: .relaxed)
    driver.withLock { current in
      let previous = current
      current = Task { [self] in
        await previous?.value
        await drive()
        running.transfersRunning.subtract(1, ordering: .relaxed)
      }
    }
  }
}
