// The operations that change the bucket, for a writable mount (`-o writable`); a read-only mount
// answers each with EROFS (the filesystem says so). Changes wait on the local disk only: the
// queue carries them to the bucket later, so none of these waits on the network, except fsync
// (which waits for its file's upload) and what must read an object first (an open for writing
// of a file not staged, a rename).
internal import CFuse
import BucketFS
import Foundation

extension FuseOperations {
  static func addWrites(_ ops: inout fuse_lowlevel_ops) {
    ops.create = { req, parent, name, mode, fi in
      let fs = FuseOperations.filesystem(req)
      let reply = PendingReply(req, fs, "create")
      guard let name = FuseName.decode(name!) else { return reply.error(EILSEQ) }
      var info = fi!.pointee
      let flags = CFuseShims_fi_flags(fi)
      let caller = Self.caller(req)
      // Started here: a new name in a folder the mount knows is made without waiting (see `run`).
      Task.immediate {
        do {
          let (attrs, handle, io) = try await fs.create(parent: parent, name: name, flags: flags, mode: UInt32(mode) & 0o777, by: caller)
          reply.create(attrs, handle: handle, io, &info)
        } catch {
          reply.fail(error)
        }
      }
    }

    // The bytes are only valid during the callback: written to the local file here.
    ops.write = { req, _, buf, size, offset, fi in
      let fs = FuseOperations.filesystem(req)
      let reply = PendingReply(req, fs, "write")
      do {
        let n = try fs.write(handle: CFuseShims_fi_fh(fi), offset: Int64(offset), data: UnsafeRawBufferPointer(start: buf, count: size))
        reply.written(n)
      } catch {
        reply.fail(error)
      }
    }

    ops.fsync = { req, ino, _, fi in
      let fs = FuseOperations.filesystem(req)
      let reply = PendingReply(req, fs, "fsync")
      let handle = CFuseShims_fi_fh(fi)
      reply.succeed { try await fs.fsync(handle: handle, ino: ino) }
    }

    // Without it the kernel takes ENOSYS for success, and a program that fsynced a folder after
    // a rename, unlink or mkdir in it was told they lasted when nothing had made them.
    ops.fsyncdir = { req, _, _, _ in
      let fs = FuseOperations.filesystem(req)
      let reply = PendingReply(req, fs, "fsyncdir")
      reply.succeed { try fs.fsyncFolder() }
    }

    ops.setattr = { req, ino, attr, toSet, fi in
      let fs = FuseOperations.filesystem(req)
      let reply = PendingReply(req, fs, "setattr")
      let st = attr!.pointee
      let size: Int64? = toSet & FUSE_SET_ATTR_SIZE != 0 ? Int64(st.st_size) : nil
      let mtime = Self.time(toSet, now: FUSE_SET_ATTR_MTIME_NOW, given: FUSE_SET_ATTR_MTIME, st.st_mtim)
      let atime = Self.time(toSet, now: FUSE_SET_ATTR_ATIME_NOW, given: FUSE_SET_ATTR_ATIME, st.st_atim)
      let handle = fi.map { CFuseShims_fi_fh($0) }
      let owner = BucketFilesystem.OwnerChange(
        mode: toSet & FUSE_SET_ATTR_MODE != 0 ? UInt32(st.st_mode) & 0o7777 : nil,
        uid: toSet & FUSE_SET_ATTR_UID != 0 ? st.st_uid : nil, gid: toSet & FUSE_SET_ATTR_GID != 0 ? st.st_gid : nil,
        caller: fuse_req_ctx(req).pointee.uid)
      reply.run({ [mtime, atime] in try await fs.setattr(ino, size: size, mtime: mtime, atime: atime, owner: owner, handle: handle) }) {
        reply.attr($0)
      }
    }

    ops.unlink = { req, parent, name in
      let fs = FuseOperations.filesystem(req)
      let reply = PendingReply(req, fs, "unlink")
      guard let name = FuseName.decode(name!) else { return reply.error(ENOENT) }
      reply.succeed { try await fs.unlink(parent: parent, name: name) }
    }

    ops.mkdir = { req, parent, name, mode in
      let fs = FuseOperations.filesystem(req)
      let reply = PendingReply(req, fs, "mkdir")
      guard let name = FuseName.decode(name!) else { return reply.error(EILSEQ) }
      let caller = Self.caller(req)
      reply.run({ try await fs.mkdir(parent: parent, name: name, mode: UInt32(mode) & 0o7777, by: caller) }) { reply.entry($0) }
    }

    ops.rmdir = { req, parent, name in
      let fs = FuseOperations.filesystem(req)
      let reply = PendingReply(req, fs, "rmdir")
      guard let name = FuseName.decode(name!) else { return reply.error(ENOENT) }
      reply.succeed { try await fs.rmdir(parent: parent, name: name) }
    }

    ops.rename = { req, parent, name, newParent, newName, flags in
      let fs = FuseOperations.filesystem(req)
      let reply = PendingReply(req, fs, "rename")
      guard let name = FuseName.decode(name!) else { return reply.error(ENOENT) }
      guard let newName = FuseName.decode(newName!) else { return reply.error(EILSEQ) }
      reply.succeed { try await fs.rename(parent: parent, name: name, newParent: newParent, newName: newName, flags: flags) }
    }

    // No hard links, device nodes, FIFOs or sockets: a bucket has none of them.
    ops.mknod = { req, parent, name, mode, _ in
      let fs = FuseOperations.filesystem(req)
      let reply = PendingReply(req, fs, "mknod")
      guard let name = FuseName.decode(name!) else { return reply.error(EILSEQ) }
      if mode & S_IFMT == S_IFREG {
        let creator = Self.caller(req)
        return reply.run({ try await fs.makeFile(parent: parent, name: name, mode: UInt32(mode) & 0o777, by: creator) }) { reply.entry($0) }
      }
      Task { reply.error(await fs.refuseSpecial(parent: parent, name: name)) }
    }
    ops.symlink = { req, target, parent, name in
      let fs = FuseOperations.filesystem(req)
      let reply = PendingReply(req, fs, "symlink")
      guard let name = FuseName.decode(name!) else { return reply.error(EILSEQ) }
      guard let target = FuseName.decode(target!) else { return reply.error(EILSEQ) }
      reply.run({ try await fs.symlink(target: target, parent: parent, name: name) }) { reply.entry($0) }
    }
    ops.link = { req, _, newParent, newName in
      let fs = FuseOperations.filesystem(req)
      let reply = PendingReply(req, fs, "link")
      guard let name = FuseName.decode(newName!) else { return reply.error(EILSEQ) }
      Task { reply.error(await fs.refuseSpecial(parent: newParent, name: name)) }
    }
    // `user.content_type` and `user.meta.KEY` change the object's metadata.
    ops.setxattr = { req, ino, name, value, size, _ in
      let fs = FuseOperations.filesystem(req)
      let reply = PendingReply(req, fs, "setxattr")
      let name = String(cString: name!)
      let text = String(decoding: UnsafeRawBufferPointer(start: value, count: size), as: UTF8.self)
      reply.succeed { try await fs.setXattr(ino, name: name, value: text) }
    }
    ops.removexattr = { req, ino, name in
      let fs = FuseOperations.filesystem(req)
      let reply = PendingReply(req, fs, "removexattr")
      guard String(cString: name!) == BucketFilesystem.pinAttribute else { return reply.error(fs.unsupported(ENOTSUP)) }
      reply.succeed { try fs.removePinXattr(ino) }
    }
  }

  /// Who asks: a new file or folder is theirs.
  private static func caller(_ req: fuse_req_t?) -> (uid: UInt32, gid: UInt32) {
    let ctx = fuse_req_ctx(req).pointee
    return (ctx.uid, ctx.gid)
  }

  /// A time setattr sets (`now`: the current one), or nil when it leaves it.
  private static func time(_ toSet: Int32, now: Int32, given: Int32, _ ts: timespec) -> Timestamp? {
    if toSet & now != 0 { return Timestamp.now() }
    return toSet & given != 0 ? Timestamp(ts) : nil
  }
}
