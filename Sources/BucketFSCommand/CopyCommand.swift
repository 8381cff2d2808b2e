import BucketFS
import Foundation
import StorageCore
import Synchronization

/// `bucketfs cp SRC DST`: one side a bucket URL, the other a local path or `-`.
enum CopyCommand {
  /// Objects a recursive copy moves at once: at 20 ms a round trip, one at a time would spend
  /// nearly all its time waiting; 16 in flight on kept connections hide the distance.
  static let parallelTransfers = 16
  static let usage = """
    usage: bucketfs cp [-r] [--no-progress] [--if-generation-match G] SRC DST
    Copies between a bucket and the local disk. One side is a gs:// (or v0 https://) URL, the other
    a local path, or - for stdin/stdout. -r copies every object under a prefix into a folder, or a
    folder's files under a prefix. Uploads infer the content type from the file extension. A
    progress bar (bytes, rate, ETA) is drawn when stderr is a terminal. --if-generation-match G
    uploads only if the object's generation is G (0: only if it does not exist yet); otherwise the
    upload fails with exit status 7 and changes nothing. Over the GCS API the server keeps that
    promise; over the Firebase API, which does not promise to, the generation is also checked just
    before the upload, which leaves a window of one round trip plus the upload's own time in which
    a change made by someone else can still be overwritten.
    """

  static func isRemote(_ s: String) -> Bool {
    s.hasPrefix("gs://") || s.hasPrefix("http://") || s.hasPrefix("https://")
  }

  static func run(_ args: inout Arguments, _ client: ClientOptions) async throws(CommandError) -> Int32 {
    let recursive = args.flag("-r", "-R", "--recursive")
    let quiet = args.flag("--no-progress", "-q")
    let ifGeneration = try args.value("--if-generation-match").map { text throws(CommandError) -> Int64 in
      guard let g = Int64(text), g >= 0 else { throw .usage("--if-generation-match takes a generation number") }
      return g
    }
    let preconditions = Preconditions(ifGenerationMatch: ifGeneration)
    let paths = try args.positionals()
    guard paths.count == 2 else { throw .usage(usage) }
    let (src, dst) = (paths[0], paths[1])
    ActiveDownloads.removePartialFilesOnTermination()
    switch (isRemote(src), isRemote(dst)) {
    case (true, true):
      // Bucket to bucket: the server copies.
      return try await MoveCommand.carryOut(MoveCommand.plan(from: src, to: dst, client, recursive: recursive), deleteSources: false)
    case (true, false):
      if let matches = try await WildcardMatches.expand(src, client, objectsOnly: true) {
        return try await downloadMatches(matches.references(for: src), to: dst, quiet: quiet)
      }
      let ref = try await client.reference(src)
      if recursive { return try await downloadTree(ref, to: dst, quiet: quiet) }
      return try await download(ref, to: dst, quiet: quiet)
    case (false, true):
      let ref = try await client.reference(dst)
      if recursive { return try await uploadTree(src, to: ref, quiet: quiet) }
      return try await upload(src, to: ref, keepName: dst.endsWithSlash, quiet: quiet, preconditions: preconditions)
    case (false, false):
      throw .usage("cp copies between a bucket URL and a local path, or two bucket URLs; got \(src) and \(dst)")
    }
  }

  static func download(_ ref: StorageReference, to dst: String, quiet: Bool) async throws(CommandError) -> Int32 {
    if dst == "-" {
      let out = StdoutWriter()
      do {
        _ = try await ref.stream { out.write($0) }
      } catch {
        throw .storage(error)
      }
      return 0
    }
    var target = URL(fileURLWithPath: dst)
    var isDir: ObjCBool = false
    if FileManager.default.fileExists(atPath: dst, isDirectory: &isDir), isDir.boolValue {
      target = target.appendingPathComponent(ref.name)
    }
    let folder = target.deletingLastPathComponent().path
    guard FileManager.default.isWritableFile(atPath: folder) else {
      throw .local(folder, "not a writable folder")
    }
    let bar = ProgressBar(label: ref.name)
    let task = ActiveDownloads.write(ref, toFile: target)
    defer { ActiveDownloads.finished(task) }
    try await follow(task, bar: bar, quiet: quiet)
    return 0
  }

  static func upload(
    _ src: String, to ref: StorageReference, keepName: Bool, quiet: Bool, preconditions: Preconditions = Preconditions()
  ) async throws(CommandError) -> Int32 {
    var target = ref
    if src == "-" {
      // Stdin has no name to put in a folder: "gs://b/a/" would silently become object "a".
      guard !target.fullPath.isEmpty, !keepName else {
        throw .usage("uploading stdin needs an object name, not a folder (the destination ends with /)")
      }
      let data = FileHandle.standardInput.readDataToEndOfFile()
      do {
        _ = try await target.putDataAsync(data, preconditions: preconditions)
      } catch {
        throw .storage(error)
      }
      return 0
    }
    var isDir: ObjCBool = false
    guard FileManager.default.fileExists(atPath: src, isDirectory: &isDir) else {
      throw .local(src, "no such file")
    }
    if isDir.boolValue { throw .usage("\(src) is a folder: use cp -r") }
    guard FileManager.default.isReadableFile(atPath: src) else { throw .local(src, "permission denied") }
    // The file's own name, bytes exactly (`URL.lastPathComponent` drops a leading U+FEFF).
    let name = URL(fileURLWithPath: src).standardizedFileURL.path.lastSlashSegment
    if keepName || target.fullPath.isEmpty { target = target.child(name) }
    let bar = ProgressBar(label: name)
    let task = target.putFile(from: URL(fileURLWithPath: src), preconditions: preconditions)
    try await follow(task, bar: bar, quiet: quiet)
    return 0
  }

