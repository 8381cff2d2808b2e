import BucketFS
import Foundation
import StorageCore

/// `bucketfs pin`, `unpin` and `status`: folders and files a mount keeps available offline.
/// Each asks the mount through an extended attribute of the path itself (getxattr, which
/// read-only mounts answer too), and follows the pin through the root's list of pins.
enum PinCommand {
  static let pinUsage = """
    usage: bucketfs pin [--background] PATH...
           bucketfs pin --list MOUNTPOINT [PATH]

    Keeps each PATH (a file or folder in a bucketfs mount, everything under it) available offline:
    every object is staged in the background and verified, never evicted, and brought up to date
    when the mount learns of changes (metadata_ttl, bucketfs refresh, SIGHUP). Shows a progress
    bar and returns when every file is staged (exit 0), or at once after the check with
    --background. A pin that would not fit in staging_size beside the other pins is refused,
    with how much it needs and how much is free, and nothing is evicted. Pins last across
    remounts. --list is `bucketfs status`.
    """

  static let unpinUsage = """
    usage: bucketfs unpin PATH...

    Stops keeping each PATH available offline. Its staged copies stay, as any staged copy does,
    until room is needed.
    """

  static let statusUsage = """
    usage: bucketfs status MOUNTPOINT [PATH]

    Shows each pin of the mount at MOUNTPOINT (those at or under PATH, and the one that holds
    PATH): files and bytes kept of
    all, whether it is kept or how far staging is, when it was last brought up to date, and each
    object that could not be staged, with the reason.
    """

  // MARK: pin

  static func pin(_ args: inout Arguments) throws(CommandError) -> Int32 {
    let background = args.flag("--background")
    if args.flag("--list") { return try status(&args) }
    let paths = try args.positionals()
    guard !paths.isEmpty else { throw .usage(pinUsage) }
    var status: Int32 = 0
    for path in paths {
      // As the terminal may show it (a name may hold ESC or a tab).
      let printed = TerminalText.visible(path)
      let answer = PinStatusLine.lines(try MountAttribute.read(path, BucketFilesystem.pinAddAttribute))
      guard let first = answer.first.flatMap(PinLine.init) else {
        throw .failed("\(printed): the mount gave no answer about the pin", status: ExitStatus.failure)
      }
      if first.state == "refused" || first.state == "unpinned" {
        FileHandle.standardError.write(Data("bucketfs pin: \(printed): \(TerminalText.visible(first.problem))\n".utf8))
        status = ExitStatus.failure
        continue
      }
      if background {
        print("pinning \(printed): \(first.allFiles) files, \(ProgressBar.bytes(first.allBytes)); staging in the background")
        continue
      }
      let result = try follow(path, shown: first.path)
      if result != 0 { status = result }
    }
    return status
  }

  /// Draws the pin of `path` until it is kept or stops: 0 when every file is staged.
  private static func follow(_ path: String, shown: String) throws(CommandError) -> Int32 {
    let printed = TerminalText.visible(path)
    let root = try mountRoot(of: path)
    let bar = ProgressBar(label: printed)
    var attribute = BucketFilesystem.pinsAttribute
    while true {
      let lines = PinStatusLine.lines(try MountAttribute.read(root, attribute))
      // From now on the mount answers when the pin moved (or after a second, for the rate).
      attribute = BucketFilesystem.pinsWaitPrefix + "1000"
      // By bytes: the NFC and NFD "café" are two pins, which `String`'s `==` takes for one.
      guard let pin = lines.compactMap(PinLine.init).first(where: { ObjectName.sameBytes($0.path, shown) }) else {
        bar.finish()
        throw .failed("\(printed): unpinned meanwhile", status: ExitStatus.failure)
      }
      bar.update(done: pin.bytes, total: pin.allBytes, detail: "\(pin.files)/\(pin.allFiles) files")
      switch pin.state {
      case "kept":
        bar.finish()
        let failures = lines.compactMap { PinFailure($0, of: shown) }
        if failures.isEmpty {
          print("pinned \(printed): \(pin.allFiles) files, \(ProgressBar.bytes(pin.allBytes))")
          return 0
        }
        var text = "bucketfs pin: \(printed): \(pin.failed) of \(pin.allFiles) files could not be staged:\n"
        for failure in failures { text += "  \(TerminalText.visible(failure.object)): \(TerminalText.visible(failure.reason))\n" }
        FileHandle.standardError.write(Data(text.utf8))
        return ExitStatus.failure
      case "offline":
        bar.finish()
        FileHandle.standardError.write(Data("bucketfs pin: \(printed): the mount is offline; pinned, and staged once it is online\n".utf8))
        return ExitStatus.unavailable
      case "refused":
        bar.finish()
        FileHandle.standardError.write(Data("bucketfs pin: \(printed): \(TerminalText.visible(pin.problem))\n".utf8))
        return ExitStatus.failure
      default:
        if !pin.problem.isEmpty && pin.state == "staging" && pin.files < pin.allFiles && pin.allFiles > 0 {
          // The server went away mid-way: the pin stays, and resumes when it can.
          bar.finish()
          FileHandle.standardError.write(Data("bucketfs pin: \(printed): \(TerminalText.visible(pin.problem)); the pin stays and resumes\n".utf8))
          return ExitStatus.unavailable
        }
      }
    }
  }

  // MARK: unpin

