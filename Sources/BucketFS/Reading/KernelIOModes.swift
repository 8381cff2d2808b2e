// How the kernel reads each inode's open files: through its page cache and this daemon's READ
// replies (cached), or by itself from a complete staged copy (passthrough, Linux 6.9+). The
// kernel will not mix the two on one inode (fs/fuse/iomode.c): an open without passthrough
// fails while the inode has a backing file, a passthrough open fails while the inode has cached
// opens, all passthrough opens of an inode must name the same backing file, and an open the
// kernel refuses is EIO for the program that made it. So an inode's mode is decided here, for
// all of its opens at once:
//
//   none ──first open, verified staged copy──▶ passthrough(backing, opens) ──last release──▶ none
//   none ──first open, no copy──────────────▶ cached(opens) ─────────────────last release──▶ none
//   none ──create, written by the kernel────▶ editing(backing, opens) ───────last release──▶ none
//
// and every later open joins the mode the inode is in. An open that must not read the backing
// file (another generation of the object, this mount's own edit of it) still opens by
// passthrough, with direct I/O: its reads and writes come to the daemon, only mmap would use the
// backing file. Our count of an inode's opens is never below the kernel's (an open counts here
// before its reply, a release after the kernel dropped it), so a mode chosen here is never one
// the kernel refuses.
//
// The page cache is read up to the size the kernel holds for the inode (i_size), which every
// lookup, getattr and readdirplus answer sets, whatever version the open reads; a program maps
// as many bytes as fstat said. So while an inode has opens through the page cache of an
// object's version, or by passthrough from its staged copy, that version is the one the kernel
// is shown (`pinned`): a newer one shows once they are closed. Opens of a newer version
// meanwhile read it with direct I/O, which the size does not cut.
import Foundation
import StorageCore
import Synchronization

/// The kernel's registry of backing files (FUSE_DEV_IOC_BACKING_OPEN/CLOSE), given by the bridge.
package struct BackingFiles: Sendable {
  /// Registers an open file: its backing id, or the errno the kernel refused it with.
  package let register: @Sendable (Int32) -> Result<Int32, FSError>
  package let unregister: @Sendable (Int32) -> Void

  package init(register: @escaping @Sendable (Int32) -> Result<Int32, FSError>, unregister: @escaping @Sendable (Int32) -> Void) {
    self.register = register
    self.unregister = unregister
  }
}

/// How one open is answered.
package enum KernelIO: Equatable, Sendable {
  /// Through the page cache; `keepCache`: pages cached by an earlier open still hold.
  case cached(keepCache: Bool)
  /// Every read and write to the daemon, the inode's page cache left as it is: another
  /// generation of an object whose inode has cached opens of the one they read (the cache is
  /// per inode, so an open of a newer version must neither fill nor drop those pages).
  case direct
  /// Read by the kernel from backing file `backingID`; `directIO`: reads and writes of this open
  /// still come to the daemon.
  case passthrough(backingID: Int32, directIO: Bool)
}

/// This mount's own bytes an open reads or writes.
package struct OwnBytes: Sendable, Equatable {
  /// Which: an open edit's (every handle of the name shares it), or queued bytes' file.
  package enum Source: Sendable, Equatable {
    case edit(ObjectIdentifier)
    case queued(String)
  }

  package var source: Source

  package init(_ source: Source) { self.source = source }
}

final class KernelIOModes: Sendable {
  private enum Mode {
    /// `pages`: what the opens through the page cache (`opens`) read; `direct`: opens of other
    /// bytes beside them, read with direct I/O, of which `directWriters` may write (their
    /// writes do not reach the pages).
    case cached(pages: PageBytes, opens: Int, direct: Int, directWriters: Int)
    /// `file`: the staged copy of `version` registered as the backing file (device and inode);
    /// the kernel is shown that version's attributes while it is open (an mmap maps the
    /// backing file as long as fstat says).
    case passthrough(backingID: Int32, version: StorageMetadata, file: FileKey, opens: Int)
    /// A new file whose creator writes its edit's file by passthrough (`openEditing`).
    case editing(backingID: Int32, opens: Int)
  }

