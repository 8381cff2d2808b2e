// Which version of an object a read handle reads, and which one the kernel is shown. Every read
// must return exactly one version, whole, while someone else may replace the object at any time.
//
// The kernel reads a file through its page cache up to the size it holds for the inode, which
// every lookup, getattr and readdirplus answer sets, while a handle reads the version it opened:
// a newer version's size shown meanwhile cut a read short, or padded it with zeros up to that
// size (issue 54). And a program learns the size once (fstat) and may map that many bytes. So:
// - an open settles its version: the bytes its first read will ask for are here, or it fetches
//   them, as that read would, and it opens the newest version when that one is gone
//   (`settled`); a handle that swapped versions at its first read gave an mmap one version's
//   size and another's bytes;
// - while an inode has opens that the kernel reads through its page cache or by passthrough
//   (`KernelIOModes.pinned`), every answer about it describes the version they read (`shown`),
//   and such an open makes sure the kernel holds that version's size, or asks for it
//   (`kernelHoldsSize`);
// - a newer version is a file of its own: the kernel keeps one page cache per inode, and an
//   open of the newer version on the inode the older one is read through (direct I/O) still
//   filled those pages through a private map, so the older readers read newer bytes, and its
//   fstat gave the older size. So a lookup that names a newer version than the inode's opens
//   read gives the name a new inode (`separateOlderOpens`), as a rename over a file does on a
//   local disk: the older readers keep theirs. An open that reaches the older inode anyway
//   (the kernel's entry for the name has not expired) answers ESTALE, which makes the kernel
//   look the name up again and open that (`sendToNewInode`); only an open that cannot be
//   sent to the new inode reads with direct I/O beside the others. The same holds for this
//   mount's own bytes beside readers of a version (an edit, queued bytes), and for a version
//   beside readers of this mount's own bytes (merged onto another writer's since): one page
//   cache per inode holds one of them. Only readers are ever sent on: writers of an edit hold
//   its inode, and what differs from them bypasses their pages.
import StorageCore
import Glibc
import Synchronization

extension BucketFilesystem {
  /// Version `m` of `objectName` as a read handle reads it: through the block cache, its
  /// staged copy started.
  func openedVersion(_ objectName: String, _ m: StorageMetadata, renamedTo: String? = nil) -> OpenFile {
    let reader = ObjectReader(client: client.bucketWide, cache: cache, name: objectName, generation: m.generation, size: m.size)
    let copy = staging?.begin(objectName, metadata: m, client: client.bucketWide, offline: options.offline) {
      try? await reader.read(offset: 0, count: Int(m.size))
    }
    return OpenFile(objectName: objectName, metadata: m, reader: reader, copy: copy, renamedTo: renamedTo)
  }

  /// The newest version of `file`'s object, opened as `open` would have; nil when the server
  /// has none (deleted meanwhile: the read fails as before) or still names the same one.
  func newestVersion(of file: OpenFile) async -> OpenFile? {
    let path = file.objectName.droppingBytes(client.bucketName("").utf8.count)
    guard let m = try? await namespace.latestFileMetadata(path), m.generation != file.metadata.generation else { return nil }
    return openedVersion(file.objectName, m)
  }

  /// The bytes an open settles, from the start: what a first read asks for, the kernel's
  /// largest request here (max_pages and read_ahead_kb are 1 MiB).
  static let settledBytes: Int64 = 1 << 20

  /// `file`, just opened, with its version settled: the bytes its first read will ask for are
  /// here, or are fetched (the fetch that read would wait for), and when the server no longer
  /// has that version (the open took a cached answer, or someone replaced it since), the
  /// newest one is opened instead. Within half of read_timeout, so that a server that does not
  /// answer fails the read, not the open; unsettled, the first read may still swap versions
  /// (`moveToNewest`). Settled, a handle never swaps: the kernel may have served its program
  /// pages of the version, and the program may have learned its size (an mmap of as many
  /// bytes as fstat said).
  func settled(_ opened: OpenFile) async -> OpenFile {
    var file = opened
    // A few times at most: an object replaced faster than its first bytes arrive is read as
    // the last version named.
    for _ in 0..<3 {
      guard !options.offline, file.metadata.size > 0 else { return file }
      let first = 0..<min(file.metadata.size, Self.settledBytes)
      do {
        if !holds(file, first) {
          try await fetch(file, first, by: ReadDeadline(seconds: options.readTimeout / 2, object: file.objectName))
        }
        file.settled.store(true, ordering: .relaxed)
        return file
      } catch where error.code == .objectChanged {
        guard let newest = await newestVersion(of: file) else { return file }
        staging?.release(file.objectName, generation: file.metadata.generation)
        file = newest
      } catch {
        return file
      }
    }
    return file
  }

