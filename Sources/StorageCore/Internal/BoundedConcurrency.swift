/// Runs `body` for each item with at most `limit` running at once and returns the non-nil results
/// (in completion order). After the first error no new work starts, and that error is thrown.
package func mapConcurrently<T: Sendable, R: Sendable, E: Error>(
  _ items: [T], limit: Int, _ body: @escaping @Sendable (T) async throws(E) -> R?
) async throws(E) -> [R] {
  let outcome: Result<[R], E> = await withTaskGroup(of: Result<R?, E>.self) { group in
    var next = 0
    var results: [R] = []
    var failure: E?
    func add() {
      let item = items[next]
      next += 1
      group.addTask {
        do throws(E) { return .success(try await body(item)) } catch { return .failure(error) }
      }
    }
    while next < min(max(1, limit), items.count) { add() }
    for await result in group {
      switch result {
      case .success(let value): if let value { results.append(value) }
      case .failure(let error): failure = failure ?? error
      }
      if failure == nil && next < items.count { add() }
    }
    if let failure { return .failure(failure) }
    return .success(results)
  }
  return try outcome.get()
}

/// `mapConcurrently` for work that returns nothing.
package func forEachConcurrently<T: Sendable, E: Error>(
  _ items: [T], limit: Int, _ body: @escaping @Sendable (T) async throws(E) -> Void
) async throws(E) {
  _ = try await mapConcurrently(items, limit: limit) { (item: T) throws(E) -> Void? in
    try await body(item)
    return nil
  }
}