  /// Which file a descriptor is open on.
  struct FileKey: Equatable {
    var device: UInt64
    var inode: UInt64

    init?(_ file: FileDescriptor) {
      var st = stat()
      guard fstat(file.fd, &st) == 0 else { return nil }
      device = UInt64(st.st_dev)
      inode = UInt64(st.st_ino)
    }
  }

  /// What an inode's page cache holds.
  private enum PageBytes: Equatable {
    /// A version of the server's: the attributes the kernel is shown while it is open.
    case version(StorageMetadata)
    /// This mount's own bytes (nil: of a file it made, joined by nothing else).
    case own(OwnBytes.Source?)

    static func == (a: PageBytes, b: PageBytes) -> Bool {
      switch (a, b) {
      case (.version(let x), .version(let y)): x.generation == y.generation
      case (.own(let x), .own(let y)): x == y
      default: false
      }
    }
  }

  /// An open handle: its inode, how it was answered, and whether it may write.
  private struct Opened {
    var ino: UInt64
    var io: KernelIO
    var writes = false
    var appends = false
    /// What it reads (nil: not noted).
    var bytes: PageBytes? = nil
  }

  private struct State {
    var modes: [UInt64: Mode] = [:]
    var opened: [UInt64: Opened] = [:]
    /// Whether readers of this mount's own bytes bypass the page cache (`join`): only where
    /// the kernel still lets such an open be mapped shared.
    var ownReadersDirect = false
  }

  /// Whether this mount opens by passthrough.
  enum Passthrough {
    /// Off (`-o passthrough=no`, no staging, not root, a kernel without it, or refused).
    case off
    /// The bridge can register backing files; INIT has not said whether the kernel takes it.
    case offered(BackingFiles)
    case on(BackingFiles)
  }

  private let state = Mutex(State())
  private let passthrough = Mutex(Passthrough.off)
  private let log: @Sendable (String) -> Void
  private let saidRefused = Atomic<Bool>(false)

  init(log: @escaping @Sendable (String) -> Void) { self.log = log }

  func offer(_ files: BackingFiles) { passthrough.withLock { $0 = .offered(files) } }

  var offered: Bool {
    passthrough.withLock { if case .offered = $0 { return true } else { return false } }
  }

  /// INIT settled it: the kernel took passthrough (`on`), or it did not offer it.
  func started(_ on: Bool) {
    passthrough.withLock { p in
      guard case .offered(let files) = p else { return }
      p = on ? .on(files) : .off
    }
  }

  /// INIT settled whether a program may map a direct I/O open shared (Linux 6.6).
  func mapsDirectIO(_ on: Bool) { state.withLock { $0.ownReadersDirect = on } }

  /// Whether a new file may be written by passthrough (`openEditing`).
  var writesByPassthrough: Bool { backing != nil }

  private var backing: BackingFiles? {
    passthrough.withLock { if case .on(let files) = $0 { return files } else { return nil } }
  }

