// A symbolic link as an object, the way gcsfuse and Google's tools keep one (so a bucket shared
// with them shows the same links both ways): the object's bytes are the target, and its custom
// metadata says it is a link (`goog-reserved-file-is-symlink: true`, gcloud's and gcsfuse's
// key). Older gcsfuse kept the target in `gcsfuse_symlink_target` with no bytes; links written
// here carry both, so that a listing that has metadata (GCS API) gives the target without a
// read, and older gcsfuse reads them too.
enum SymlinkObject {
  static let key = "goog-reserved-file-is-symlink"
  static let targetKey = "gcsfuse_symlink_target"
  /// Longer targets are refused, as Linux (PATH_MAX) and gcsfuse refuse them.
  static let maxTarget = 4095

  static func isLink(_ custom: [String: String]?) -> Bool {
    guard let custom else { return false }
    return custom[key]?.lowercased() == "true" || custom[targetKey] != nil
  }

  /// The target when the metadata holds it (links written here, older gcsfuse's); otherwise it
  /// is the object's bytes.
  static func target(in custom: [String: String]?) -> String? { custom?[targetKey] }

  static func custom(target: String) -> [String: String] { [key: "true", targetKey: target] }
}
