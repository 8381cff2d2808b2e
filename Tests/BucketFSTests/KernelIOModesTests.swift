@testable import BucketFS
import Foundation
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

  func modes(_ registry: Registry, log: @escaping @Sendable (String) -> Void = { _ in }) -> KernelIOModes {
    let modes = KernelIOModes(log: log)
    modes.offer(registry.files)
    modes.started(true)
    return modes
  }

  @Test func aFirstOpenOfAStagedFilePassesThroughAndLaterOpensJoinIt() {
    let registry = Registry()
    let m = modes(registry)
    #expect(m.open(7, handle: 1, generation: 5, keepCache: true) { staged } == .passthrough(backingID: 1, directIO: false))
    // Joins the same backing file when the copy verifies again as that file; else its reads
    // come to the daemon (a copy changed since the first open is never read by a new one).
    #expect(m.open(7, handle: 2, generation: 5, keepCache: true) { staged } == .passthrough(backingID: 1, directIO: false))
    #expect(m.open(7, handle: 6, generation: 5, keepCache: true) { nil } == .passthrough(backingID: 1, directIO: true))
    m.release(6)
    // Another generation, or this mount's own bytes: still passthrough (the kernel insists),
    // but with direct I/O so that its reads come to the daemon.
    #expect(m.open(7, handle: 3, generation: 6, keepCache: false) { staged } == .passthrough(backingID: 1, directIO: true))
    #expect(m.open(7, handle: 4, generation: nil, keepCache: false) { nil } == .passthrough(backingID: 1, directIO: true))
    #expect(registry.live == [1])
    for handle: UInt64 in [1, 2, 3] { m.release(handle) }
    #expect(registry.live == [1], "the backing file went while an open of the inode was left")
    m.release(4)
    #expect(registry.live.isEmpty)
    // The inode is free again: a new first open registers a new backing file.
    #expect(m.open(7, handle: 5, generation: 6, keepCache: false) { staged } == .passthrough(backingID: 2, directIO: false))
  }

  /// A create the kernel writes registers the edit's file; every later open of the inode joins
  /// it with direct I/O (the daemon answers from that file); the backing goes with the last
  /// release. An inode open already is not written by the kernel.
  @Test func aCreateWrittenByTheKernelIsJoinedWithDirectIO() {
    let registry = Registry()
    let m = modes(registry)
    #expect(m.openEditing(9, handle: 1, file: staged) == .passthrough(backingID: 1, directIO: false))
    #expect(m.open(9, handle: 2, generation: nil, keepCache: false) { nil } == .passthrough(backingID: 1, directIO: true))
    #expect(m.open(9, handle: 3, generation: 4, keepCache: true) { staged } == .passthrough(backingID: 1, directIO: true))
    #expect(m.openEditing(9, handle: 4, file: staged) == nil)
    m.release(1)
    m.release(2)
    #expect(registry.live == [1])
    m.release(3)
    #expect(registry.live.isEmpty)
    // Open cached elsewhere: the create goes through the daemon, and registers nothing.
    #expect(m.open(10, handle: 5, generation: nil, keepCache: false) { nil } == .cached(keepCache: false))
    #expect(m.openEditing(10, handle: 6, file: staged) == nil)
    #expect(registry.live.isEmpty)
    // Passthrough refused: nil, and the create goes through the daemon.
    registry.refuse(EINVAL)
    #expect(m.openEditing(11, handle: 7, file: staged) == nil)
  }

  @Test func anInodeOpenCachedStaysCachedUntilItsLastRelease() {
    let registry = Registry()
    let m = modes(registry)
    #expect(m.open(9, handle: 1, generation: 5, keepCache: false) { nil } == .cached(keepCache: false))
    // The copy completed meanwhile: asking for it would break the kernel's rule.
    var asked = false
    #expect(m.open(9, handle: 2, generation: 5, keepCache: true) { asked = true; return staged } == .cached(keepCache: true))
    #expect(!asked)
    m.release(1)
    m.release(2)
    #expect(m.open(9, handle: 3, generation: 5, keepCache: true) { staged } == .passthrough(backingID: 1, directIO: false))
    // Other inodes are their own.
    #expect(m.open(10, handle: 4, generation: 5, keepCache: true) { nil } == .cached(keepCache: true))
  }

  @Test func anotherGenerationOfACachedInodeBypassesItsPages() {
    let m = modes(Registry())
    #expect(m.open(9, handle: 1, generation: 5, keepCache: false) { nil } == .cached(keepCache: false))
    // The object changed while handle 1 reads version 5: version 6 neither fills nor drops
    // the pages version 5's reader reads.
    #expect(m.open(9, handle: 2, generation: 6, keepCache: false) { nil } == .direct)
    // This mount's own bytes (an edit) join the cached mode as before.
    #expect(m.open(9, handle: 3, generation: nil, keepCache: false) { nil } == .cached(keepCache: false))
    for handle in UInt64(1)...3 { m.release(handle) }
    #expect(m.open(9, handle: 4, generation: 6, keepCache: false) { nil } == .cached(keepCache: false))
  }

  @Test func withoutPrivilegePassthroughEndsForTheMountSaidOnce() {
    let registry = Registry()
    registry.refuse(EPERM)
    let lines = Mutex<[String]>([])
    let m = modes(registry) { line in lines.withLock { $0.append(line) } }
    #expect(m.open(1, handle: 1, generation: 1, keepCache: false) { staged } == .cached(keepCache: false))
    var asked = false
    #expect(m.open(2, handle: 2, generation: 1, keepCache: false) { asked = true; return staged } == .cached(keepCache: false))
    #expect(!asked, "a mount the kernel refused asked for a backing file again")
    #expect(lines.withLock { $0.count } == 1)
  }

  @Test func aRefusedFileFallsBackForThatFileOnly() {
    let registry = Registry()
    registry.refuse(EOPNOTSUPP)
    let m = modes(registry)
    #expect(m.open(1, handle: 1, generation: 1, keepCache: false) { staged } == .cached(keepCache: false))
    registry.state.withLock { $0.refuse = nil }
    #expect(m.open(2, handle: 2, generation: 1, keepCache: false) { staged } == .passthrough(backingID: 1, directIO: false))
  }

  @Test func aKernelThatDoesNotOfferItKeepsEveryOpenCached() {
    let registry = Registry()
    let m = KernelIOModes(log: { _ in })
    m.offer(registry.files)
    m.started(false)
    #expect(m.open(1, handle: 1, generation: 1, keepCache: true) { staged } == .cached(keepCache: true))
    #expect(registry.live.isEmpty)
  }
}