  static func unpin(_ args: inout Arguments) throws(CommandError) -> Int32 {
    let paths = try args.positionals()
    guard !paths.isEmpty else { throw .usage(unpinUsage) }
    var status: Int32 = 0
    for path in paths {
      // As the terminal may show it (a name may hold ESC or a tab).
      let printed = TerminalText.visible(path)
      let answer = try MountAttribute.read(path, BucketFilesystem.pinRemoveAttribute).trimmingCharacters(in: .whitespacesAndNewlines)
      if answer == "unpinned" {
        print("unpinned \(printed)")
      } else {
        FileHandle.standardError.write(Data("bucketfs unpin: \(printed): not pinned\n".utf8))
        status = ExitStatus.failure
      }
    }
    return status
  }

  // MARK: status

  static func status(_ args: inout Arguments) throws(CommandError) -> Int32 {
    let paths = try args.positionals()
    guard paths.count == 1 || paths.count == 2 else { throw .usage(statusUsage) }
    let root = paths[0]
    var under: String? = nil
    if paths.count == 2 {
      let full = URL(fileURLWithPath: paths[1]).standardizedFileURL.path
      let base = URL(fileURLWithPath: root).standardizedFileURL.path
      if paths[1].hasPrefix("/") && !ObjectName.sameBytes(full, base) && !full.hasBytePrefix(base + "/") {
        throw .failed("\(TerminalText.visible(paths[1])) is not in the mount at \(TerminalText.visible(root))", status: ExitStatus.usage)
      }
      let relative = ObjectName.sameBytes(full, base) ? "" : full.hasBytePrefix(base + "/") ? full.droppingBytes(base.utf8.count + 1) : paths[1]
      under = relative.isEmpty ? nil : relative
    }
    let lines = PinStatusLine.lines(try MountAttribute.read(root, BucketFilesystem.pinsAttribute))
    // The pins under PATH, and the one that holds it (a file of a pinned folder is pinned).
    let pins = lines.compactMap(PinLine.init).filter { pin in
      under.map { ObjectName.sameBytes(pin.path, $0) || pin.path.hasBytePrefix($0 + "/") || $0.hasBytePrefix(pin.path + "/") || pin.path == "." } ?? true
    }
    guard !pins.isEmpty else {
      print(under.map { "nothing pinned at or under \(TerminalText.name($0))" } ?? "nothing pinned")
      return 0
    }
    let header = ["PATH", "STATE", "FILES", "BYTES", "REFRESHED", "FAILED"]
    var rows = [header]
    for pin in pins {
      let state = pin.state == "staging" && pin.allBytes > 0 ? "staging \(Int(Double(pin.bytes) * 100 / Double(pin.allBytes)))%" : pin.state
      rows.append([
        TerminalText.name(pin.path), state, "\(pin.files)/\(pin.allFiles)", "\(ProgressBar.bytes(pin.bytes))/\(ProgressBar.bytes(pin.allBytes))",
        pin.refreshed, "\(pin.failed)",
      ])
    }
    let widths = header.indices.map { i in rows.map { $0[i].count }.max() ?? 0 }
    var text = ""
    for (n, row) in rows.enumerated() {
      text += row.enumerated().map { i, cell in i == row.count - 1 ? cell : TerminalText.padded(cell, to: widths[i]) }
        .joined(separator: "  ") + "\n"
      guard n > 0 else { continue }
      let pin = pins[n - 1]
      if !pin.problem.isEmpty { text += "  \(TerminalText.visible(pin.problem))\n" }
      for failure in lines.compactMap({ PinFailure($0, of: pin.path) }) {
        text += "  failed: \(TerminalText.visible(failure.object)): \(TerminalText.visible(failure.reason))\n"
      }
    }
    FileHandle.standardOutput.write(Data(text.utf8))
    return 0
  }

  /// The mount that holds `path`: the last folder up from it on the same device.
  private static func mountRoot(of path: String) throws(CommandError) -> String {
    var current = URL(fileURLWithPath: path).standardizedFileURL.path
    var st = stat()
    guard stat(current, &st) == 0 else { throw .local(path, String(cString: strerror(errno))) }
    let device = st.st_dev
    while current != "/" {
      let parent = (current as NSString).deletingLastPathComponent
      var up = stat()
      guard stat(parent, &up) == 0, up.st_dev == device else { break }
      current = parent
    }
    return current
  }
}

/// One pin as the mount's `user.bucketfs.pins` lists it.
struct PinLine {
  let path: String
  let state: String
  let files: Int
  let allFiles: Int
  let bytes: Int64
  let allBytes: Int64
  let refreshed: String
  let failed: Int
  let problem: String

  /// `p`: the line's fields, unescaped (`PinStatusLine.fields`).
  init?(_ p: [String]) {
    guard p.count >= 9, p[0] != "failed", let files = Int(p[2]), let allFiles = Int(p[3]), let bytes = Int64(p[4]),
      let allBytes = Int64(p[5]), let failed = Int(p[7])
    else { return nil }
    (path, state, self.files, self.allFiles, self.bytes, self.allBytes) = (p[0], p[1], files, allFiles, bytes, allBytes)
    (refreshed, self.failed, problem) = (p[6], failed, p[8])
  }
}

/// An object of a pin that could not be staged, as `user.bucketfs.pins` lists it.
struct PinFailure {
  let object: String
  let reason: String

  /// `p`: a line's fields; nil unless it is a failure of the pin shown as `path`.
  init?(_ p: [String], of path: String) {
    guard p.count >= 4, p[0] == "failed", ObjectName.sameBytes(p[1], path) else { return nil }
    (object, reason) = (p[2], p[3])
  }
}
