@testable import BucketFS
import Foundation
import StorageCore
import Synchronization
import Testing

/// The kernel's io-mode rules (fs/fuse/iomode.c) as `KernelIOModes` keeps them, without a
/// kernel: one mode per inode for all its opens, one backing file per inode, registered at its
/// first passthrough open and closed at its last release.
@Suite struct KernelIOModesTests {
  /// A registry that hands out ids 1, 2, … and remembers which are registered.
  final class Registry: Sendable {
    let state = Mutex<(next: Int32, live: Set<Int32>, refuse: Int32?)>((1, [], nil))
    var live: Set<Int32> { state.withLock { $0.live } }
    func refuse(_ errno: Int32) { state.withLock { $0.refuse = errno } }
    var files: BackingFiles {
      BackingFiles(
        register: { _ in
          self.state.withLock { s in
            if let errno = s.refuse { return .failure(FSError(errno)) }
            defer { s.next += 1 }
            s.live.insert(s.next)
            return .success(s.next)
          }
        },
        unregister: { id in _ = self.state.withLock { $0.live.remove(id) } })
    }
  }

  let staged = FileDescriptor(open("/dev/null", O_RDONLY))

  /// Version `generation` of an object, `size` bytes long.
  func v(_ generation: Int64, size: Int64 = 10) -> StorageMetadata {
    let m = StorageMetadata()
    m.generation = generation
    m.size = size
    return m
  }

  func modes(_ registry: Registry, log: @escaping @Sendable (String) -> Void = { _ in }) -> KernelIOModes {
    let modes = KernelIOModes(log: log)
    modes.offer(registry.files)
    modes.started(true)
    return modes
  }

  @Test func aFirstOpenOfAStagedFilePassesThroughAndLaterOpensJoinIt() {
    let registry = Registry()
    let m = modes(registry)
    #expect(m.open(7, handle: 1, version: v(5), keepCache: true) { staged } == .passthrough(backingID: 1, directIO: false))
    // Joins the same backing file when the copy verifies again as that file; else its reads
    // come to the daemon (a copy changed since the first open is never read by a new one).
    #expect(m.open(7, handle: 2, version: v(5), keepCache: true) { staged } == .passthrough(backingID: 1, directIO: false))
    #expect(m.open(7, handle: 6, version: v(5), keepCache: true) { nil } == .passthrough(backingID: 1, directIO: true))
    m.release(6)
    // Another generation, or this mount's own bytes: still passthrough (the kernel insists),
    // but with direct I/O so that its reads come to the daemon.
    #expect(m.open(7, handle: 3, version: v(6), keepCache: false) { staged } == .passthrough(backingID: 1, directIO: true))
    #expect(m.open(7, handle: 4, version: nil, keepCache: false) { nil } == .passthrough(backingID: 1, directIO: true))
    #expect(registry.live == [1])
    for handle: UInt64 in [1, 2, 3] { m.release(handle) }
    #expect(registry.live == [1], "the backing file went while an open of the inode was left")
    m.release(4)
    #expect(registry.live.isEmpty)
    // The inode is free again: a new first open registers a new backing file.
    #expect(m.open(7, handle: 5, version: v(6), keepCache: false) { staged } == .passthrough(backingID: 2, directIO: false))
  }

  /// A create the kernel writes registers the edit's file; every later open of the inode joins
  /// it with direct I/O (the daemon answers from that file); the backing goes with the last
  /// release. An inode open already is not written by the kernel.
  @Test func aCreateWrittenByTheKernelIsJoinedWithDirectIO() {
    let registry = Registry()
    let m = modes(registry)
    #expect(m.openEditing(9, handle: 1, file: staged) == .passthrough(backingID: 1, directIO: false))
    #expect(m.open(9, handle: 2, version: nil, keepCache: false) { nil } == .passthrough(backingID: 1, directIO: true))
    #expect(m.open(9, handle: 3, version: v(4), keepCache: true) { staged } == .passthrough(backingID: 1, directIO: true))
    #expect(m.openEditing(9, handle: 4, file: staged) == nil)
    m.release(1)
    m.release(2)
    #expect(registry.live == [1])
    m.release(3)
    #expect(registry.live.isEmpty)
    // Open cached elsewhere: the create goes through the daemon, and registers nothing.
    #expect(m.open(10, handle: 5, version: nil, keepCache: false) { nil } == .cached(keepCache: false))
    #expect(m.openEditing(10, handle: 6, file: staged) == nil)
    #expect(registry.live.isEmpty)
    // Passthrough refused: nil, and the create goes through the daemon.
    registry.refuse(EINVAL)
    #expect(m.openEditing(11, handle: 7, file: staged) == nil)
  }

