import Foundation
import StorageCore

/// Pins through extended attributes: `bucketfs pin`, `unpin` and `status` read them (getxattr
/// works on read-only mounts, where the kernel refuses setxattr), and on a writable mount
/// `setfattr -n user.bucketfs.pin -v 1 PATH` (or `-x`) does the same from any tool.
extension BucketFilesystem {
  /// A pinned file or folder's pin, in words; set to 1 pins, to 0 (or removed) unpins.
  package static let pinAttribute = "user.bucketfs.pin"
  /// Read to pin (after the check that it fits) or unpin the file or folder it is read from:
  /// the pin's status line, or `refused` and why. Not listed.
  package static let pinAddAttribute = "user.bucketfs.pin.add"
  package static let pinRemoveAttribute = "user.bucketfs.pin.remove"
  /// The root's: one status line per pin (`statusLine`), then its failures.
  package static let pinsAttribute = "user.bucketfs.pins"
  /// The same, answered once a pin changed or after the milliseconds the name ends with (at
  /// most `queueWaitLimit`): `bucketfs pin` follows a pin without asking over and over.
  package static let pinsWaitPrefix = "user.bucketfs.pins.wait."

  package static func isPinAttribute(_ name: String) -> Bool {
    name == pinAttribute || name == pinAddAttribute || name == pinRemoveAttribute || name == pinsAttribute
      || name.hasPrefix(pinsWaitPrefix)
  }

  /// What a pin of file or folder `ino` is named by: a file's object, a folder's prefix, as
  /// bytes (a pin of NFD "café" is no pin of NFC "café").
  private func pinTarget(_ ino: UInt64) throws(FSError) -> ObjectName {
    guard let node = inodes.node(ino) else { throw FSError(ESTALE) }
    return pinTarget(node)
  }

  private func pinTarget(_ node: InodeTable.Node) -> ObjectName {
    if node.isDirectory { return ObjectName(node.path.isEmpty ? client.bucketName("") : client.bucketName(node.path) + "/") }
    return ObjectName(client.bucketName(node.objectName ?? node.path))
  }

  private func keeper() throws(FSError) -> PinKeeper {
    // Pins are staged copies: a mount without staging has nowhere to keep them.
    guard let pins else { throw FSError(ENOTSUP) }
    return pins
  }

  /// getxattr of one of the pin attributes.
  package func pinXattr(_ ino: UInt64, name: String) async throws(FSError) -> String {
    let pins = try keeper()
    if name.hasPrefix(Self.pinsWaitPrefix) {
      guard let ms = Int(name.dropFirst(Self.pinsWaitPrefix.count)), ms >= 0 else { throw FSError(ENODATA) }
      await pins.waitForChange(within: min(Double(ms) / 1000, Self.queueWaitLimit))
      return pins.pins.map { pinStatus($0, pins) }.joined()
    }
    switch name {
    case Self.pinsAttribute:
      return pins.pins.map { pinStatus($0, pins) }.joined()
    case Self.pinAddAttribute:
      let target = try pinTarget(ino)
      pins.pin(target)
      guard let pin = await pins.checked(target) else {
        // Unpinned (by another command) before its first check ended: said so, not EIO.
        return PinStatusLine.line([shownPath(target), "unpinned", "0", "0", "0", "0", "-", "0", "unpinned before its first check ended"])
      }
      return pinStatus(pin, pins)
    case Self.pinRemoveAttribute:
      return pins.unpin(try pinTarget(ino)) ? "unpinned\n" : "not pinned\n"
    default:
      let target = try pinTarget(ino)
      guard let pin = pins.pin(for: target) ?? pins.pin(holding: target.string) else { throw FSError(ENODATA) }
      return pinSummary(pin, pins)
    }
  }

  /// setxattr of `user.bucketfs.pin`: 1 (yes, on, true) pins, 0 (no, off, false) unpins.
  /// A pin that does not fit is refused with ENOSPC (the reason is in the log and `bucketfs status`).
  package func setPinXattr(_ ino: UInt64, value: String) async throws(FSError) {
    let pins = try keeper()
    let target = try pinTarget(ino)
    switch value.trimmingCharacters(in: .whitespacesAndNewlines).lowercased() {
    case "1", "yes", "on", "true", "":
      pins.pin(target)
      if let pin = await pins.checked(target), case .refused = pin.phase { throw FSError(ENOSPC) }
    case "0", "no", "off", "false":
      pins.unpin(target)
    default:
      throw FSError(EINVAL)
    }
  }