  /// The mode of `handle`, a new open of `ino`. `version`: what the open reads (nil: this
  /// mount's own bytes, `own`, never a backing file; `writes`: the open may write them);
  /// `stagedCopy` gives the verified staged copy of that
  /// version, asked only when the open could start passthrough. Nil, with nothing counted, when
  /// `mayGoElsewhere` and the inode's opens read other bytes than this one would through the
  /// page cache or by passthrough: the caller sends it to an inode of its own, or opens it
  /// again without (it then bypasses their pages).
  /// `appends`: an `O_APPEND` writer of this mount's own bytes, whose writes the daemon puts at
  /// the end of those bytes wherever the kernel thought the end was (`EditHandle.Access`): it
  /// bypasses the pages (below).
  func open(
    _ ino: UInt64, handle: UInt64, version: StorageMetadata?, own: OwnBytes? = nil, writes: Bool = false, appends: Bool = false,
    keepCache: Bool, mayGoElsewhere: Bool = false, stagedCopy: () -> FileDescriptor?
  ) -> KernelIO? {
    let bytes = Bytes(version: version, own: own, writes: writes, appends: appends)
    let generation = version?.generation
    // Every open that would read the staged copy gets it verified, a join onto another open's
    // backing file as much as the first (a copy changed since that open is never read by a
    // new one): the verified copy must be the very file the backing was made of.
    // (An inode in cached mode stays so until its last release: its copy is not asked for.)
    let cached = state.withLock { s in if case .cached = s.modes[ino] { true } else { false } }
    let copy = generation != nil && backing != nil && !cached ? stagedCopy() : nil
    let copyKey = copy.flatMap(FileKey.init)
    switch state.withLock({ s in Self.join(ino, handle, bytes, keepCache, verified: copyKey, mayGoElsewhere, &s) }) {
    case .joined(let io): return io
    case .sentElsewhere: return nil
    case .first: break
    }
    var registered: Int32?
    if generation != nil, let files = backing, let copy, copyKey != nil {
      switch files.register(copy.fd) {
      case .success(let id): registered = id
      case .failure(let error): refused(error)
      }
    }
    let (io, unused) = state.withLock { s -> (KernelIO?, Int32?) in
      // Another open of the inode may have settled its mode meanwhile: join it.
      switch Self.join(ino, handle, bytes, keepCache, verified: copyKey, mayGoElsewhere, &s) {
      case .joined(let io): return (io, registered)
      case .sentElsewhere: return (nil, registered)
      case .first: break
      }
      if let registered, let version, let copyKey {
        s.modes[ino] = .passthrough(backingID: registered, version: version, file: copyKey, opens: 1)
        s.opened[handle] = Opened(ino: ino, io: .passthrough(backingID: registered, directIO: false))
        return (.passthrough(backingID: registered, directIO: false), nil)
      }
      s.modes[ino] = .cached(pages: bytes.pages, opens: 1, direct: 0, directWriters: 0)
      s.opened[handle] = Opened(ino: ino, io: .cached(keepCache: keepCache), writes: writes)
      return (.cached(keepCache: keepCache), nil)
    }
    if let unused { backing?.unregister(unused) }
    return io
  }

  /// The mode of `handle`, the create of `ino` whose edit file `file` the kernel writes itself
  /// (passthrough), so that writes cost no request: nil (and nothing changed) when passthrough
  /// is off, the inode is open already, or the kernel refuses the file. Every later open of the
  /// inode joins with direct I/O: its reads and writes come to the daemon, which reads and
  /// writes that same file.
  func openEditing(_ ino: UInt64, handle: UInt64, file: FileDescriptor) -> KernelIO? {
    guard let files = backing, state.withLock({ $0.modes[ino] == nil }) else { return nil }
    let registered: Int32
    switch files.register(file.fd) {
    case .success(let id): registered = id
    case .failure(let error):
      refused(error)
      return nil
    }
    let taken = state.withLock { s -> Bool in
      guard s.modes[ino] == nil else { return false }
      s.modes[ino] = .editing(backingID: registered, opens: 1)
      s.opened[handle] = Opened(ino: ino, io: .passthrough(backingID: registered, directIO: false))
      return true
    }
    guard taken else {
      files.unregister(registered)
      return nil
    }
    return .passthrough(backingID: registered, directIO: false)
  }