  @Test func anInodeOpenCachedStaysCachedUntilItsLastRelease() {
    let registry = Registry()
    let m = modes(registry)
    #expect(m.open(9, handle: 1, version: v(5), keepCache: false) { nil } == .cached(keepCache: false))
    // The copy completed meanwhile: asking for it would break the kernel's rule.
    var asked = false
    #expect(m.open(9, handle: 2, version: v(5), keepCache: true) { asked = true; return staged } == .cached(keepCache: true))
    #expect(!asked)
    m.release(1)
    m.release(2)
    #expect(m.open(9, handle: 3, version: v(5), keepCache: true) { staged } == .passthrough(backingID: 1, directIO: false))
    // Other inodes are their own.
    #expect(m.open(10, handle: 4, version: v(5), keepCache: true) { nil } == .cached(keepCache: true))
  }

  /// An open edit's own bytes (every handle of a name shares its edit).
  final class EditStandIn {}
  let edits = [EditStandIn(), EditStandIn()]
  func edit(_ n: Int = 0) -> OwnBytes { OwnBytes(.edit(ObjectIdentifier(edits[n]))) }

  @Test func anotherGenerationOfACachedInodeBypassesItsPages() {
    let m = modes(Registry())
    #expect(m.open(9, handle: 1, version: v(5), keepCache: false) { nil } == .cached(keepCache: false))
    // The object changed while handle 1 reads version 5: version 6 neither fills nor drops
    // the pages version 5's reader reads.
    #expect(m.open(9, handle: 2, version: v(6), keepCache: false) { nil } == .direct)
    // This mount's own bytes (an edit) bypass them too, where they cannot go elsewhere.
    #expect(m.open(9, handle: 3, version: nil, own: edit(), writes: true, keepCache: false) { nil } == .direct)
    #expect(m.open(9, handle: 5, version: nil, own: edit(1), keepCache: false) { nil } == .direct)
    #expect(m.open(9, handle: 6, version: nil, keepCache: false) { nil } == .direct)
    for handle in UInt64(1)...6 { m.release(handle) }
    #expect(m.open(9, handle: 4, version: v(6), keepCache: false) { nil } == .cached(keepCache: false))
  }

  /// An edit's handles share its pages; another edit's bytes, or a version of the server's,
  /// beside it bypass them (its writers hold this inode: nothing is sent elsewhere); a writer
  /// that bypasses the pages keeps every later open off them until it is gone, since pages
  /// read meanwhile would miss its writes.
  @Test func anEditsHandlesShareItsPagesAndOthersBypassThem() {
    let m = modes(Registry())
    #expect(m.open(9, handle: 2, version: nil, own: edit(), writes: true, keepCache: false, mayGoElsewhere: true) { nil } == .cached(keepCache: false))
    #expect(m.pinned(9) == nil)
    // Joined, the edit's pages are kept: every write of its bytes goes through them.
    #expect(m.open(9, handle: 3, version: nil, own: edit(), keepCache: false, mayGoElsewhere: true) { nil } == .cached(keepCache: true))
    #expect(m.open(9, handle: 4, version: nil, own: edit(1), writes: true, keepCache: false, mayGoElsewhere: true) { nil } == .direct)
    #expect(m.open(9, handle: 5, version: v(6), keepCache: false, mayGoElsewhere: true) { nil } == .direct)
    for handle in UInt64(2)...3 { m.release(handle) }
    // Edit 1's writer bypasses the pages: the next open does too.
    #expect(m.open(9, handle: 6, version: nil, own: edit(1), keepCache: false) { nil } == .direct)
    m.release(4)
    #expect(m.open(9, handle: 7, version: nil, own: edit(1), keepCache: false) { nil } == .cached(keepCache: false))
    // Only readers of this mount's own bytes left: a version beside them may go elsewhere.
    #expect(m.holdsOtherBytes(9, than: 8))
    #expect(m.open(9, handle: 8, version: v(8), keepCache: false, mayGoElsewhere: true) { nil } == nil)
  }

