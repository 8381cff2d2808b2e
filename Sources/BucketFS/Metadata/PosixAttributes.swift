// The POSIX attributes an object carries in its custom metadata, in the keys Google's own tools
// write and read for `--preserve-posix` (`gcloud storage cp -P`, `gsutil cp -P`, Storage
// Transfer Service): the permission bits as three octal digits, owner and group as decimal
// ids, the modification and access times in whole seconds. An object without them shows the
// mount's `file_mode`, `uid` and `gid`, and its mtime as its atime.
import Foundation
import StorageCore
import Synchronization

struct PosixAttributes: Equatable, Sendable {
  static let modeKey = "goog-reserved-posix-mode"
  static let uidKey = "goog-reserved-posix-uid"
  static let gidKey = "goog-reserved-posix-gid"
  static let mtimeKey = "goog-reserved-file-mtime"
  static let atimeKey = "goog-reserved-file-atime"

  /// Permission bits only (0o777): what Google's tools keep.
  var mode: UInt32?
  var uid: UInt32?
  var gid: UInt32?
  var mtime: Timestamp?
  var atime: Timestamp?

  init(mode: UInt32? = nil, uid: UInt32? = nil, gid: UInt32? = nil, mtime: Timestamp? = nil, atime: Timestamp? = nil) {
    self.mode = mode
    self.uid = uid
    self.gid = gid
    self.mtime = mtime
    self.atime = atime
  }

  /// What `custom` holds; a value that is not a number of the right kind is left out, as
  /// gcloud leaves it out.
  init(custom: [String: String]?) {
    guard let custom else { return }
    mode = custom[Self.modeKey].flatMap { UInt32($0, radix: 8) }.flatMap { $0 <= 0o7777 ? $0 & 0o777 : nil }
    uid = custom[Self.uidKey].flatMap { UInt32($0) }
    gid = custom[Self.gidKey].flatMap { UInt32($0) }
    mtime = custom[Self.mtimeKey].flatMap { Int64($0) }.flatMap { $0 >= 0 ? Timestamp(seconds: $0) : nil }
    atime = custom[Self.atimeKey].flatMap { Int64($0) }.flatMap { $0 >= 0 ? Timestamp(seconds: $0) : nil }
  }

  /// `other`'s values where it has them.
  func overridden(by other: PosixAttributes) -> PosixAttributes {
    PosixAttributes(
      mode: other.mode ?? mode, uid: other.uid ?? uid, gid: other.gid ?? gid, mtime: other.mtime ?? mtime, atime: other.atime ?? atime)
  }

  /// The custom metadata entries for what is set.
  var custom: [String: String] {
    var out: [String: String] = [:]
    if let mode { out[Self.modeKey] = String(mode & 0o777, radix: 8).leftPadded(to: 3) }
    if let uid { out[Self.uidKey] = String(uid) }
    if let gid { out[Self.gidKey] = String(gid) }
    if let mtime { out[Self.mtimeKey] = String(mtime.seconds) }
    if let atime { out[Self.atimeKey] = String(atime.seconds) }
    return out
  }

  /// `custom`, and the modification time to the nanosecond in `mtime` (RFC 3339, as rclone
  /// writes it), which Google's whole seconds would round.
  var customWithExactTime: [String: String] {
    var out = custom
    if let mtime { out["mtime"] = KeptTime.format(mtime) }
    return out
  }

  /// The entries of `custom` that hold POSIX attributes: Google's keys and `mtime`.
  static func entries(of custom: [String: String]) -> [String: String] {
    custom.filter { [modeKey, uidKey, gidKey, mtimeKey, atimeKey, "mtime"].contains($0.key) }
  }
}

extension String {
  fileprivate func leftPadded(to width: Int) -> String { count >= width ? self : String(repeating: "0", count: width - count) + self }
}

/// Mode and owner changes (chmod, chown) this mount queued, by path, until the queue applies
/// the change that carries them: until then they answer over what the bucket's metadata says.
/// A folder's (mkdir's mode and owner, chmod and chown of a folder) are held with sequence
/// `.max`, for the mount's life: a folder is a prefix, with no object to keep them in.
final class PosixChanges: Sendable {
  /// What is set of a path, and when it last changed (its ctime).
  struct Held {
    var attributes: PosixAttributes
    var at: Timestamp
    var sequence: UInt64
  }

  /// By the path's bytes: two spellings of a folder's name are two folders.
  private let set = Mutex<[ObjectName: Held]>([:])
  private let clock: @Sendable () -> Timestamp

  init(clock: @escaping @Sendable () -> Timestamp = { Timestamp.now() }) { self.clock = clock }

  func held(_ path: () -> String?) -> Held? {
    guard set.withLock({ !$0.isEmpty }), let path = path() else { return nil }
    return set.withLock { $0[ObjectName(path)] }
  }

  /// `change` was queued as `sequence`, over what was set before.
  func queued(_ path: String, _ change: PosixAttributes, sequence: UInt64) {
    let now = clock()
    set.withLock { s in
      let before = s[ObjectName(path)]?.attributes ?? PosixAttributes()
      s[ObjectName(path)] = Held(attributes: before.overridden(by: change), at: now, sequence: sequence)
    }
  }

  /// An entry was made or removed in folder `path`: its mtime and ctime are now.
  func folderChanged(_ path: String) { queued(path, PosixAttributes(mtime: clock()), sequence: .max) }

  /// The queue applied change `sequence` of `path`.
  func applied(_ path: String, sequence: UInt64) {
    set.withLock { s in
      if let mine = s[ObjectName(path)], mine.sequence <= sequence { s.removeValue(forKey: ObjectName(path)) }
    }
  }

  func forget(_ path: String) { _ = set.withLock { $0.removeValue(forKey: ObjectName(path)) } }

  /// Folder `source` was renamed `target`: what was set of it and of the folders under it goes
  /// with them (a file's own goes with its object).
  func moveFolders(_ source: String, to target: String) {
    set.withLock { s in
      // An empty folder renamed over keeps nothing of its own.
      for (path, held) in s where held.sequence == .max && Namespace.isInside(path.string, target) { s.removeValue(forKey: path) }
      for (path, held) in s where held.sequence == .max && Namespace.isInside(path.string, source) {
        s.removeValue(forKey: path)
        s[ObjectName(target + path.string.droppingBytes(source.utf8.count))] = held
      }
    }
  }
}
