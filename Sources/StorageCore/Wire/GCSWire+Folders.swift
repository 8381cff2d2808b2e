import Foundation

/// The requests of a bucket's layout and of the `folders` resource of buckets with a
/// hierarchical namespace (HNS), which only the GCS JSON API has. A folder's name ends in `/`.
extension GCSWire {
  private func bucketBase(_ bucket: String) -> String { "\(root)/storage/v1/b/\(PercentEncoding.encode(bucket))" }

  private func folderURL(_ bucket: String, _ folder: String) -> String {
    bucketBase(bucket) + "/folders/\(PercentEncoding.encode(folder))"
  }

  /// `buckets.getStorageLayout`: whether the bucket has a hierarchical namespace. Asked rather
  /// than the bucket resource because it needs only the right to list objects, which a mount
  /// has (gcsfuse asks it for the same reason).
  func storageLayout(_ bucket: String) -> HTTPRequest {
    HTTPRequest(method: "GET", url: bucketBase(bucket) + "/storageLayout", headers: authHeaders)
  }

  /// `folders.insert` of `folder`; `recursive` makes its missing parents too.
  func insertFolder(_ bucket: String, _ folder: String, recursive: Bool) -> HTTPRequest {
    let body = (try? JSONSerialization.data(withJSONObject: ["name": folder])) ?? Data()
    return HTTPRequest(
      method: "POST", url: bucketBase(bucket) + "/folders" + (recursive ? "?recursive=true" : ""),
      headers: authHeaders + [("Content-Type", "application/json; charset=utf-8")], body: .data(body))
  }

  func getFolder(_ bucket: String, _ folder: String) -> HTTPRequest {
    HTTPRequest(method: "GET", url: folderURL(bucket, folder), headers: authHeaders)
  }

  func deleteFolder(_ bucket: String, _ folder: String) -> HTTPRequest {
    HTTPRequest(method: "DELETE", url: folderURL(bucket, folder), headers: authHeaders)
  }

  /// `folders.rename`: answers a long-running operation (`operation`).
  func renameFolder(_ bucket: String, _ source: String, to target: String) -> HTTPRequest {
    HTTPRequest(
      method: "POST", url: folderURL(bucket, source) + "/renameTo/folders/\(PercentEncoding.encode(target))", headers: authHeaders)
  }

  /// A long-running operation's state, by the last part of its name.
  func operation(_ bucket: String, _ id: String) -> HTTPRequest {
    HTTPRequest(method: "GET", url: bucketBase(bucket) + "/operations/\(PercentEncoding.encode(id))", headers: authHeaders)
  }
}