  /// An `O_APPEND` writer that opens first bypasses the pages: the daemon puts its writes at
  /// the end of the edit's bytes, which may not be where the kernel thought the end was, and a
  /// write through the pages went into them there, over another line, for readers of the
  /// pages to read (issue 54 F5: a reader saw "SG-0" where "LG-0" was). Its writes size the
  /// inode without filling a page, so while it is open every open of the same bytes bypasses
  /// them too (a page filled short just before a write was read up to the size the write
  /// gave: zeros). One that joins readers of the pages goes through them, as every other
  /// write of the bytes does. Beside readers of a version it goes elsewhere, as any writer.
  @Test func anAppenderBypassesThePagesOrGoesThroughThemAll() {
    let m = modes(Registry())
    #expect(m.open(9, handle: 1, version: nil, own: edit(), writes: true, appends: true, keepCache: false, mayGoElsewhere: true) { nil } == .direct)
    #expect(m.open(9, handle: 2, version: nil, own: edit(), keepCache: false, mayGoElsewhere: true) { nil } == .direct)
    #expect(m.open(9, handle: 8, version: nil, own: edit(), writes: true, keepCache: false, mayGoElsewhere: true) { nil } == .direct)
    // A version's reader may not take them: the appender's writes size the inode.
    #expect(m.open(9, handle: 7, version: v(5), keepCache: false) { nil } == .direct)
    for handle: UInt64 in [7, 1, 2, 8] { m.release(handle) }
    #expect(m.open(9, handle: 3, version: nil, own: edit(), keepCache: false, mayGoElsewhere: true) { nil } == .cached(keepCache: false))
    // An appender joining readers of the pages writes through them, keeping them.
    #expect(m.open(9, handle: 4, version: nil, own: edit(), writes: true, appends: true, keepCache: false, mayGoElsewhere: true) { nil } == .cached(keepCache: true))
    #expect(m.open(9, handle: 9, version: nil, own: edit(), keepCache: false, mayGoElsewhere: true) { nil } == .cached(keepCache: true))
    for handle: UInt64 in [3, 4, 9] { m.release(handle) }
    #expect(m.open(9, handle: 5, version: v(5), keepCache: false, mayGoElsewhere: true) { nil } == .cached(keepCache: false))
    #expect(m.open(9, handle: 6, version: nil, own: edit(), writes: true, appends: true, keepCache: false, mayGoElsewhere: true) { nil } == nil)
  }

  /// Where the kernel lets a direct I/O open be mapped shared (Linux 6.6), a reader of this
  /// mount's own bytes always bypasses the pages: a writer of them may come at any moment
  /// (a reader in a loop beside `>>` in a loop read 2.5% of its reads ending in zeros: pages
  /// it had filled short were read up to the size the appender's writes gave). Writers still
  /// share the pages; a reader of own bytes beside a version's readers still goes elsewhere.
  @Test func withSharedDirectMapsReadersOfOwnBytesBypassThePages() {
    let m = modes(Registry())
    m.mapsDirectIO(true)
    #expect(m.open(9, handle: 1, version: nil, own: edit(), keepCache: false, mayGoElsewhere: true) { nil } == .direct)
    #expect(m.open(9, handle: 2, version: nil, own: edit(), writes: true, keepCache: false, mayGoElsewhere: true) { nil } == .cached(keepCache: false))
    #expect(m.open(9, handle: 3, version: nil, own: edit(), keepCache: false, mayGoElsewhere: true) { nil } == .direct)
    #expect(m.open(9, handle: 4, version: nil, own: edit(), writes: true, appends: true, keepCache: false, mayGoElsewhere: true) { nil } == .cached(keepCache: true))
    #expect(m.open(9, handle: 5, version: nil, own: OwnBytes(.queued("1:2")), keepCache: false, mayGoElsewhere: true) { nil } == .direct)
    for handle in UInt64(1)...5 { m.release(handle) }
    #expect(m.open(9, handle: 6, version: v(5), keepCache: false, mayGoElsewhere: true) { nil } == .cached(keepCache: false))
    #expect(m.open(9, handle: 7, version: nil, own: edit(), keepCache: false, mayGoElsewhere: true) { nil } == nil)
    // Readers of a version beside them keep their pages: no write of these bytes reaches them.
    m.release(6)
    #expect(m.open(9, handle: 8, version: nil, own: edit(), keepCache: false, mayGoElsewhere: true) { nil } == .direct)
    #expect(m.open(9, handle: 10, version: v(5), keepCache: false, mayGoElsewhere: true) { nil } == .cached(keepCache: false))
    #expect(m.pinned(9)?.generation == 5)
  }

