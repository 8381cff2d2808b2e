// A folder or file a user asked to keep available offline ("pinned"), and where keeping it
// stands. The tree is what the last complete listing of the pin found: the objects it keeps
// staged, and (placeholders included) what an offline mount shows of the folder.
import Foundation
import StorageCore

struct Pin: Sendable {
  /// Where bringing the pin up to date stands.
  enum Phase: Sendable {
    /// Listing the tree for the first time, to check it fits before anything is staged.
    case checking
    /// Staging what the tree holds and the staging folder does not.
    case staging(Progress)
    /// Every object of the last listing was staged (or failed: `failures`).
    case kept
    /// It would not fit; nothing was staged or evicted. Not recorded: the next mount forgets it.
    case refused(String)
  }

  struct Progress: Sendable {
    var files = 0
    var bytes: Int64 = 0
    var filesDone = 0
    var bytesDone: Int64 = 0
  }

  /// The full object name of a pinned file, or a folder's prefix (ending in "/"; "" for the
  /// whole bucket). Its bytes: NFC and NFD "café/" are two folders, and two pins.
  var target: ObjectName
  var phase: Phase
  /// The tree as last listed whole, by full object name (its bytes: two spellings of one
  /// name are two objects).
  var tree: [ObjectName: StorageMetadata]
  /// Objects of the tree that could not be staged, and why.
  var failures: [ObjectName: String] = [:]
  /// Why the tree could not be listed or brought up to date, when it could not.
  var problem: String?
  var lastRefreshed: Date?
  /// When every object's metadata was last asked of the server (a verifying walk). A GCS
  /// listing verifies each pass; a v0 listing has names only (`TreeWalk`).
  var lastVerified: Date?
  /// When the tree was last listed whole, its staging begun: a pin stopped in its first
  /// staging (never `lastRefreshed`) has the tree as listed, and holds its folder whole (what
  /// is not staged yet reads EIO offline). Nil for a pin never listed (made offline).
  var listed: Date?

  /// Whether the tree is a whole listing of the pin: its folder shows as the tree has it.
  /// Otherwise the pin holds no folder whole, only copies of some of its files: a pin stopped
  /// in its first staging showed `p` offline as 3 of its 4 folders, one with 8 of its 20 files,
  /// exit 0 (issue 55 F5).
  var listedWhole: Bool {
    if case .checking = phase { return false }
    return lastRefreshed != nil || listed != nil
  }

  var isFolder: Bool { target.string.isEmpty || target.string.endsWithSlash }

  /// Whether object `name` is under this pin.
  func holds(_ name: String) -> Bool { isFolder ? name.hasBytePrefix(target.string) : ObjectName(name) == target }

  /// Whether the pin and the folder or file `path` (a full object name, a folder's with its
  /// "/") overlap: a refresh of either concerns the other.
  func overlaps(_ path: String) -> Bool { holds(path) || path.isEmpty || (path.endsWithSlash && target.string.hasBytePrefix(path)) }

  /// The objects whose bytes the pin keeps (folder placeholders have none worth a copy).
  static func files(of tree: [ObjectName: StorageMetadata]) -> [(name: String, metadata: StorageMetadata)] {
    tree.filter { !$0.key.string.endsWithSlash }.sorted { $0.key < $1.key }.map { ($0.key.string, $0.value) }
  }

  var files: [(name: String, metadata: StorageMetadata)] { Self.files(of: tree) }

  var isRefused: Bool {
    if case .refused = phase { return true }
    return false
  }
}
