/// Runs `body` with `fixture`, which lives until `body` returns: its deinit then stops what it
/// started (a server, a process, a mount), also when `body` throws.
package func scope<Fixture: AnyObject, T>(_ fixture: Fixture, _ body: (Fixture) throws -> T) rethrows -> T {
  try withExtendedLifetime(fixture) { try body(fixture) }
}

package func scope<Fixture: AnyObject, T>(_ fixture: Fixture, _ body: (Fixture) async throws -> T) async rethrows -> T {
  defer { withExtendedLifetime(fixture) {} }
  return try await body(fixture)
}
