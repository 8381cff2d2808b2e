// Names as the mount shows them and as the bucket holds them: paths joined and split at the
// byte "/", which names a file may have, and which the bucket refuses for a new object.
import Foundation
import StorageCore
import Synchronization

extension Namespace {
  static func join(_ dir: String, _ name: String) -> String { dir.isEmpty ? name : dir + "/" + name }

  /// True when `path` is `folder` or under it ("" is the root, which holds everything). By
  /// bytes: NFD "café" is neither NFC "café" nor inside it (`==` on strings said it was, so a
  /// refresh of one spelling dropped what the mount knew of the other too).
  static func isInside(_ path: String, _ folder: String) -> Bool {
    folder.isEmpty || ObjectName.sameBytes(path, folder) || (path.hasBytePrefix(folder) && path.utf8.dropFirst(folder.utf8.count).first == UInt8(ascii: "/"))
  }

  /// `join` undone: the folder of `path` ("" at the root) and its last name.
  static func split(_ path: String) -> (dir: String, name: String) {
    // By bytes: a slash followed by a combining mark is one `Character`, and still a slash.
    guard let slash = path.utf8.lastIndex(of: UInt8(ascii: "/")) else { return ("", path) }
    return (String(path[..<slash]), String(path[path.utf8.index(after: slash)...]))
  }

  /// Why the bucket cannot hold an object made under the new name `name` at `path` exactly
  /// (an errno), or nil: Cloud Storage refuses carriage returns and line feeds in object names
  /// and names over 1,024 bytes (cloud.google.com/storage/docs/objects#naming).
  /// `objectName` is the name in the bucket (with the mount's prefix); a folder's is its
  /// placeholder's, one byte longer ("/").
  static func refusal(ofNewName name: String, objectName: String, isFolder: Bool) -> Int32? {
    guard isValidName(name) else { return EINVAL }
    if name.utf8.contains(where: { $0 == 0x0A || $0 == 0x0D }) { return EINVAL }
    if objectName.utf8.count + (isFolder ? 1 : 0) > maxObjectName { return ENAMETOOLONG }
    return nil
  }

  /// The longest object name Cloud Storage takes, in bytes.
  static let maxObjectName = 1024

  /// True when `a` and `b` are the same bytes. Swift's `==` on strings is canonical
  /// equivalence: NFC "café" (c3 a9) equals NFD "café" (65 cc 81), which are two objects.
  static func sameBytes(_ a: String, _ b: String) -> Bool { ObjectName.sameBytes(a, b) }

  /// A name the kernel can show: not empty, not `.`/`..`, no `/` or NUL, at most 255 bytes.
  static func isValidName(_ name: String) -> Bool {
    // Bytes, not Foundation's string search: this runs for every name of every listing.
    !name.isEmpty && name != "." && name != ".." && name.utf8.count <= 255
      && !name.utf8.contains(where: { $0 == UInt8(ascii: "/") || $0 == 0 })
  }
}
