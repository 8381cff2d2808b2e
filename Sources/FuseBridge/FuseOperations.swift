// The libfuse low-level op table. Each callback copies what it needs out of the request (names,
// file handles: libfuse's pointers do not outlive the callback), hands the work to a Swift task,
// and answers from there through `PendingReply`, so no libfuse thread waits on the network.
internal import CFuse
import BucketFS
import Foundation

enum FuseOperations {
  /// The filesystem a request is for: libfuse's user data of the session (FuseSession keeps
  /// it alive while the session runs).
  static func filesystem(_ req: fuse_req_t?) -> BucketFilesystem {
    Unmanaged<BucketFilesystem>.fromOpaque(fuse_req_userdata(req)!).takeUnretainedValue()
  }

  static func fill(_ a: FileAttributes) -> stat {
    var st = stat()
    st.st_ino = UInt(a.statIno ?? a.ino)
    st.st_mode = (a.isDirectory ? S_IFDIR : a.isSymlink ? S_IFLNK : S_IFREG) | a.mode
    st.st_nlink = UInt(a.nlink)
    st.st_uid = a.uid
    st.st_gid = a.gid
    st.st_size = Int(a.size)
    // The size programs size their reads and writes by (cp, cat, Python's buffers): the
    // largest request the kernel passes in one (max_write, max_pages), so that a 128 KiB
    // buffer does not cut every MiB into eight requests.
    st.st_blksize = 1024 * 1024
    st.st_blocks = Int(a.size / 512 + (a.size % 512 == 0 ? 0 : 1))
    st.st_mtim = a.mtime.timespec
    st.st_atim = (a.atime ?? a.mtime).timespec
    st.st_ctim = a.ctime.timespec
    return st
  }

  /// The entry the kernel gets for `attrs`, as the filesystem shows them (`shown`: while the
  /// kernel reads the inode's opens by itself, the attributes of the version they read).
  static func entryParam(_ attrs: FileAttributes, _ fs: BucketFilesystem) -> fuse_entry_param {
    let a = fs.shown(attrs)
    let ttl = fs.cacheTime(a)
    var e = fuse_entry_param()
    e.ino = a.ino
    e.generation = 1
    e.attr = fill(a)
    e.attr_timeout = ttl
    e.entry_timeout = ttl
    return e
  }