  /// A writer beside readers of other bytes that bypass the pages (bytes this mount queued
  /// before) goes to an inode of its own where nothing else writes this one: its writes would
  /// size their inode, and their maps, made through the pages, read their bytes up to that
  /// size (zeros). Beside another writer, or where it cannot go, it joins.
  @Test func aWriterBesideDirectReadersOfOtherBytesGoesElsewhere() {
    let m = modes(Registry())
    m.mapsDirectIO(true)
    let queued = OwnBytes(.queued("1:2"))
    #expect(m.open(9, handle: 1, version: nil, own: queued, keepCache: false, mayGoElsewhere: true) { nil } == .direct)
    #expect(m.open(9, handle: 2, version: nil, own: edit(), writes: true, keepCache: false, mayGoElsewhere: true) { nil } == nil)
    #expect(m.open(9, handle: 3, version: nil, own: edit(), writes: true, appends: true, keepCache: false, mayGoElsewhere: true) { nil } == nil)
    // Readers of the same bytes do not send it on.
    #expect(m.open(9, handle: 4, version: nil, own: queued, writes: true, keepCache: false, mayGoElsewhere: true) { nil } == .cached(keepCache: false))
    m.release(4)
    #expect(m.open(9, handle: 2, version: nil, own: edit(), writes: true, keepCache: false) { nil } == .cached(keepCache: false))
    #expect(m.open(9, handle: 5, version: nil, own: edit(1), writes: true, keepCache: false, mayGoElsewhere: true) { nil } == .direct)
  }

  /// An open of other bytes than the inode's pages hold, where only readers of a version of
  /// the server's hold them, is answered nil with nothing counted (the caller sends it to an
  /// inode of its own, or opens it again without); opens of the same bytes never are, nor
  /// any beside this mount's own bytes (their writers hold the inode).
  @Test func otherBytesBesideAnInodesPagesMayGoElsewhere() {
    let m = modes(Registry())
    #expect(m.open(9, handle: 1, version: v(5), keepCache: false, mayGoElsewhere: true) { nil } == .cached(keepCache: false))
    #expect(m.open(9, handle: 2, version: v(5), keepCache: true, mayGoElsewhere: true) { nil } == .cached(keepCache: true))
    #expect(m.open(9, handle: 3, version: v(6), keepCache: false, mayGoElsewhere: true) { nil } == nil)
    #expect(m.open(9, handle: 3, version: nil, own: edit(), keepCache: false, mayGoElsewhere: true) { nil } == nil)
    // Nothing counted for them: the pages stay version 5's alone, until its opens close.
    #expect(m.pinned(9)?.generation == 5)
    #expect(m.open(9, handle: 3, version: v(6), keepCache: false) { nil } == .direct)
    for handle in UInt64(1)...3 { m.release(handle) }
    #expect(m.pinned(9) == nil)
    // A writer of this mount's own bytes in the pages: nothing goes elsewhere.
    #expect(m.open(9, handle: 6, version: nil, own: edit(), writes: true, keepCache: false, mayGoElsewhere: true) { nil } == .cached(keepCache: false))
    #expect(!m.holdsOtherBytes(9, than: 7))
    #expect(m.open(9, handle: 7, version: v(7), keepCache: false, mayGoElsewhere: true) { nil } == .direct)
  }

