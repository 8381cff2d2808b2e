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
  static func objects(under target: String, client: any ObjectClient) async throws(BucketError) -> [ObjectName: StorageMetadata] {
    guard target.isEmpty || target.hasSuffix("/") else {
      do throws(BucketError) {
        return [ObjectName(target): try await client.metadata(of: target)]
      } catch where error.code == .objectNotFound {
        return [:]
      }
    }
    var found: [ObjectName: StorageMetadata] = [:]
    var unknown: [String] = []
    var level = [target]
    while !level.isEmpty {
      var next: [String] = []
      for start in stride(from: 0, to: level.count, by: concurrency) {
        let batch = Array(level[start..<min(level.count, start + concurrency)])
        let pages = await withTaskGroup(of: Result<ListPage, BucketError>.self) { group -> [Result<ListPage, BucketError>] in
          for folder in batch {
            group.addTask {
              do throws(BucketError) {
                return .success(
                  try await ListPage.all { token async throws(BucketError) in
                    try await client.listPage(prefix: folder, pageToken: token, maxResults: nil)
                  })
              } catch {
                return .failure(error)
              }
            }
          }
          var out: [Result<ListPage, BucketError>] = []
          for await page in group { out.append(page) }
          return out
        }
        for result in pages {
          let page = try result.get()
          next += page.prefixes
          for (item, m) in zip(page.items, page.itemMetadata) {
            if let m { found[ObjectName(item)] = m } else { unknown.append(item) }
          }
        }
      }
      level = next
    }
    for start in stride(from: 0, to: unknown.count, by: concurrency) {
      let batch = Array(unknown[start..<min(unknown.count, start + concurrency)])
      let asked = await withTaskGroup(of: (String, Result<StorageMetadata?, BucketError>).self) { group in
        for name in batch {
          group.addTask {
            do throws(BucketError) {
              return (name, .success(try await client.metadata(of: name)))
            } catch where error.code == .objectNotFound {
              return (name, .success(nil))  // deleted since it was listed
            } catch {
              return (name, .failure(error))
            }
          }
        }
        var out: [(String, Result<StorageMetadata?, BucketError>)] = []
        for await answer in group { out.append(answer) }
        return out
      }
      for (name, result) in asked { if let m = try result.get() { found[ObjectName(name)] = m } }
    }
    return found
  }
}