  /// `handle`, whose version the server no longer has and which has answered nothing, reads
  /// the newest version instead: false when there is none, or when the inode's other readers
  /// share pages the kernel may serve it (`KernelIOModes.move`).
  func moveToNewest(_ handle: UInt64, from file: OpenFile) async -> Bool {
    guard let newest = await newestVersion(of: file) else { return false }
    guard kernelIO.move(handle, to: newest.metadata) else {
      staging?.release(newest.objectName, generation: newest.metadata.generation)
      return false
    }
    fileHandles.replace(handle, with: .read(newest))
    staging?.release(file.objectName, generation: file.metadata.generation)
    // A longer version: the kernel must ask its size again, or it stops at the old one. Not
    // a shorter one: the short reply itself tells the kernel where the file ends, and a
    // notice in between would make it fill the rest of the page with zeros instead.
    if newest.metadata.size > file.metadata.size { forgetKernelCache(ofObject: file.objectName) }
    return true
  }

  /// What the kernel is given for `a` (every entry and attributes reply goes through here):
  /// while the inode has opens the kernel reads by itself (page cache, passthrough), the
  /// attributes of the version they read. Noted as shown either way (`InodeTable.showing`).
  package func shown(_ a: FileAttributes) -> FileAttributes {
    guard !a.isDirectory else { return a }
    // Noted before the pin is looked at; an open pins before it looks at what was noted
    // (`kernelHoldsSize`). Whichever of the two comes second sees the other, so no answer
    // of another size slips past an open that starts reading through the page cache.
    inodes.showing(a.ino, size: a.size)
    // A file this mount changed is shown as its changes are (the kernel's own writes size it).
    guard !a.volatile, let version = kernelIO.pinned(a.ino) else { return a }
    let pinned = attributes(ino: a.ino, directory: false, metadata: version)
    inodes.showing(a.ino, size: pinned.size)
    return pinned
  }

  /// The version a getattr of `ino` describes without asking the server: the pinned one;
  /// else, asked through an open handle (the kernel before a read, lseek to the end), the one
  /// that handle reads. Nil: as the namespace answers.
  func shownVersion(_ ino: UInt64, handle: UInt64?) -> StorageMetadata? {
    if let pinned = kernelIO.pinned(ino) { return pinned }
    guard let handle, case .read(let file)? = fileHandles[handle] else { return nil }
    return file.metadata
  }

  /// `ino` was just opened and the kernel reads `version` by itself: if the kernel may hold
  /// another size for it, it is told to forget its attributes (before the open's reply), so
  /// that its first read or stat asks for them and gets this version's.
  func kernelHoldsSize(of version: StorageMetadata, _ ino: UInt64) {
    let size = attributes(ino: ino, directory: false, metadata: version).size
    guard inodes.mayHoldOtherSize(ino, than: size) else { return }
    kernelNotifier.value?(Forgotten(inodes: [ino]))
  }

  /// A lookup or readdirplus is about to hand the kernel `node` as version `generation`: when
  /// its inode's opens read other bytes through the page cache or by passthrough (an older
  /// version, this mount's own bytes before they were merged onto another writer's), the name
  /// gets an inode of its own first (the older one keeps its opens and its pages).
  func separateOlderOpens(_ node: InodeTable.Node, naming generation: Int64?) {
    guard let generation, !node.isDirectory, let ino = inodes.existing(node), kernelIO.holdsOtherBytes(ino, than: generation) else { return }
    inodes.detach(ino)
    metrics.versionInodes.add(1, ordering: .relaxed)
  }

  /// The version `ino` reads when a newer version of its name has an inode of its own
  /// (`separateOlderOpens`) and its opens read through the page cache or by passthrough: an
  /// open that reaches it without a lookup (`/proc/self/fd/N`) reads that version too, else it
  /// filled those opens' pages, and their private maps, with the newer bytes.
  func heldByOlderInode(_ ino: UInt64) -> StorageMetadata? {
    guard !inodes.standsForItsPath(ino) else { return nil }
    return kernelIO.pinned(ino)
  }