  /// The objects a wildcard matched, into folder `dst` by their last names.
  static func downloadMatches(_ refs: [StorageReference], to dst: String, quiet: Bool) async throws(CommandError) -> Int32 {
    var isDir: ObjCBool = false
    if refs.count > 1 || dst.endsWithSlash {
      guard FileManager.default.fileExists(atPath: dst, isDirectory: &isDir), isDir.boolValue else {
        throw .local(dst, "not a folder: \(refs.count) objects match")
      }
    }
    _ = try WildcardMatches.distinctLastNames(refs, into: dst)
    for ref in refs { _ = try await download(ref, to: dst, quiet: quiet) }
    return 0
  }

  static func downloadTree(_ ref: StorageReference, to dst: String, quiet: Bool) async throws(CommandError) -> Int32 {
    let names: [String]
    do {
      names = try await ListPage.all { token async throws(StorageError) in try await ref.listPage(delimiter: nil, pageToken: token) }.items
    } catch {
      throw .storage(error)
    }
    let base = ref.fullPath.isEmpty ? "" : ref.fullPath + "/"
    let root = ref.root()
    let folder = URL(fileURLWithPath: dst)
    var jobs: [(String, URL)] = []
    for name in names {
      // By bytes: "/" and a combining mark after it are one `Character`, so a count or a split
      // of characters cut "g/" U+0301 "acc" to "acc" (and two objects to one file).
      let relative = name.afterBytePrefix(base) ?? name
      // Only names that are safe relative paths become files; others are reported and skipped.
      let parts = relative.slashSegments()
      if relative.isEmpty || relative.endsWithSlash { continue }
      if parts.contains(where: { $0.isEmpty || $0 == "." || $0 == ".." || $0.utf8.count > 255 }) {
        FileHandle.standardError.write(Data("bucketfs cp: skipping \(TerminalText.visible(name)): not a valid local path\n".utf8))
        continue
      }
      jobs.append((name, folder.appendingPathComponent(relative)))
    }
    for (_, file) in jobs {
      do {
        try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
      } catch {
        throw .local(file.deletingLastPathComponent().path, "cannot create the folder")
      }
    }
    let bar = ProgressBar(label: "\(jobs.count) objects")
    let counter = Counter()
    let total = Int64(jobs.count)
    do {
      try await forEachConcurrently(jobs, limit: Self.parallelTransfers) { job throws(StorageError) in
        let task = ActiveDownloads.write(root.object(named: job.0), toFile: job.1)
        defer { ActiveDownloads.finished(task) }
        try await task.result()
        if !quiet { bar.update(done: counter.increment(), total: total) }
      }
    } catch {
      throw .storage(error)
    }
    if !quiet { bar.finish() }
    return 0
  }

  static func uploadTree(_ src: String, to ref: StorageReference, quiet: Bool) async throws(CommandError) -> Int32 {
    let folder = URL(fileURLWithPath: src)
    var isDir: ObjCBool = false
    guard FileManager.default.fileExists(atPath: src, isDirectory: &isDir), isDir.boolValue else {
      throw .local(src, "not a folder")
    }
    var files: [(URL, String)] = []
    let base = folder.standardizedFileURL.path
    // Walked folder by folder, joining names ourselves: FileManager's enumerator cuts its
    // relative paths by `Character`s, and for a name that starts with a combining mark (the
    // "/" before it and the mark are one) it gave the full path, which named no file.
    var folders = [""]
    while let relativeFolder = folders.popLast() {
      let full = relativeFolder.isEmpty ? base : base + "/" + relativeFolder
      for name in ((try? FileManager.default.contentsOfDirectory(atPath: full)) ?? []).sortedAsBytes() {
        let relative = relativeFolder.isEmpty ? name : relativeFolder + "/" + name
        let path = base + "/" + relative
        // As the enumerator did: into real folders, not through links to folders.
        var st = stat()
        guard lstat(path, &st) == 0 else { continue }
        if st.st_mode & S_IFMT == S_IFDIR {
          folders.append(relative)
          continue
        }
        var d: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &d), !d.boolValue {
          files.append((URL(fileURLWithPath: path), relative))
        }
      }
    }
    let bar = ProgressBar(label: "\(files.count) files")
    let counter = Counter()
    let total = Int64(files.count)
    do {
      try await forEachConcurrently(files, limit: Self.parallelTransfers) { file throws(StorageError) in
        _ = try await ref.child(file.1).putFileAsync(from: file.0)
        if !quiet { bar.update(done: counter.increment(), total: total) }
      }
    } catch {
      throw .storage(error)
    }
    if !quiet { bar.finish() }
    return 0
  }

  /// Waits for `task`, drawing its progress on `bar` unless `quiet`.
  private static func follow(_ task: StorageTask, bar: ProgressBar, quiet: Bool) async throws(CommandError) {
    if !quiet {
      task.observe(.progress) { snap in
        if let p = snap.progress { bar.update(done: p.completedUnitCount, total: p.totalUnitCount) }
      }
    }
    defer { if !quiet { bar.finish() } }
    do {
      try await task.result()
    } catch {
      throw .storage(error)
    }
  }
}

final class Counter: Sendable {
  private let value = Atomic<Int64>(0)
  func increment() -> Int64 { value.add(1, ordering: .relaxed).newValue }
}
