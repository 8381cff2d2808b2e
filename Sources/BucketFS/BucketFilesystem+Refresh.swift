import Foundation
import StorageCore
import Synchronization

/// `bucketfs refresh MOUNTPOINT [PATH]` and SIGHUP: what the mount and the kernel cache about a
/// folder or file is dropped at once, so that changes made elsewhere show up without waiting for
/// `metadata_ttl` (rclone's `vfs/forget`).
extension BucketFilesystem {
  /// Reading it from a file or folder refreshes it (not listed, so `getfattr -d` does not):
  /// getxattr works on read-only mounts, where setxattr would be refused.
  package static let refreshAttribute = "user.bucketfs.refresh"

  /// A name in a folder the kernel may have cached, as `fuse_lowlevel_notify_inval_entry` takes it.
  /// A name in a folder the kernel holds an entry for. Equal and hashed by the name's bytes:
  /// the kernel's entries are, and NFC and NFD "café" are two of them.
  package struct KernelEntry: Hashable, Sendable {
    package let parent: UInt64
    package let name: String

    package static func == (a: KernelEntry, b: KernelEntry) -> Bool { a.parent == b.parent && ObjectName.sameBytes(a.name, b.name) }

    package func hash(into hasher: inout Hasher) {
      hasher.combine(parent)
      hasher.combine(ObjectName(name))
    }
  }

  /// What the kernel must forget after a refresh.
  package struct Forgotten: Sendable {
    package var entries: [KernelEntry] = []
    /// Inodes whose attributes the kernel drops (never their pages: see `forgetKernelCache`).
    package var inodes: [UInt64] = []
  }

  /// The kernel was told `name` in `parent` does not exist: it keeps that for the negative TTL,
  /// and a refresh must tell it otherwise.
  package func answeredMissing(parent: UInt64, name: String) {
    kernelMisses.set(KernelEntry(parent: parent, name: name), true)
  }

  /// Refreshes the file or folder `ino` and everything under it; nil when the inode is unknown.
  package func refresh(_ ino: UInt64) -> Forgotten? {
    guard let node = inodes.node(ino) else { return nil }
    return refresh(path: node.path)
  }

  package func refresh(path: String) -> Forgotten {
    namespace.forget(under: path)
    var forgotten = Forgotten()
    for (ino, node) in inodes.known() where Namespace.isInside(node.path, path) {
      forgotten.inodes.append(ino)
      guard !node.path.isEmpty else { continue }
      let (dir, name) = Namespace.split(node.path)
      if let parent = inodes.existing(InodeTable.Node(path: dir, isDirectory: true)) {
        forgotten.entries.append(KernelEntry(parent: parent, name: name))
      }
    }
    forgotten.entries += kernelMisses.removeAll { entry in
      inodes.node(entry.parent).map { Namespace.isInside(Namespace.join($0.path, entry.name), path) } ?? true
    }
    // Pinned trees there are brought up to date (the path may be a file or a folder).
    if let pins {
      let full = client.bucketName(path)
      // Someone says the bucket changed there: every object's version is asked again, also
      // where a listing gives names only (v0).
      pins.refresh(overlapping: path.isEmpty ? full : full + "/", verify: true)
      if !path.isEmpty { pins.refresh(overlapping: full, verify: true) }
    }
    log("refresh: \(path.isEmpty ? "/" : path) asked of the server again (\(forgotten.entries.count) names, \(forgotten.inodes.count) inodes)")
    // The inodes' pages are dropped as `forgetKernelCache` says: their next open keeps none.
    openedGenerations.withLock { g in for ino in forgotten.inodes { g.removeValue(forKey: ino) } }
    // After the reply that asked for it: the kernel may not be told to forget a name while a
    // request in its folder is being answered (it waits for the folder's lock: a deadlock).
    if let tell = kernelNotifier.value {
      let told = forgotten
      DispatchQueue.global().async { tell(told) }
    }
    return forgotten
  }

