// A reader gets bytes or an error within `read_timeout`, whatever the fetches behind the read are
// doing (waiting on a prefetch that stalled, retrying, backing off): the read is answered when its
// deadline passes, while the fetch goes on in the background and fills the cache if it succeeds.
import Foundation
import StorageCore
import Synchronization

enum ReadDeadline {
  private static let timers = DispatchQueue(label: "bucketfs.read.deadlines")

  private final class Gate: Sendable {
    let fired = Atomic<Bool>(false)
    func claim() -> Bool { !fired.exchange(true, ordering: .acquiringAndReleasing) }
  }

  /// `body`'s result, or `timedOut` after `seconds`.
  static func run<T: Sendable>(
    seconds: Double, object: String, _ body: @escaping @Sendable () async throws(BucketError) -> T
  ) async throws(BucketError) -> T {
    let gate = Gate()
    let result: Result<T, BucketError> = await withCheckedContinuation { cont in
      // The timer runs on a queue of its own, not as a task: it fires on time when every task
      // thread is busy.
      timers.asyncAfter(deadline: .now() + seconds) {
        if gate.claim() {
          cont.resume(returning: .failure(BucketError(
            code: .timedOut, object: object, detail: "no answer within read_timeout (\(seconds) s)")))
        }
      }
      Task {
        let outcome: Result<T, BucketError>
        do throws(BucketError) {
          outcome = .success(try await body())
        } catch {
          outcome = .failure(error)
        }
        if gate.claim() { cont.resume(returning: outcome) }
      }
    }
    return try result.get()
  }
}
