// Which JSON API method a path names. Object names in paths are percent-encoded with their
// slashes (`o/a%2Fb`), but a raw slash is taken as part of the name too, as GCS does for GET.
import Foundation

enum GCSRoute: Equatable {
  enum Service: Equatable { case storage, upload, download }

  /// `b`: list (GET) or create (POST) buckets.
  case buckets
  case bucket(String)
  case storageLayout(String)
  /// `b/B/managedFolders`: none are kept, so it lists nothing.
  case managedFolders(String)
  /// `b/B/folders`: list (GET) or insert (POST) the folders of an HNS bucket.
  case folders(String)
  /// `b/B/folders/NAME`: get or delete one.
  case folder(bucket: String, name: String)
  /// `b/B/folders/SOURCE/renameTo/folders/TARGET`: a long-running rename.
  case renameFolder(bucket: String, source: String, target: String)
  /// `b/B/operations/ID`: a long-running operation, polled.
  case operation(bucket: String, id: String)
  /// `b/B/o/SOURCE/moveTo/o/TARGET`: `objects.move`.
  case move(bucket: String, source: String, target: String)
  /// `b/B/o`: list objects, or (under `/upload`) upload one.
  case objects(service: Service, bucket: String)
  case object(service: Service, bucket: String, name: String)
  /// `b/B/o/NAME/compose`.
  case compose(bucket: String, name: String)
  /// `b/B/o/SOURCE/{rewriteTo,copyTo}/b/B2/o/TARGET`.
  case copy(Copy)

  struct Copy: Equatable {
    var bucket: String
    var source: String
    var targetBucket: String
    var target: String
    /// `rewriteTo` answers a rewrite response around the object; `copyTo` the object.
    var rewrite: Bool
  }

  /// Nil for a path that is not one of these, or whose percent-encoding is broken.
  init?(path: String, method: String) {
    var segments = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst().map(String.init)
    var service = Service.storage
    // gcloud starts resumable uploads at `/resumable/upload/storage/v1/…`, which GCS serves too.
    if segments.first == "resumable" && segments.dropFirst().first == "upload" { segments.removeFirst() }
    if segments.first == "upload" || segments.first == "download" {
      service = segments[0] == "upload" ? .upload : .download
      segments.removeFirst()
    }
    guard segments.count >= 3, segments[0] == "storage", segments[1] == "v1", segments[2] == "b" else { return nil }
    segments.removeFirst(3)
    guard let first = segments.first, !first.isEmpty else {
      guard service == .storage else { return nil }
      self = .buckets
      return
    }
    guard let bucket = first.exactPercentDecoded else { return nil }
    segments.removeFirst()
    guard let kind = segments.first else {
      guard service == .storage else { return nil }
      self = .bucket(bucket)
      return
    }
    if kind == "storageLayout" && segments.count == 1 && service == .storage {
      self = .storageLayout(bucket)
      return
    }
    if kind == "managedFolders" && segments.count == 1 && service == .storage {
      self = .managedFolders(bucket)
      return
    }
    if kind == "folders" && service == .storage {
      guard let folder = Self.folder(bucket: bucket, Array(segments.dropFirst()), method: method) else { return nil }
      self = folder
      return
    }
    if kind == "operations" && segments.count == 2 && service == .storage {
      guard let id = segments[1].exactPercentDecoded, !id.isEmpty else { return nil }
      self = .operation(bucket: bucket, id: id)
      return
    }
    guard kind == "o" else { return nil }
    segments.removeFirst()
    if segments.isEmpty || segments == [""] {
      self = .objects(service: service, bucket: bucket)
      return
    }
    if method == "POST", service == .storage, let copy = Self.copy(bucket: bucket, segments) {
      self = .copy(copy)
      return
    }
    if method == "POST", service == .storage, let verb = segments.firstIndex(of: "moveTo"), verb > 0, segments.count > verb + 2,
      segments[verb + 1] == "o"
    {
      guard let source = segments[..<verb].joined(separator: "/").exactPercentDecoded,
        let target = segments[(verb + 2)...].joined(separator: "/").exactPercentDecoded, !source.isEmpty, !target.isEmpty
      else { return nil }
      self = .move(bucket: bucket, source: source, target: target)
      return
    }
    if method == "POST", service == .storage, segments.count == 2, segments[1] == "compose" {
      guard let name = segments[0].exactPercentDecoded, !name.isEmpty else { return nil }
      self = .compose(bucket: bucket, name: name)
      return
    }
    guard let name = segments.joined(separator: "/").exactPercentDecoded, !name.isEmpty else { return nil }
    self = .object(service: service, bucket: bucket, name: name)
  }

  /// The segments after `b/B/folders`: none (the collection), a name (raw slashes are part of
  /// it, as in object paths), or `SOURCE/renameTo/folders/TARGET` on POST.
  private static func folder(bucket: String, _ segments: [String], method: String) -> GCSRoute? {
    if segments.isEmpty || segments == [""] { return .folders(bucket) }
    if method == "POST", let verb = segments.firstIndex(of: "renameTo"), verb > 0, segments.count > verb + 2, segments[verb + 1] == "folders" {
      guard let source = segments[..<verb].joined(separator: "/").exactPercentDecoded,
        let target = segments[(verb + 2)...].joined(separator: "/").exactPercentDecoded
      else { return nil }
      return .renameFolder(bucket: bucket, source: Self.folderName(source), target: Self.folderName(target))
    }
    guard let name = segments.joined(separator: "/").exactPercentDecoded, !name.isEmpty else { return nil }
    return .folder(bucket: bucket, name: Self.folderName(name))
  }

  /// A folder named in a path may leave out its final `/` (gcloud's `mv` names the target so).
  private static func folderName(_ name: String) -> String {
    // By its last byte: `hasSuffix` compares characters, and a name ending in a prepend mark
    // (U+0600) joins the mark and "/" into one.
    name.isEmpty || name.utf8.last == UInt8(ascii: "/") ? name : name + "/"
  }

  private static func copy(bucket: String, _ segments: [String]) -> Copy? {
    guard let verb = segments.firstIndex(where: { $0 == "rewriteTo" || $0 == "copyTo" }), verb > 0,
      segments.count > verb + 4, segments[verb + 1] == "b", segments[verb + 3] == "o",
      let source = segments[..<verb].joined(separator: "/").exactPercentDecoded,
      let targetBucket = segments[verb + 2].exactPercentDecoded,
      let target = segments[(verb + 4)...].joined(separator: "/").exactPercentDecoded,
      !source.isEmpty, !target.isEmpty
    else { return nil }
    return Copy(bucket: bucket, source: source, targetBucket: targetBucket, target: target, rewrite: segments[verb] == "rewriteTo")
  }
}