  /// The kernel forgets what it cached of inode `ino`: the mount's idea of the file changed for
  /// a reason the kernel did not cause (an append placed at the edit's end, a conflict, a newer
  /// version). It is told to drop the inode's attributes only (`Forgotten.inodes`); its pages
  /// go by the kernel's own hand, in the context of a program that opens or reads the file:
  /// the next open keeps no page (no FOPEN_KEEP_CACHE, whatever generation it reads), and
  /// every read (auto_inval_data) and stat asks for the attributes the kernel no longer has,
  /// whose new size or mtime makes it drop the inode's pages. The daemon never drops pages
  /// itself: that waits on each page's lock, which a write to the file holds until the daemon
  /// answers it, so a `kill -9` at that moment left the notifying thread in the kernel for
  /// good, the device open, and the write never answered (KillRoundsTests).
  func forgetKernelCache(of ino: UInt64) {
    openedGenerations.withLock { _ = $0.removeValue(forKey: ino) }
    guard let tell = kernelNotifier.value else { return }
    inodes.forgetShownSizes(ino)
    // At once, before the reply of the request that asked for it: dropping attributes waits
    // for no request, and an open for writing then returns with the size already forgotten.
    tell(Forgotten(inodes: [ino]))
  }

  /// The same for every inode that shows object `name` (under its own name or an alias).
  func forgetKernelCache(ofObject name: String) {
    for (ino, node) in inodes.known() where !node.isDirectory && (node.objectName ?? node.path) == name { forgetKernelCache(of: ino) }
  }

  /// Folder `dir`'s listing was evicted to stay within `metadata_cache_size` (which pays for
  /// the inodes the kernel holds too): the kernel is told to drop its entries for the folder's
  /// files, so that it forgets their inodes (a walk of millions of files would otherwise keep
  /// one each for as long as the kernel likes). A name whose file is open keeps its inode: the
  /// kernel forgets it at the close. Nothing the kernel shows changes: a name is looked up
  /// again when next asked for.
  func kernelForgets(evicted dir: String, _ names: [String]) {
    guard let tell = kernelNotifier.value, let parent = inodes.existing(InodeTable.Node(path: dir, isDirectory: true))
    else { return }
    var forgotten = Forgotten()
    // Files only: a folder's entry holds its whole subtree, where a walk may still be.
    for name in names where inodes.existing(InodeTable.Node(path: Namespace.join(dir, name), isDirectory: false)) != nil {
      forgotten.entries.append(KernelEntry(parent: parent, name: name))
    }
    guard !forgotten.entries.isEmpty else { return }
    let told = forgotten
    DispatchQueue.global().async { tell(told) }
  }

  /// The kernel forgets its entry for `path` (present or absent) and the attributes of the
  /// inode the path has, so that its next lookup asks this mount again.
  func kernelForgetsName(_ path: String) {
    guard let tell = kernelNotifier.value, !path.isEmpty else { return }
    let (dir, name) = Namespace.split(path.withoutTrailingSlash)
    guard let parent = inodes.existing(InodeTable.Node(path: dir, isDirectory: true)) else { return }
    var forgotten = Forgotten(entries: [KernelEntry(parent: parent, name: name)])
    for directory in [false, true] {
      if let ino = inodes.existing(InodeTable.Node(path: Namespace.join(dir, name), isDirectory: directory)) { forgotten.inodes.append(ino) }
    }
    kernelMisses.remove(KernelEntry(parent: parent, name: name))
    // Never from within a request in the folder (the kernel would wait for its lock).
    let told = forgotten
    DispatchQueue.global().async { tell(told) }
  }

  /// How the session tells the kernel to forget entries and inodes (set once it is mounted).
  package func setKernelNotifier(_ tell: @escaping @Sendable (Forgotten) -> Void) {
    kernelNotifier.set(tell)
  }
}
