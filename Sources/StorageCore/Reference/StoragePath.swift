import Foundation

/// A bucket and an object name, and the SDK's rules for turning user text into them.
package struct StoragePath: Sendable, Hashable {
  package var bucket: String
  /// The object name without a leading slash; "" for the root.
  package var object: String

  package init(bucket: String, object: String) {
    self.bucket = bucket
    self.object = object
  }

  /// Collapses repeated slashes and drops leading and trailing ones, as the iOS and Android SDKs do.
  /// At "/" bytes: a "/" followed by a combining mark is one `Character`, not a "/".
  package static func normalize(_ path: String) -> String {
    path.slashSegments(omittingEmpty: true).joined(separator: "/")
  }

  /// Parses the URL forms a reference can be made from: `gs://bucket/path`,
  /// `http(s)://host[:port]/v0/b/bucket/o/encoded-path[?…]`, and the GCS forms
  /// `https://storage.googleapis.com/bucket/path` and `…/storage/v1/b/bucket/o/encoded-path`.
  ///
  /// `exactNames`: a `gs://` URL names its object byte for byte, as Google's tools take it
  /// (`gs://b/d/x//y` is object `d/x//y`, not `d/x/y`), but for one trailing slash, which says
  /// "a folder"; the SDK's rules collapse slashes, and a command that took them reached (and
  /// removed) another object.
  package static func parse(url: String, exactNames: Bool = false) throws(StorageError) -> StoragePath {
    func bad(_ why: String) -> StorageError {
      StorageError(code: .invalidArgument, object: url, detail: why)
    }
    if url.hasPrefix("gs://") {
      // By bytes: in "gs://b/" U+0301 "x" the slash and the accent are one `Character`.
      let rest = url.droppingBytes(5)
      let slash = rest.utf8.firstIndex(of: UInt8(ascii: "/")) ?? rest.utf8.endIndex
      let bucket = String(decoding: rest.utf8[..<slash], as: UTF8.self)
      guard !bucket.isEmpty else { throw bad("a gs:// URL needs a bucket name") }
      let object = slash == rest.utf8.endIndex ? "" : String(decoding: rest.utf8[rest.utf8.index(after: slash)...], as: UTF8.self)
      guard exactNames else { return StoragePath(bucket: bucket, object: normalize(object)) }
      return StoragePath(bucket: bucket, object: object.withoutTrailingSlash)
    }
    guard url.hasPrefix("http://") || url.hasPrefix("https://") else {
      throw bad("not a gs:// or http(s):// storage URL")
    }
    let afterScheme = url.droppingBytes(url.hasPrefix("https://") ? 8 : 7).utf8
    let pathStart = afterScheme.firstIndex(of: UInt8(ascii: "/")) ?? afterScheme.endIndex
    let host = String(decoding: afterScheme[..<pathStart], as: UTF8.self)
    var path = afterScheme[pathStart...]
    if let q = path.firstIndex(where: { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }) { path = path[..<q] }
    let segments = String(decoding: path, as: UTF8.self).slashSegments().dropFirst().map { $0 }

    // /v0/b/BUCKET[/o[/ENCODED]] and /storage/v1/b/BUCKET[/o[/ENCODED]]
    var index = 0
    if segments.first == "v0" {
      index = 1
    } else if segments.count >= 2, segments[0] == "storage", segments[1] == "v1" {
      index = 2
    } else if segments.count >= 3, segments[0] == "download" || segments[0] == "upload",
      segments[1] == "storage", segments[2] == "v1"
    {
      index = 3
    }
    if index > 0 {
      guard segments.count > index + 1, segments[index] == "b", !segments[index + 1].isEmpty else {
        throw bad("expected …/b/BUCKET/o/OBJECT in the URL path")
      }
      guard let bucket = segments[index + 1].exactPercentDecoded else {
        throw bad("bad percent-encoding in the bucket")
      }
      var object = ""
      if segments.count > index + 2 {
        guard segments[index + 2] == "o" else { throw bad("expected /o/ after the bucket") }
        let encoded = segments[(index + 3)...].joined(separator: "/")
        guard let decoded = encoded.exactPercentDecoded else {
          throw bad("bad percent-encoding in the object name")
        }
        object = decoded
      }
      return StoragePath(bucket: bucket, object: normalize(object))
    }
    if host == "storage.googleapis.com" || host == "storage.cloud.google.com" {
      guard segments.count >= 1, !segments[0].isEmpty else { throw bad("no bucket in the URL") }
      let encoded = segments.dropFirst().joined(separator: "/")
      guard let object = encoded.exactPercentDecoded else {
        throw bad("bad percent-encoding in the object name")
      }
      return StoragePath(bucket: segments[0], object: normalize(object))
    }
    throw bad("not a Firebase Storage (/v0/b/…) or Cloud Storage URL")
  }

  /// `gs://bucket/object`, the form every message uses to name an object.
  public var gsURL: String { "gs://\(bucket)/\(object)" }
}