  /// The kernel reads an inode's opens through its page cache up to the size it holds, so the
  /// version they read is the one it is shown while any of them is open; a newer version open
  /// beside them (direct I/O) shows once they are closed, and its next open starts the page
  /// cache anew.
  @Test func theVersionReadThroughThePageCacheIsTheOneShown() {
    let m = modes(Registry())
    let (old, new) = (v(5, size: 100), v(6, size: 40))
    #expect(m.pinned(9) == nil)
    #expect(m.open(9, handle: 1, version: old, keepCache: false) { nil } == .cached(keepCache: false))
    #expect(m.pinned(9) === old)
    #expect(m.open(9, handle: 2, version: new, keepCache: false) { nil } == .direct)
    #expect(m.pinned(9) === old)
    m.release(1)
    #expect(m.pinned(9) == nil, "no open reads the old version's pages any more")
    #expect(m.open(9, handle: 3, version: new, keepCache: false) { nil } == .cached(keepCache: false))
    #expect(m.pinned(9) === new)
    m.release(2)
    m.release(3)
    #expect(m.pinned(9) == nil)
    // This mount's own bytes pin nothing (the kernel's writes size them).
    #expect(m.open(9, handle: 4, version: nil, keepCache: false) { nil } == .cached(keepCache: false))
    #expect(m.pinned(9) == nil)
  }

  @Test func aPassthroughOpenShowsTheVersionOfItsBackingFile() {
    let m = modes(Registry())
    let backed = v(5, size: 100)
    #expect(m.open(7, handle: 1, version: backed, keepCache: false) { staged } == .passthrough(backingID: 1, directIO: false))
    #expect(m.open(7, handle: 2, version: v(6), keepCache: false) { staged } == .passthrough(backingID: 1, directIO: true))
    #expect(m.pinned(7) === backed)
    m.release(1)
    m.release(2)
    #expect(m.pinned(7) == nil)
  }

  /// A handle that has read nothing swaps versions only where no page of the old one can reach
  /// its program: its reads bypass the page cache, or it is the inode's only open through it
  /// and kept no page; then the inode shows the new version.
  @Test func aHandleSwapsVersionsOnlyWhereNoOldPageReachesIt() {
    let m = modes(Registry())
    let newest = v(7, size: 3)
    #expect(m.open(9, handle: 1, version: v(5), keepCache: false) { nil } == .cached(keepCache: false))
    #expect(m.open(9, handle: 2, version: v(6), keepCache: false) { nil } == .direct)
    #expect(m.move(2, to: newest))
    #expect(m.move(1, to: newest))
    #expect(m.pinned(9) === newest)
    // Two opens share the pages, or the open kept pages of an earlier one: no.
    #expect(m.open(9, handle: 3, version: newest, keepCache: true) { nil } == .cached(keepCache: true))
    #expect(!m.move(1, to: v(8)))
    m.release(1)
    #expect(!m.move(3, to: v(8)), "the open kept pages of the old version")
    #expect(!m.move(42, to: v(8)), "no such handle")
    #expect(m.pinned(9) === newest)
  }

  @Test func withoutPrivilegePassthroughEndsForTheMountSaidOnce() {
    let registry = Registry()
    registry.refuse(EPERM)
    let lines = Mutex<[String]>([])
    let m = modes(registry) { line in lines.withLock { $0.append(line) } }
    #expect(m.open(1, handle: 1, version: v(1), keepCache: false) { staged } == .cached(keepCache: false))
    var asked = false
    #expect(m.open(2, handle: 2, version: v(1), keepCache: false) { asked = true; return staged } == .cached(keepCache: false))
    #expect(!asked, "a mount the kernel refused asked for a backing file again")
    #expect(lines.withLock { $0.count } == 1)
  }

  @Test func aRefusedFileFallsBackForThatFileOnly() {
    let registry = Registry()
    registry.refuse(EOPNOTSUPP)
    let m = modes(registry)
    #expect(m.open(1, handle: 1, version: v(1), keepCache: false) { staged } == .cached(keepCache: false))
    registry.state.withLock { $0.refuse = nil }
    #expect(m.open(2, handle: 2, version: v(1), keepCache: false) { staged } == .passthrough(backingID: 1, directIO: false))
  }

  @Test func aKernelThatDoesNotOfferItKeepsEveryOpenCached() {
    let registry = Registry()
    let m = KernelIOModes(log: { _ in })
    m.offer(registry.files)
    m.started(false)
    #expect(m.open(1, handle: 1, version: v(1), keepCache: true) { staged } == .cached(keepCache: true))
    #expect(registry.live.isEmpty)
  }
}