  /// Which of this mount's own bytes open `handle` reads or writes (an open edit's, which
  /// every handle of the name shares, or queued bytes' file), and whether it may write.
  func ownBytes(_ handle: UInt64) -> (OwnBytes?, writes: Bool) {
    switch fileHandles[handle] {
    case .edit(let opened)?:
      return (OwnBytes(.edit(ObjectIdentifier(opened.edit))), opened.access != .reading)
    case .queued(let file)?:
      var st = stat()
      guard fstat(file.fd, &st) == 0 else { return (nil, false) }
      return (OwnBytes(.queued("\(st.st_dev):\(st.st_ino)")), false)
    default:
      return (nil, false)
    }
  }

  /// Sends an open of `ino` to an inode of its own (the inode's opens read other bytes than it
  /// would through the page cache or by passthrough, `KernelIOModes.open` said): the open
  /// answers ESTALE, so that the kernel looks the name up again and opens the inode the name
  /// has then. The inode is detached first when it still stands for the name; one the name
  /// moved on from while the open named its version (another process's lookup named a newer
  /// one) is left as it is, and the second try reaches the name's own. That second try
  /// (`isSecondTry`) is never sent on: false, and it reads with direct I/O beside the others.
  /// Only that one: an open sent to direct I/O shares the inode's attributes, which describe
  /// the version the others read (fstat gave one version's size and read returned another's,
  /// issue 54 G2, when every open of the process in the next seconds went so).
  func sendToNewInode(_ ino: UInt64, _ node: InodeTable.Node, opener: Int32, secondTry: Bool) -> Bool {
    guard !secondTry else { return false }
    let now = ContinuousClock.now
    reopened.withLock { sent in
      sent = sent.filter { now - $0.value < Self.reopenWindow }
      sent[Reopen(name: ObjectName(node.path), opener: opener)] = now
    }
    if inodes.standsForItsPath(ino) {
      inodes.detach(ino)
      metrics.versionInodes.add(1, ordering: .relaxed)
    }
    return true
  }

  /// Keeps the edit handle of a writer's open sent to a new inode until the kernel's second
  /// try (`releaseHeld`), `reopenWindow` at most. Closed at once, the edit left nothing for a
  /// reader looking the name up meanwhile but the object's version, which it read through the
  /// new inode's pages; the second try, never sent on, then wrote beside them with direct I/O,
  /// its appends sized their inode, and a reader read the version's end as zeros (issue 54
  /// F5, about 1 in 400 trials of three appenders and a reader). Held, the edit is what such a
  /// reader reads, with direct I/O, as every reader of this mount's own bytes does.
  func holdForSecondTry(_ opened: FileHandle, _ node: InodeTable.Node, opener: Int32) {
    guard case .edit = opened else { return }
    let key = Reopen(name: ObjectName(node.path), opener: opener)
    if let earlier = heldForSecondTry.withLock({ held in held.updateValue(opened, forKey: key) }) { releaseLocal(earlier) }
    Task { [weak self] in
      try? await Task.sleep(for: Self.reopenWindow)
      guard let self else { return }
      let expired = self.heldForSecondTry.withLock { held -> FileHandle? in
        guard let current = held[key], current.isSame(as: opened) else { return nil }
        return held.removeValue(forKey: key)
      }
      if let expired { self.releaseLocal(expired) }
    }
  }

  /// The second try of `opener`'s open of `node` came (and joined the edit, where it opens
  /// one): the first try's handle goes.
  func releaseHeld(_ node: InodeTable.Node, opener: Int32) {
    let key = Reopen(name: ObjectName(node.path), opener: opener)
    if let held = heldForSecondTry.withLock({ $0.removeValue(forKey: key) }) { releaseLocal(held) }
  }

  /// Whether this open of `node` by `opener` is the kernel's second try of one sent to a new
  /// inode (the process's next open of the name, within `reopenWindow`): asked once, at the
  /// open. Kept per process: another process sent on between one's two tries (a shell's `>>`
  /// beside a logger) made the logger's second try fail too.
  func isSecondTry(_ node: InodeTable.Node, opener: Int32) -> Bool {
    let now = ContinuousClock.now
    return reopened.withLock { sent in
      guard let at = sent.removeValue(forKey: Reopen(name: ObjectName(node.path), opener: opener)) else { return false }
      return now - at < Self.reopenWindow
    }
  }

  /// How long after an open was sent to a new inode the same name is not sent again (the
  /// kernel's second try comes at once; a busy machine may take a while to make it).
  static let reopenWindow: Duration = .seconds(5)
}