  static func make() -> fuse_lowlevel_ops {
    var ops = fuse_lowlevel_ops()

    ops.`init` = { userdata, conn in
      if let conn { CFuseShims_tune_connection(conn) }
      let fs = Unmanaged<BucketFilesystem>.fromOpaque(userdata!).takeUnretainedValue()
      fs.directIOMapsStarted(CFuseShims_maps_direct_io() == 1)
      if fs.passthroughOffered, let folder = fs.stagingFolder {
        fs.passthroughStarted(CFuseShims_take_passthrough(CFuseShims_backing_stack_depth(folder)) == 1)
      }
    }

    ops.lookup = { req, parent, name in
      let fs = FuseOperations.filesystem(req)
      let reply = PendingReply(req, fs, "lookup")
      guard let name = FuseName.decode(name!) else { return reply.missing(parent: parent, name: nil) }
      switch fs.lookupIfCached(parent: parent, name: name) {
      case .success(let attrs):
        return reply.entry(attrs)
      case .failure(let error) where error.errno == ENOENT:
        return reply.missing(parent: parent, name: name)
      case .failure(let error):
        return reply.error(error.errno)
      case nil:
        break
      }
      let bound = fs.requestTimeout
      reply.answer(
        within: bound,
        otherwise: {
          if let attrs = fs.lastListedAfterTimeout(parent: parent, name: name) { return .entry(attrs) }
          return fs.absentAfterTimeout(parent: parent, name: name, seconds: bound) ? .missing(parent: parent, name: name) : nil
        })
      Task.immediate {
        do {
          reply.entry(try await fs.lookup(parent: parent, name: name))
        } catch let error as FSError where error.errno == ENOENT {
          reply.missing(parent: parent, name: name)
        } catch {
          reply.fail(error)
        }
      }
    }

    ops.forget = { req, ino, nlookup in
      let fs = FuseOperations.filesystem(req)
      let reply = PendingReply(req, fs, "forget")
      fs.forget(ino, count: nlookup)
      reply.none()
    }

    ops.forget_multi = { req, count, forgets in
      let fs = FuseOperations.filesystem(req)
      let reply = PendingReply(req, fs, "forget")
      for i in 0..<count {
        let f = forgets![i]
        fs.forget(f.ino, count: f.nlookup)
      }
      reply.none()
    }

    ops.getattr = { req, ino, fi in
      let fs = FuseOperations.filesystem(req)
      let reply = PendingReply(req, fs, "getattr")
      // Asked through an open file (FUSE_GETATTR_FH: the kernel before a read, lseek to the
      // end; not fstat, which the kernel asks as a stat).
      let handle = fi.map { CFuseShims_fi_fh($0) }
      if let attrs = fs.getattrIfCached(ino, handle: handle) { return reply.attr(attrs) }
      reply.answer(within: fs.requestTimeout, otherwise: { fs.lastKnownAttributes(ino).map { .attributes($0) } })
      reply.run({ try await fs.getattr(ino, handle: handle) }) { reply.attr($0) }
    }

    ops.readlink = { req, ino in
      let fs = FuseOperations.filesystem(req)
      let reply = PendingReply(req, fs, "readlink")
      reply.answer(within: fs.requestTimeout)
      reply.run({ try await fs.readlink(ino) }) { reply.link($0) }
    }

    ops.open = { req, ino, fi in
      let fs = FuseOperations.filesystem(req)
      let reply = PendingReply(req, fs, "open")
      var info = fi!.pointee
      let flags = CFuseShims_fi_flags(fi)
      let opener = fuse_req_ctx(req).pointee.pid
      reply.answer(within: fs.requestTimeout)
      Task {
        do {
          let (handle, io) = try await fs.open(ino, flags: flags, opener: opener)
          CFuseShims_set_fh(&info, handle)
          // Too late, or the opener is gone: no release will come for this handle.
          if !reply.open(&info, io) { fs.release(handle: handle) }
        } catch {
          reply.fail(error)
        }
      }
    }

    ops.read = { req, _, size, offset, fi in
      let fs = FuseOperations.filesystem(req)
      let reply = PendingReply(req, fs, "read")
      let handle = CFuseShims_fi_fh(fi)
      if let answer = fs.readIfCached(handle: handle, offset: Int64(offset), count: size) {
        return reply.read(answer)
      }
      // The read's own deadline answers at read_timeout too; this one needs no task thread, so
      // it holds when every task thread is busy, and its timeout counts like the read's own.
      reply.answer(within: fs.requestTimeout) { fs.readTimedOut(handle: handle) }
      reply.run({ try await fs.read(handle: handle, offset: Int64(offset), count: size) }) { reply.read($0) }
    }

    ops.release = { req, _, fi in
      let fs = FuseOperations.filesystem(req)
      let reply = PendingReply(req, fs, "release")
      fs.release(handle: CFuseShims_fi_fh(fi))
      reply.error(0)
    }

    // A close: the bytes written through this handle are queued, durably, before it returns
    // (a local disk's time, on this thread, as a staged read's read-back is).
    ops.flush = { req, _, fi in
      let fs = FuseOperations.filesystem(req)
      let reply = PendingReply(req, fs, "flush")
      do throws(FSError) {
        try fs.flush(handle: CFuseShims_fi_fh(fi))
        reply.error(0)
      } catch {
        reply.fail(error)
      }
    }

    ops.opendir = { req, ino, fi in
      let fs = FuseOperations.filesystem(req)
      let reply = PendingReply(req, fs, "opendir")
      var info = fi!.pointee
      let bound = fs.requestTimeout
      reply.answer(
        within: bound,
        otherwise: { [info] in
          guard let handle = fs.openDirectoryFromWhatIsKnown(ino, seconds: bound) else { return nil }
          var opened = info
          CFuseShims_set_fh(&opened, handle)
          return .opened(opened)
        })
      Task {
        do {
          let handle = try await fs.openDirectory(ino)
          CFuseShims_set_fh(&info, handle)
          if !reply.open(&info) { fs.releaseDirectory(handle) }
        } catch {
          reply.fail(error)
        }
      }
    }

    ops.readdir = { req, ino, size, offset, fi in
      FuseOperations.readdir(req, ino, size, offset, CFuseShims_fi_fh(fi), plus: false)
    }

    ops.readdirplus = { req, ino, size, offset, fi in
      FuseOperations.readdir(req, ino, size, offset, CFuseShims_fi_fh(fi), plus: true)
    }

    ops.releasedir = { req, _, fi in
      let fs = FuseOperations.filesystem(req)
      let reply = PendingReply(req, fs, "releasedir")
      fs.releaseDirectory(CFuseShims_fi_fh(fi))
      reply.error(0)
    }

    ops.statfs = { req, _ in
      let reply = PendingReply(req, FuseOperations.filesystem(req), "statfs")
      var st = statvfs()
      st.f_bsize = 4096
      st.f_frsize = 4096
      st.f_blocks = 1 << 30
      st.f_bfree = 1 << 30
      st.f_bavail = 1 << 30
      st.f_files = 1 << 20
      st.f_ffree = 1 << 20
      st.f_namemax = 255
      reply.statfs(&st)
    }

    ops.getxattr = { req, ino, name, size in
      let fs = FuseOperations.filesystem(req)
      let reply = PendingReply(req, fs, "getxattr")
      let name = String(cString: name!)
      // Only user.* names exist here. Any other namespace (security.*, system.posix_acl_*,
      // trusted.*) is not supported, as on a filesystem with no handler for it: EOPNOTSUPP, not
      // ENODATA. `ls -l` asks for an SELinux label and an ACL on every file, two requests each;
      // told "not supported" once, it stops asking for the rest of the mount.
      guard name.hasPrefix("user.") else { return reply.error(EOPNOTSUPP) }
      // The daemon's numbers, for `bucketfs stats MOUNTPOINT` (not listed: getfattr -d stays tidy).
      if ino == InodeTable.rootIno && name == BucketFilesystem.statsAttribute {
        return reply.xattr(Array(fs.statsText().utf8), size: size)
      }
      // `bucketfs refresh MOUNTPOINT [PATH]`: this file or folder is asked of the server again.
      if name == BucketFilesystem.refreshAttribute {
        guard let forgotten = fs.refresh(ino) else { return reply.error(ESTALE) }
        return reply.xattr(Array("\(forgotten.entries.count) names, \(forgotten.inodes.count) inodes\n".utf8), size: size)
      }
      // What the write-back queue holds, for `bucketfs sync MOUNTPOINT`.
      if ino == InodeTable.rootIno && name == BucketFilesystem.queueAttribute {
        return reply.xattr(Array(fs.queueText().utf8), size: size)
      }
      if ino == InodeTable.rootIno && name.hasPrefix(BucketFilesystem.queueWaitPrefix) {
        return reply.run({ await fs.queueTextOnceSynced(attribute: name) }) { text in
          guard let text else { return reply.error(ENODATA) }
          reply.xattr(Array(text.utf8), size: size)
        }
      }
      if BucketFilesystem.isPinAttribute(name) {
        return reply.run({ try await fs.pinXattr(ino, name: name) }) { reply.xattr(Array($0.utf8), size: size) }
      }
      if let attrs = fs.xattrsIfCached(ino) { return reply.xattr(name, of: attrs, size: size) }
      reply.answer(within: fs.requestTimeout)
      reply.run({ try await fs.xattrs(ino) }) { reply.xattr(name, of: $0, size: size) }
    }

    ops.listxattr = { req, ino, size in
      let fs = FuseOperations.filesystem(req)
      let reply = PendingReply(req, fs, "listxattr")
      if let attrs = fs.xattrsIfCached(ino) { return reply.xattrNames(attrs, size: size) }
      reply.answer(within: fs.requestTimeout)
      reply.run({ try await fs.xattrs(ino) }) { reply.xattrNames($0, size: size) }
    }

    ops.access = { req, _, mask in
      let fs = FuseOperations.filesystem(req)
      PendingReply(req, fs, "access").error(fs.access(mask))
    }

    FuseOperations.addWrites(&ops)
    return ops
  }