  /// removexattr of `user.bucketfs.pin`: unpins (ENODATA when not pinned).
  package func removePinXattr(_ ino: UInt64) throws(FSError) {
    guard try keeper().unpin(try pinTarget(ino)) else { throw FSError(ENODATA) }
  }

  /// A rename made through the mount (`source` to `target`, paths in the mount): the pins
  /// follow it (`PinKeeper.renamed`). Neither the queued moves nor a folders.rename on the
  /// server told the pins of it: they stayed on the old name.
  func pinsFollow(renameOf source: String, to target: String, isFolder: Bool) {
    let end = isFolder ? "/" : ""
    pins?.renamed(from: client.bucketName(source) + end, to: client.bucketName(target) + end)
  }

  /// `user.bucketfs.pin` in a listing of the attributes of a pin's own file or folder.
  func pinXattrs(_ node: InodeTable.Node) -> [(String, String)] {
    let target = pinTarget(node)
    guard let pins, let pin = pins.pin(for: target)
    else { return [] }
    return [(Self.pinAttribute, pinSummary(pin, pins))]
  }

  /// The pin's path as the mount shows it ("." for the mount's root); its bucket name outside
  /// the mount's view.
  private func shownPath(_ pin: Pin) -> String { shownPath(pin.target) }

  private func shownPath(_ target: ObjectName) -> String {
    guard let mine = client.viewName(target.string) else { return "gs://\(client.bucket)/\(target)" }
    let shown = mine.withoutTrailingSlash
    return shown.isEmpty ? "." : shown
  }

  /// Where the pin stands: state, files kept of all, bytes kept of all.
  private func pinCounts(_ pin: Pin, _ pins: PinKeeper) -> (state: String, files: Int, allFiles: Int, bytes: Int64, allBytes: Int64) {
    switch pin.phase {
    case .checking: return ("checking", 0, 0, 0, 0)
    case .refused: return ("refused", 0, 0, 0, 0)
    case .staging(let p):
      if p.files == 0 {
        let state = pins.online ? "staging" : "offline"
        // Not listed yet this mount (a pin resumed): what its last listing holds.
        let files = pin.files
        let kept = pins.kept(pin)
        return (state, kept.files, files.count, kept.bytes, files.reduce(0) { $0 + $1.metadata.size })
      }
      return ("staging", p.filesDone, p.files, p.bytesDone, p.bytes)
    case .kept:
      let files = pin.files
      let kept = pins.kept(pin)
      return ("kept", kept.files, files.count, kept.bytes, files.reduce(0) { $0 + $1.metadata.size })
    }
  }

  /// One pin for `bucketfs status`: `PATH STATE FILES_KEPT FILES BYTES_KEPT BYTES REFRESHED
  /// FAILED PROBLEM`, then a `failed PATH OBJECT REASON` line per failure (`PinStatusLine`:
  /// tab-separated, each field escaped).
  private func pinStatus(_ pin: Pin, _ pins: PinKeeper) -> String {
    let c = pinCounts(pin, pins)
    let refreshed = pin.lastRefreshed.map { StorageMetadata.formatDate($0) } ?? "-"
    var problem = pin.problem ?? ""
    if case .refused(let why) = pin.phase { problem = why }
    let path = shownPath(pin)
    var text = PinStatusLine.line([path, c.state, "\(c.files)", "\(c.allFiles)", "\(c.bytes)", "\(c.allBytes)", refreshed, "\(pin.failures.count)", problem])
    for (name, reason) in pin.failures.sorted(by: { $0.key < $1.key }) {
      text += PinStatusLine.line(["failed", path, client.viewName(name.string) ?? name.string, reason])
    }
    return text
  }

  /// The pin in words, for getfattr.
  private func pinSummary(_ pin: Pin, _ pins: PinKeeper) -> String {
    let c = pinCounts(pin, pins)
    if case .refused(let why) = pin.phase { return "refused: \(why)" }
    var text = "\(c.state): \(c.files) of \(c.allFiles) files, \(ByteCount(c.bytes)) of \(ByteCount(c.allBytes))"
    if let at = pin.lastRefreshed { text += ", refreshed \(StorageMetadata.formatDate(at))" }
    if !pin.failures.isEmpty { text += ", \(pin.failures.count) failed" }
    if let problem = pin.problem { text += "; \(problem)" }
    return text
  }
}
