// Every object under a folder of the bucket, with its metadata: the tree a pin keeps. Folders
// are listed level by level, several at a time; a listing without metadata (the Firebase API's
// v0 list gives names only) has each object's metadata asked for, several at a time too.
import Foundation
import StorageCore

enum TreeWalk {
  /// Listings or metadata requests in flight at once.
  static let concurrency = 8

  /// The objects under `target` (a folder's prefix ending in "/", "" for the bucket), or the
  /// object `target` names (none when it is gone), by full name. Folder placeholders included.
  static func objects(under target: String, client: any ObjectClient) async throws(BucketError) -> [String: StorageMetadata] {
    guard target.isEmpty || target.hasSuffix("/") else {
      do throws(BucketError) {
        return [target: try await client.metadata(of: target)]
      } catch where error.code == .objectNotFound {
        return [:]
      }
    }
    var found: [String: StorageMetadata] = [:]
    var unknown: [String] = []
    var level = [target]
    while !level.isEmpty {
      let pages = try await map(level) { (folder: String) async throws(BucketError) -> ListPage in
        try await ListPage.all { token async throws(BucketError) in
          try await client.listPage(prefix: folder, pageToken: token, maxResults: nil)
        }
      }
      level = []
      for page in pages {
        level += page.prefixes
        for item in page.items {
          if let m = page.metadata[item] { found[item] = m } else { unknown.append(item) }
        }
      }
    }
    let asked = try await map(unknown) { (name: String) async throws(BucketError) -> (String, StorageMetadata?) in
      do throws(BucketError) {
        return (name, try await client.metadata(of: name))
      } catch where error.code == .objectNotFound {
        return (name, nil)  // deleted since it was listed
      }
    }
    for (name, m) in asked { if let m { found[name] = m } }
    return found
  }

  /// `transform` of every element, `concurrency` at a time; the first failure is thrown.
  private static func map<T: Sendable, R: Sendable>(
    _ items: [T], _ transform: @escaping @Sendable (T) async throws(BucketError) -> R
  ) async throws(BucketError) -> [R] {
    let results = await withTaskGroup(of: Result<R, BucketError>.self) { group -> [Result<R, BucketError>] in
      var out: [Result<R, BucketError>] = []
      var next = 0
      func add() {
        let item = items[next]
        next += 1
        group.addTask {
          do throws(BucketError) { return .success(try await transform(item)) } catch { return .failure(error) }
        }
      }
      while next < min(items.count, concurrency) { add() }
      for await result in group {
        out.append(result)
        if case .failure = result {
          group.cancelAll()
          break
        }
        if next < items.count { add() }
      }
      return out
    }
    return try results.map { (result: Result<R, BucketError>) throws(BucketError) -> R in try result.get() }
  }
}
