import Foundation
import Synchronization

/// A resumable upload session that outlives its process: give one to `putFile` and it is told the
/// session's URL as soon as the server opens it (`started`), so the caller can keep it on disk; a
/// new upload given that URL asks the server how far it got and sends only the rest. A session
/// the server no longer knows is started again.
public final class UploadSession: Sendable {
  private let current: Mutex<String?>
  private let onStart: @Sendable (String?) -> Void

  public init(url: String? = nil, started: @escaping @Sendable (String?) -> Void = { _ in }) {
    current = Mutex(url)
    onStart = started
  }

  public var url: String? { current.withLock { $0 } }

  func opened(_ url: String?) {
    current.withLock { $0 = url }
    onStart(url)
  }
}
