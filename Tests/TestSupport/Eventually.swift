import Foundation

/// Polls `condition` until it holds or `timeout` passes; returns whether it held. Tests wait for
/// what they expect to happen, never for a fixed time. The default bound is a hang detector:
/// what a test waits for may wait its turn on the task pool (a thread per core) behind every
/// test that runs beside it, which on two busy cores was seen to take over 10 s.
package func eventually(
  timeout: Duration = .seconds(60), every interval: Duration = .milliseconds(20), _ condition: () async throws -> Bool
) async rethrows -> Bool {
  let deadline = ContinuousClock.now + timeout
  while true {
    if try await condition() { return true }
    if ContinuousClock.now >= deadline { return false }
    try? await Task.sleep(for: interval)
  }
}

/// `eventually` for code that runs off the task pool (blocking tests): polls `condition` on this
/// thread until it holds or `timeout` passes; returns whether it held.
package func waitUntil(timeout: TimeInterval = 10, every interval: TimeInterval = 0.02, _ condition: () -> Bool) -> Bool {
  let deadline = Date().addingTimeInterval(timeout)
  while true {
    if condition() { return true }
    if Date() >= deadline { return false }
    Thread.sleep(forTimeInterval: interval)
  }
}