  /// `handle` was released; the inode's backing file goes with its last passthrough open.
  func release(_ handle: UInt64) {
    let unused = state.withLock { s -> Int32? in
      guard let opened = s.opened.removeValue(forKey: handle), let mode = s.modes[opened.ino] else { return nil }
      let ino = opened.ino
      switch mode {
      case .cached(let pages, var n, var direct, var writers):
        if opened.io == .direct {
          direct -= 1
          if opened.writes && !opened.appends { writers -= 1 }
        } else {
          n -= 1
        }
        s.modes[ino] = n + direct > 0 ? .cached(pages: pages, opens: n, direct: direct, directWriters: writers) : nil
        return nil
      case .passthrough(let id, let version, let file, let n):
        guard n <= 1 else {
          s.modes[ino] = .passthrough(backingID: id, version: version, file: file, opens: n - 1)
          return nil
        }
        s.modes[ino] = nil
        return id
      case .editing(let id, let n):
        guard n <= 1 else {
          s.modes[ino] = .editing(backingID: id, opens: n - 1)
          return nil
        }
        s.modes[ino] = nil
        return id
      }
    }
    if let unused { backing?.unregister(unused) }
  }

  /// An open handle of `ino`, if any (a stat of a file open after its name went asks through none).
  func anyHandle(of ino: UInt64) -> UInt64? {
    state.withLock { s in s.opened.first { $0.value.ino == ino }?.key }
  }

  /// Whether an open of `ino` may write.
  private static func written(_ ino: UInt64, _ s: State) -> Bool {
    s.opened.values.contains { $0.ino == ino && $0.writes }
  }

  /// Whether an `O_APPEND` writer of `ino` with direct I/O is open: its writes size the inode
  /// and fill no page, so a read of a page racing one is cut short by the daemon and then
  /// read up to the size the write gave, its end zeros (a reader beside `>>` read 2.5% of
  /// its reads so).
  private static func appended(_ ino: UInt64, _ s: State) -> Bool {
    s.opened.values.contains { $0.ino == ino && $0.appends && $0.io == .direct }
  }

  /// Whether `ino`'s opens read other bytes through its page cache or by passthrough than
  /// version `generation` of the server's, where only readers hold them: an older version, or
  /// this mount's own bytes since replaced by a version (an upload, an append merged onto
  /// another writer's). A lookup that names that version gives the name an inode of its own.
  func holdsOtherBytes(_ ino: UInt64, than generation: Int64) -> Bool {
    state.withLock { s in
      switch s.modes[ino] {
      case .cached(.version(let held), let n, _, _)? where n > 0: held.generation < generation
      case .cached(.own, let n, _, 0)? where n > 0: !Self.written(ino, s)
      case .passthrough(_, let held, _, _)?: held.generation < generation
      default: false
      }
    }
  }

  /// The version whose attributes the kernel must be shown for `ino`: the one its opens
  /// through the page cache read, or whose staged copy it reads by passthrough (nil: none is
  /// open, or they read this mount's own bytes).
  func pinned(_ ino: UInt64) -> StorageMetadata? {
    state.withLock { s in
      switch s.modes[ino] {
      case .cached(.version(let version), let n, _, _)? where n > 0: version
      case .passthrough(_, let version, _, _)?: version
      default: nil
      }
    }
  }

  /// Whether `handle`, which has answered no read, may read `newest` instead of the version
  /// it opened (someone else replaced it): yes when its reads bypass the page cache, or when
  /// it is the only open through the page cache and opened without keeping pages, so that no
  /// page of the old version can be read through it; the inode then shows `newest`. Else no:
  /// other readers share the pages, which must stay one version.
  func move(_ handle: UInt64, to newest: StorageMetadata) -> Bool {
    state.withLock { s in
      guard let opened = s.opened[handle] else { return false }
      switch (opened.io, s.modes[opened.ino]) {
      case (.direct, _), (.passthrough(_, directIO: true), _):
        return true
      case (.cached(keepCache: false), .cached(.version, 1, let direct, let writers)?):
        s.modes[opened.ino] = .cached(pages: .version(newest), opens: 1, direct: direct, directWriters: writers)
        return true
      default:
        return false
      }
    }
  }

