// What the mount answers when the server cannot: on an offline mount, and when the server is
// gone or does not answer: the staged copies and the pins' trees (`OfflineView`).
import Foundation
import StorageCore
import Synchronization

extension Namespace {
  /// `online`'s answer; on an offline mount, or when the server cannot be reached and copies
  /// are staged, `staged`'s instead.
  func fromServer<T>(
    _ what: @autoclosure () -> String, _ online: () async throws(BucketError) -> T, orStaged staged: () throws(FSError) -> T,
    unansweredThrows: Bool = false
  ) async throws(FSError) -> T {
    if options.offline { return try staged() }
    do {
      return try await online()
    } catch let serverError {
      guard ErrnoMapping.isServerGone(serverError), staging != nil, !(unansweredThrows && serverError.isUnanswered) else {
        throw FSError(serverError)
      }
      log("server unavailable (\(serverError.detail)); \(what()) from staged copies")
      do {
        return try staged()
      } catch {
        // Not staged either: the server's failure says more than "no such file".
        throw FSError(serverError)
      }
    }
  }

  func stagedCopies() -> [ObjectName: StorageMetadata] { offline.objects }

  func offlineListing(_ path: String) -> [DirectoryEntry] { offline.listing(path) }
}