  static func readdir(_ req: fuse_req_t?, _ ino: fuse_ino_t, _ size: Int, _ offset: off_t, _ handle: UInt64, plus: Bool) {
    let fs = filesystem(req)
    let reply = PendingReply(req, fs, plus ? "readdirplus" : "readdir")
    answerReaddir(req, fs, reply, ino, size, Int(offset), handle, plus: plus)
  }

  /// Fills the reply from `offset` with what the folder's listing holds; when it holds nothing
  /// there yet (its pages still arrive), answers once more has arrived.
  private static func answerReaddir(
    _ req: fuse_req_t?, _ fs: BucketFilesystem, _ reply: PendingReply, _ ino: fuse_ino_t, _ size: Int, _ offset: Int,
    _ handle: UInt64, plus: Bool
  ) {
    // Offsets 0 and 1 are "." and ".."; entry i of the listing has offset i + 3 after it.
    var buffer = [CChar](repeating: 0, count: size)
    var used = 0
    var next = offset
    let dirAttrs = fs.folderAttributes(ino)
    func add(_ name: String, _ attrs: FileAttributes, _ off: Int, linked: Bool = true) -> Bool {
      var st = fill(attrs)
      let remaining = size - used
      let needed: Int = buffer.withUnsafeMutableBufferPointer { buf in
        if plus {
          // Node id 0: the kernel shows the name and looks it up when asked (no attributes yet).
          guard linked else {
            var e = fuse_entry_param()
            e.attr = st
            return fuse_add_direntry_plus(req, buf.baseAddress! + used, remaining, name, &e, off_t(off))
          }
          var e = entryParam(attrs, fs)
          return fuse_add_direntry_plus(req, buf.baseAddress! + used, remaining, name, &e, off_t(off))
        }
        return fuse_add_direntry(req, buf.baseAddress! + used, remaining, name, &st, off_t(off))
      }
      if needed > remaining { return false }
      used += needed
      return true
    }
    if next == 0 {
      guard add(".", dirAttrs, 1) else { return reply.directory(buffer, used) }
      next = 1
    }
    if next == 1 {
      guard add("..", dirAttrs, 2) else { return reply.directory(buffer, used) }
      next = 2
    }
    let read = fs.readDirectory(ino, handle: handle, offset: next - 2, plus: plus) { entry, attrs, linked in
      guard add(entry.name, attrs, next + 1, linked: linked) else { return false }
      if plus && linked { fs.referenced(attrs.ino) }
      next += 1
      return true
    }
    // Something to show now: the kernel asks for the rest (an empty reply would end the folder).
    guard used == 0 else { return reply.directory(buffer, used) }
    switch read {
    case .done: reply.directory(buffer, used)
    case .failed(let error): reply.fail(error)
    case .waitFor(let stream, let count):
      let sendableReq = SendableRequest(req)
      Task {
        await stream.more(than: count)
        answerReaddir(sendableReq.req, fs, reply, ino, size, offset, handle, plus: plus)
      }
    }
  }
}

/// A request pointer handed to the task that answers it (libfuse lets any thread reply).
private struct SendableRequest: @unchecked Sendable {
  let req: fuse_req_t?
  init(_ req: fuse_req_t?) { self.req = req }
}

extension timespec {
  /// A time in seconds since 1970, as the kernel takes it; a time that came from an object's
  /// metadata and is no time (not finite, or past what time_t holds) is 0, not a crash.
  init(seconds: Double) {
    guard seconds.isFinite, abs(seconds) < 1e15 else {
      self.init(tv_sec: 0, tv_nsec: 0)
      return
    }
    // To the microsecond: a Double of seconds since 1970 is exact to about a quarter of one, so a
    // time set to the nanosecond (0.1 s) would come back 6 ns short at the nanosecond. Never
    // rounded into the next second: tools that compare whole seconds (rsync, make) would see
    // x.9999996 s as another time than the one they set.
    let whole = seconds.rounded(.down)
    let micros = min(Int(((seconds - whole) * 1e6).rounded()), 999_999)
    self.init(tv_sec: Int(whole), tv_nsec: micros * 1000)
  }
}