  /// The bytes an open reads.
  private struct Bytes {
    /// A version of the server's; nil: this mount's own bytes, `own`.
    var version: StorageMetadata?
    var own: OwnBytes?
    var writes: Bool
    var appends = false

    /// What the page cache holds once this open fills it.
    var pages: PageBytes { version.map { .version($0) } ?? .own(own?.source) }

  }

  private enum Joined {
    /// The inode has no mode yet: this open sets it.
    case first
    case joined(KernelIO)
    /// Other bytes than the inode's opens read, which only server versions' readers share:
    /// for an inode of its own.
    case sentElsewhere
  }

  /// `verified`: the staged copy this open would read, checked just now (nil: none is).
  private static func join(
    _ ino: UInt64, _ handle: UInt64, _ bytes: Bytes, _ keepCache: Bool, verified: FileKey?, _ mayGoElsewhere: Bool,
    _ s: inout State
  ) -> Joined {
    let io: KernelIO
    if s.ownReadersDirect, bytes.version == nil, !bytes.writes, let mode = Self.readingOwnDirectly(s.modes[ino], bytes) {
      // A reader of this mount's own bytes: a writer of them may come at any moment, whose
      // writes the daemon takes while this open's page fills read the bytes as they were. A
      // fill that came back short of a write that then moved the size on was read up to that
      // size, its end zeros (a reader beside `>>` in a loop: 2.5% of its reads; the appender
      // bypasses the pages, or the kernel dropped them at another open). Read directly, its
      // reads return exactly what the daemon has.
      s.modes[ino] = mode
      s.opened[handle] = Opened(ino: ino, io: .direct, writes: false, appends: false, bytes: bytes.pages)
      return .joined(.direct)
    }
    // A writer beside readers of other bytes that bypass the pages (bytes this mount queued
    // before, an older version): its writes would size their inode, and a map of theirs, made
    // through the pages, be filled with their bytes up to that size: zeros. Where nothing else
    // writes the inode, it goes to one of its own, as beside readers of the pages.
    if bytes.writes, mayGoElsewhere, case .cached(_, _, _, 0)? = s.modes[ino], !Self.written(ino, s),
      s.opened.values.contains(where: { $0.ino == ino && $0.io == .direct && !$0.writes && $0.bytes != bytes.pages })
    {
      return .sentElsewhere
    }
    switch s.modes[ino] {
    case nil where bytes.appends:
      s.modes[ino] = .cached(pages: bytes.pages, opens: 0, direct: 1, directWriters: 0)
      io = .direct
    case nil:
      return .first
    case .cached(let pages, let n, let direct, let writers) where bytes.appends && n == 0:
      // An append written through the page cache went into the page at the end the kernel
      // held, which a writer elsewhere may have moved on from, while the daemon put it at the
      // bytes' own end: until the kernel next asked for the size, a reader of the page read
      // the line at the wrong place, over another (issue 54 F5). With direct I/O the kernel
      // drops the pages around the write instead. Its writes size the inode without a page,
      // so every open of the same bytes while it is open bypasses the pages too (below).
      s.modes[ino] = .cached(pages: writers == 0 ? bytes.pages : pages, opens: 0, direct: direct + 1, directWriters: writers)
      io = .direct
    case .cached(let pages, let n, let direct, let writers) where bytes.appends && bytes.pages == pages:
      // Readers of these bytes hold the pages: the append goes through them (as every other
      // write of this mount's own bytes does) so that the size they read up to is the one
      // its writes give. A write the kernel put short of the bytes' end lands at the end,
      // and the kernel is told to forget the pages (`write(handle:offset:data:)`).
      s.modes[ino] = .cached(pages: pages, opens: n + 1, direct: direct, directWriters: writers)
      io = .cached(keepCache: true)
    case .cached(let pages, let n, let direct, let writers):
      let same = bytes.pages == pages
      if n == 0 && writers == 0 && !Self.appended(ino, s) {
        // Only opens of other bytes are left, which bypass the pages and write nothing: the
        // page cache is this open's bytes' from now on (an open after a direct one keeps no
        // page).
        s.modes[ino] = .cached(pages: bytes.pages, opens: 1, direct: direct, directWriters: writers)
        io = .cached(keepCache: keepCache)
      } else if n > 0 && same {
        s.modes[ino] = .cached(pages: pages, opens: n + 1, direct: direct, directWriters: writers)
        // This mount's own bytes, which every write of them goes through: the pages are
        // theirs, kept. An open that drops them (no FOPEN_KEEP_CACHE) while another handle's
        // write is on its way here (in the page, not yet in the edit's file) had a reader
        // fill the page again without it, and read zeros once the write moved the size on.
        io = .cached(keepCache: keepCache || bytes.version == nil)
      } else {
        // Two versions of an object, or this mount's own bytes beside another's: one page
        // cache per inode cannot hold both. (An edit of a newer version wrote into pages an
        // older one's reader had filled, and readers read its bytes as zeros.) Beside readers
        // only, the open goes to an inode of its own; beside writers of this mount's own
        // bytes, which hold this inode, and while a writer that bypasses the pages is open
        // (pages read now would miss its writes), it bypasses them.
        if mayGoElsewhere, n > 0, writers == 0, !Self.written(ino, s) { return .sentElsewhere }
        s.modes[ino] = .cached(pages: pages, opens: n, direct: direct + 1, directWriters: writers + (bytes.writes && !bytes.appends ? 1 : 0))
        io = .direct
      }
    case .passthrough(let id, let backed, let file, let n):
      // Another generation, or this mount's own bytes (the kernel's writes do not reach the
      // backing file): an inode of its own. Else, or where it cannot go, a backing file that
      // is no longer the verified copy: the reads of this open come to the daemon.
      let other = bytes.version?.generation != backed.generation
      if other && mayGoElsewhere { return .sentElsewhere }
      s.modes[ino] = .passthrough(backingID: id, version: backed, file: file, opens: n + 1)
      io = .passthrough(backingID: id, directIO: other || verified != file)
    case .editing(let id, let n):
      s.modes[ino] = .editing(backingID: id, opens: n + 1)
      io = .passthrough(backingID: id, directIO: true)
    }
    s.opened[handle] = Opened(ino: ino, io: io, writes: bytes.writes, appends: bytes.appends, bytes: bytes.pages)
    return .joined(io)
  }

