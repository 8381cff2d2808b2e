import Foundation

/// Polls `condition` until it holds or `timeout` passes; returns whether it held. Tests wait for
/// what they expect to happen, never for a fixed time.
package func eventually(
  timeout: Duration = .seconds(10), every interval: Duration = .milliseconds(20), _ condition: () async throws -> Bool
) async rethrows -> Bool {
  let deadline = ContinuousClock.now + timeout
  while true {
    if try await condition() { return true }
    if ContinuousClock.now >= deadline { return false }
    try? await Task.sleep(for: interval)
  }
}
