// Every object under a folder of the bucket, with its metadata: the tree a pin keeps. The
// folder is listed with one recursive listing (no delimiter: 1,000 objects a page, whatever
// the depth), so a tree of N objects costs ⌈N/1000⌉ list requests; listing it a folder at a
// time cost a request per folder (issue 55: 10,000 folders, 23,546 requests in 65 s idle).
//
// A GCS JSON listing carries each object's metadata, generation included. A Firebase v0
// listing carries names only (`{"name", "bucket"}`: the v0 list is allowed by rules that do
// not grant metadata reads, so the server leaves metadata out, and the official emulator's
// `ListItem` and ours do the same): no generation, size or time. There a name missing from
// `known` (the tree as last listed) has its metadata asked, a request each: those are the new
// objects, which are changed objects. A name `known` holds keeps what was known of it, without
// a request: over v0 no listing tells an object overwritten in place, and a metadata request
// for every object every pass is what made an idle pin cost a request per object. Those are
// found by a verifying walk (`known` empty), which a pin runs at its first check, on `bucketfs
// refresh` and SIGHUP, every `pin_verify_interval`, and for names the mount saw change.
import Foundation
import StorageCore

enum TreeWalk {
  /// Metadata requests in flight at once.
  static let concurrency = 8

  /// What a walk found, and what it cost.
  struct Walked: Sendable {
    var tree: [ObjectName: StorageMetadata]
    /// List pages asked for.
    var pages = 0
    /// Objects whose metadata was asked for one by one (a v0 listing's new names, or all of
    /// them when verifying).
    var asked = 0
  }

  /// The objects under `target` (a folder's prefix ending in "/", "" for the bucket), or the
  /// object `target` names (none when it is gone), by full name. Folder placeholders included.
  /// `known`: metadata taken as current for a name a listing gives without any.
  static func objects(
    under target: String, client: any ObjectClient, known: [ObjectName: StorageMetadata] = [:]
  ) async throws(BucketError) -> Walked {
    guard target.isEmpty || target.endsWithSlash else {
      do throws(BucketError) {
        return Walked(tree: [ObjectName(target): try await client.metadata(of: target)], asked: 1)
      } catch where error.code == .objectNotFound {
        return Walked(tree: [:], asked: 1)
      }
    }
    var walked = Walked(tree: [:])
    var unknown: [String] = []
    var token: String? = nil
    repeat {
      let page = try await client.listTreePage(prefix: target, pageToken: token)
      walked.pages += 1
      for (item, m) in zip(page.items, page.itemMetadata) {
        let name = ObjectName(item)
        if let m {
          walked.tree[name] = m
        } else if let m = known[name] {
          walked.tree[name] = m
        } else {
          unknown.append(item)
        }
      }
      token = page.nextPageToken
    } while token != nil
    walked.asked = unknown.count
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
      for (name, result) in asked { if let m = try result.get() { walked.tree[ObjectName(name)] = m } }
    }
    return walked
  }
}