  /// The mode of an inode once a reader of this mount's own bytes joins it with direct I/O:
  /// nil where it goes elsewhere or reads a backing file (the rules of `join`), beside opens
  /// through the page cache of other bytes, whose size it must not be shown.
  private static func readingOwnDirectly(_ mode: Mode?, _ bytes: Bytes) -> Mode? {
    switch mode {
    case nil:
      return .cached(pages: bytes.pages, opens: 0, direct: 1, directWriters: 0)
    case .cached(let pages, let n, let direct, let writers)? where n == 0 || pages == bytes.pages:
      return .cached(pages: pages, opens: n, direct: direct + 1, directWriters: writers)
    default:
      return nil
    }
  }

  /// Without the privilege (not root) no backing file will ever be accepted: passthrough ends
  /// for the mount. Any other refusal (a staging folder the kernel cannot stack on) is for
  /// that file. Said once either way.
  private func refused(_ error: FSError) {
    if error.errno == EPERM {
      passthrough.withLock { $0 = .off }
      log("passthrough: the kernel refused a backing file (\(String(cString: strerror(error.errno)))); reads go through the daemon")
      return
    }
    guard !saidRefused.exchange(true, ordering: .relaxed) else { return }
    log("passthrough: the kernel refused a staged copy as a backing file (\(String(cString: strerror(error.errno)))); such files are read through the daemon")
  }
}
