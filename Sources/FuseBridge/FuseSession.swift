internal import CFuse
import BucketFS
import Foundation
import Synchronization

/// A mounted libfuse session serving a `BucketFilesystem`: the only libfuse user.
package final class FuseSession: @unchecked Sendable {
  /// The libfuse this process runs with (e.g. "3.14.0").
  package static var libraryVersion: String { String(cString: fuse_pkgversion()) }

  package enum Failure: Error, CustomStringConvertible {
    case cannotCreate
    case cannotMount(String)
    package var description: String {
      switch self {
      case .cannotCreate: return "libfuse refused the options"
      case .cannotMount(let s): return s
      }
    }
  }

  /// The libfuse session while it lives, and whether it was unmounted.
  private struct Live: @unchecked Sendable {
    var session: OpaquePointer?
    var unmounted = false
    /// Detached by a stop: the kernel ends the connection once the last process lets go, and
    /// nothing is left to unmount (the mountpoint may hold another mount by then).
    var detached = false
  }
  /// Held across libfuse's unmount and destroy and a signal handler's stop (docs/design.md,
  /// "Locks"), never across a notification: one that drops a name waits in the kernel for its
  /// folder's lock, which a rename there holds until it is answered, and a request answered
  /// only after a notification of its own (an open, a rename dropping an inode's attributes)
  /// waited behind it for this lock for ever (adversary t23: `mv` beside readers and writers).
  private let live = Mutex(Live())
  /// Notifications on their way into the kernel: the session is destroyed once none is.
  private let telling = DispatchGroup()
  /// Names are dropped one at a time, on a thread of their own: each may wait for a folder.
  private let nameNotices = DispatchQueue(label: "bucketfs.fuse.name-notices")
  private var ops: fuse_lowlevel_ops
  package let mountpoint: String
  /// The filesystem the session serves: libfuse holds it as an unretained pointer.
  let filesystem: BucketFilesystem

  /// Creates the session and mounts it; `options` are libfuse `-o` options (fsname, ro, …).
  package init(filesystem: BucketFilesystem, mountpoint: String, options: [String], debug: Bool) throws(Failure) {
    self.filesystem = filesystem
    self.mountpoint = mountpoint
    ops = FuseOperations.make()
    var argv = ["bucketfs"]
    if !options.isEmpty { argv += ["-o", options.joined(separator: ",")] }
    if debug { argv.append("-d") }
    var cArgs = argv.map { strdup($0) }
    defer { cArgs.forEach { free($0) } }
    let made = cArgs.withUnsafeMutableBufferPointer { buf in
      CFuseShims_session_new(Int32(buf.count), buf.baseAddress, &ops, Unmanaged.passUnretained(filesystem).toOpaque())
    }
    guard let session = made else { throw .cannotCreate }
    if fuse_session_mount(session, mountpoint) != 0 {
      fuse_session_destroy(session)
      throw .cannotMount("cannot mount on \(mountpoint) (see the messages above)")
    }
    live.withLock { $0.session = session }
    ReadAhead.widen(mountpoint: mountpoint)
    filesystem.setKernelNotifier { [weak self] forgotten in self?.tellKernel(forgotten) }
    watchChannel(session)
  }

  /// Watches the session's requests and replies (CFuseShims_watch_channel) so that INIT can
  /// take what libfuse 3.14 does not know (FUSE_HANDLE_KILLPRIV_V2, passthrough) and OPEN can
  /// carry passthrough, when the filesystem wants it and this process may register backing
  /// files (CAP_SYS_ADMIN: root). INIT, answered by the loop, settles it.
  private func watchChannel(_ session: OpaquePointer) {
    let status = CFuseShims_watch_channel(session)
    guard status == 0 else {
      let why = String(cString: strerror(-status))
      return filesystem.log("fuse: libfuse would not let the session be watched (\(why)); staged files are read through the daemon")
    }
    guard filesystem.wantsPassthrough else { return }
    guard geteuid() == 0 else {
      return filesystem.log("passthrough: needs root (CAP_SYS_ADMIN); staged files are read through the daemon")
    }
    let fd = fuse_session_fd(session)
    filesystem.offerPassthrough(
      BackingFiles(
        register: { file in
          let id = CFuseShims_backing_open(fd, file)
          return id > 0 ? .success(id) : .failure(FSError(id < 0 ? -id : EIO))
        },
        unregister: { id in _ = CFuseShims_backing_close(fd, id) }))
  }

  /// Tells the kernel to drop the entries (later, from `nameNotices`), and the cached
  /// attributes of the inodes (now: that waits for nothing, and a request may need it done
  /// before its reply).
  private func tellKernel(_ forgotten: BucketFilesystem.Forgotten) {
    if !forgotten.entries.isEmpty {
      nameNotices.async { [self] in
        withSession { session in
          for entry in forgotten.entries {
            let bytes = Array(entry.name.utf8)
            _ = bytes.withUnsafeBufferPointer { p in
              p.withMemoryRebound(to: CChar.self) { fuse_lowlevel_notify_inval_entry(session, entry.parent, $0.baseAddress, bytes.count) }
            }
          }
        }
      }
    }
    guard !forgotten.inodes.isEmpty else { return }
    // Offset -1: attributes only. Dropping pages locks each one, and a page a write holds
    // stays locked until this daemon answers the write: a thread killed there never
    // leaves the kernel (`forgetKernelCache` says how the pages go instead).
    withSession { session in
      for ino in forgotten.inodes { _ = fuse_lowlevel_notify_inval_inode(session, ino, -1, 0) }
    }
  }

  /// `body` with the session, counted in `telling`; nothing once it is unmounted.
  private func withSession(_ body: (OpaquePointer) -> Void) {
    let session = live.withLock { live -> OpaquePointer? in
      guard let session = live.session, !live.unmounted else { return nil }
      telling.enter()
      return session
    }
    guard let session else { return }
    body(session)
    telling.leave()
  }

  /// Serves requests until unmounted (by `fusermount3 -u` or `stop()`), then cleans up.
  package func run() -> Int32 {
    guard let session = live.withLock({ $0.session }) else { return 1 }
    let result = CFuseShims_loop_mt(session, 16)
    let unmount = live.withLock { live -> Bool in
      defer { live.unmounted = true }
      return !live.unmounted && !live.detached
    }
    // No notice starts now; one on its way ends before libfuse closes the device it writes to
    // (one waiting for a folder's lock gets it: the connection is gone, and with it the
    // requests that held folders). A stop that is not root's closes the device itself, under
    // the lock, and a notice then finds it closed (EBADF).
    telling.wait()
    live.withLock { live in
      if unmount { fuse_session_unmount(session) }
      fuse_session_destroy(session)
      live.session = nil
    }
    return result
  }

  /// Ends the loop from another thread (a signal handler), as `fusermount3 -uz` does. As root
  /// the mount is detached with the device left open and the loop left running: no new process
  /// can enter it, but the processes inside go on (a dirty file written and closed, a `bucketfs
  /// sync` waiting for the queue) and are answered, and once the last of them lets go the kernel
  /// closes the connection, which ends the loop (`run` then cleans up). Ending the loop at once
  /// (`fuse_session_exit`) closed the device at the next request: a process still writing got
  /// ECONNABORTED and its bytes were lost. Not root, `fusermount3` unmounts as before.
  package func stop() {
    live.withLock { live in
      guard let session = live.session, !live.unmounted, !live.detached else { return }
      if geteuid() == 0, umount2(mountpoint, Int32(MNT_DETACH)) == 0 {
        live.detached = true
        return
      }
      fuse_session_exit(session)
      fuse_session_unmount(session)
      live.unmounted = true
    }
  }
}
