internal import CFuse
import BucketFS
import Foundation
import Synchronization

/// A kernel request that must be answered exactly once: every reply of every operation goes
/// through here (its latency recorded), a second answer is dropped, and a request nobody
/// answered gets EIO when this object goes away.
final class PendingReply: @unchecked Sendable {
  let req: fuse_req_t?
  let filesystem: BucketFilesystem
  private let answered = Atomic<Bool>(false)
  /// The operation, for the latency metrics, and when its request arrived.
  let operation: String
  let started = ContinuousClock.now

  init(_ req: fuse_req_t?, _ filesystem: BucketFilesystem, _ operation: String) {
    self.req = req
    self.filesystem = filesystem
    self.operation = operation
  }

  deinit {
    if !answered.load(ordering: .acquiring) { fuse_reply_err(req, EIO) }
  }

  /// Timers of requests answered from a task: a queue of their own, so that a deadline passes
  /// on time even when every task thread is busy.
  private static let deadlines = DispatchQueue(label: "bucketfs.fuse.deadlines")

  /// What a request whose deadline passed answers instead of EIO, where the filesystem knows
  /// better: a lookup answered as the folder's last listing had the name, one a writable mount
  /// takes as absent, a folder opened with what is known of it, a file's attributes as the
  /// server last gave them.
  enum LateAnswer {
    case entry(FileAttributes)
    case attributes(FileAttributes)
    case missing(parent: UInt64, name: String)
    case opened(fuse_file_info)
  }

  /// Answers EIO after `seconds` if nothing else has by then (or `late`'s answer, when it has
  /// one): a reader waits no longer than its bound, whatever the fetches behind its request are
  /// doing. A later answer is dropped (`entry` and `open` say so, so that their caller can undo
  /// what the kernel will not hold).
  func answer(
    within seconds: Double, then timedOut: (@Sendable () -> Void)? = nil, otherwise late: (@Sendable () -> LateAnswer?)? = nil
  ) {
    Self.deadlines.asyncAfter(deadline: .now() + seconds) { [weak self] in
      guard let self, self.claim() else { return }
      switch late?() {
      case .entry(let attrs):
        var e = FuseOperations.entryParam(attrs, self.filesystem)
        fuse_reply_entry(self.req, &e)
      case .attributes(let attrs):
        let shown = self.filesystem.shown(attrs)
        var st = FuseOperations.fill(shown)
        fuse_reply_attr(self.req, &st, self.filesystem.cacheTime(shown))
      case .missing(let parent, let name):
        self.replyMissing(parent: parent, name: name)
      case .opened(var info):
        fuse_reply_open(self.req, &info)
      case nil:
        self.filesystem.timedOut(self.operation, seconds: seconds)
        timedOut?()
        fuse_reply_err(self.req, EIO)
      }
    }
  }

  /// True once for the first caller; every reply function checks it.
  private func claim() -> Bool {
    guard !answered.exchange(true, ordering: .acquiringAndReleasing) else { return false }
    let spent = (ContinuousClock.now - started).components
    filesystem.answered(operation, after: Double(spent.seconds) + Double(spent.attoseconds) / 1e18)
    return true
  }

  func error(_ errno: Int32) {
    if claim() { fuse_reply_err(req, errno) }
  }

  /// Answers a failed operation with its errno; the filesystem logs its cause, once.
  func fail(_ error: any Error) {
    guard let error = error as? FSError else { return self.error(EIO) }
    filesystem.failed(operation, error)
    self.error(error.errno)
  }

  /// A name's entry. The lookup it counts is the kernel's; when the request was answered
  /// already (its deadline passed), the kernel never got it, and it is given back.
  func entry(_ attrs: FileAttributes) {
    var e = FuseOperations.entryParam(attrs, filesystem)
    guard claim() else { return filesystem.forget(attrs.ino, count: 1) }
    fuse_reply_entry(req, &e)
  }

  /// A name that does not exist, remembered by the kernel for a while instead of asked again
  /// (and by the filesystem, so that a refresh can tell the kernel to forget it).
  func missing(parent: UInt64, name: String?) {
    if claim() { replyMissing(parent: parent, name: name) }
  }

  /// The negative entry, once claimed.
  private func replyMissing(parent: UInt64, name: String?) {
    var e = fuse_entry_param()
    e.entry_timeout = filesystem.missCacheTime
    if e.entry_timeout > 0, let name { filesystem.answeredMissing(parent: parent, name: name) }
    fuse_reply_entry(req, &e)
  }

  /// A new file's entry and open handle; when too late, the handle is released and the
  /// lookup given back.
  func create(_ attrs: FileAttributes, handle: UInt64, _ io: KernelIO, _ fi: inout fuse_file_info) {
    var e = FuseOperations.entryParam(attrs, filesystem)
    CFuseShims_set_fh(&fi, handle)
    guard claim(), CFuseShims_reply_create(req, &e, &fi, Self.prepare(&fi, io)) != -ENOENT else {
      filesystem.release(handle: handle)
      return filesystem.forget(attrs.ino, count: 1)
    }
  }

  /// Runs `work` in a task and answers with what it returns (through `answer`), or with its failure.
  /// The task starts on this thread and leaves it only where the work waits (the server, a lock
  /// held across a request): work answered from what the daemon holds (a chmod, utimens or
  /// chown of a file being written, a create) is answered here, without waking a thread of the
  /// pool for it — on a VM that hand-over cost more than the work (tar: 5 of 7 operations a file).
  func run<T>(_ work: @escaping @Sendable () async throws -> T, then answer: @escaping @Sendable (T) -> Void) {
    Task.immediate {
      do {
        answer(try await work())
      } catch {
        fail(error)
      }
    }
  }

  /// Answers success once `work` has run, or its failure (operations whose reply is only an errno).
  func succeed(after work: @escaping @Sendable () async throws -> Void) {
    run(work) { self.error(0) }
  }

  func written(_ count: Int) {
    if claim() { fuse_reply_write(req, count) }
  }

  /// Attributes as the filesystem shows them (`BucketFilesystem.shown`).
  func attr(_ attrs: FileAttributes) {
    let shown = filesystem.shown(attrs)
    var st = FuseOperations.fill(shown)
    if claim() { fuse_reply_attr(req, &st, filesystem.cacheTime(shown)) }
  }

  /// False when the request was answered already (its deadline passed).
  @discardableResult
  /// Answers an open (of a file: as `io` says); false when the kernel will not hold the handle
  /// (too late, or the opener gave up), so that the caller releases it.
  func open(_ fi: inout fuse_file_info, _ io: KernelIO? = nil) -> Bool {
    guard claim() else { return false }
    return CFuseShims_reply_open(req, &fi, io.map { Self.prepare(&fi, $0) } ?? 0) != -ENOENT
  }

  /// Sets what `io` asks of the reply's flags; the backing id to send (0: none).
  private static func prepare(_ fi: inout fuse_file_info, _ io: KernelIO) -> Int32 {
    switch io {
    case .cached(let keep):
      CFuseShims_set_keep_cache(&fi, keep ? 1 : 0)
      return 0
    case .direct:
      CFuseShims_set_keep_cache(&fi, 1)
      CFuseShims_set_direct_io(&fi, 1)
      return 0
    case .passthrough(let id, let directIO):
      CFuseShims_set_keep_cache(&fi, 0)
      CFuseShims_set_direct_io(&fi, directIO ? 1 : 0)
      return id
    }
  }

  func link(_ target: String) {
    if claim() { _ = target.withCString { fuse_reply_readlink(req, $0) } }
  }

  func buffer(_ data: UnsafeRawBufferPointer) {
    if claim() { fuse_reply_buf(req, data.baseAddress?.assumingMemoryBound(to: CChar.self), data.count) }
  }

  func data(_ data: Data) {
    data.withUnsafeBytes { buffer($0) }
  }

  /// Bytes of a read, gathered from where they are in memory.
  func read(_ reply: ReadReply) {
    switch reply {
    case .bytes(let bytes):
      data(bytes)
    case .buffer(let memory):
      buffer(memory.bytes)
    case .pages(let pages, let skip, let count):
      if claim() { Self.gathering(pages, skip: skip, count: count) { fuse_reply_iov(req, $0.baseAddress, Int32($0.count)) } }
    }
  }

  /// Calls `body` with iovecs over `count` bytes of `pages` from `skip` on, each page's bytes
  /// pinned while it runs.
  private static func gathering(
    _ pages: [Data], skip: Int, count: Int, _ body: (UnsafeBufferPointer<iovec>) -> Void
  ) {
    var vectors: [iovec] = []
    func visit(_ i: Int, skip: Int, remaining: Int) {
      guard i < pages.count, remaining > 0 else { return vectors.withUnsafeBufferPointer(body) }
      pages[i].withUnsafeBytes { raw in
        let from = min(skip, raw.count)
        let n = min(raw.count - from, remaining)
        if n > 0 { vectors.append(iovec(iov_base: UnsafeMutableRawPointer(mutating: raw.baseAddress! + from), iov_len: n)) }
        visit(i + 1, skip: skip - from, remaining: remaining - n)
      }
    }
    visit(0, skip: skip, remaining: count)
  }

  /// The value of attribute `name` among `attributes`; ENODATA when it has none.
  func xattr(_ name: String, of attributes: [(String, String)], size: Int) {
    guard let value = attributes.first(where: { $0.0 == name })?.1 else { return error(ENODATA) }
    xattr(Array(value.utf8), size: size)
  }

  /// The names of `attributes`, each ending in a NUL.
  func xattrNames(_ attributes: [(String, String)], size: Int) {
    xattr(attributes.flatMap { Array($0.0.utf8) + [0] }, size: size)
  }

  /// The xattr protocol: size 0 asks for the length; a buffer too small gets ERANGE.
  func xattr(_ bytes: [UInt8], size: Int) {
    if size == 0 {
      if claim() { fuse_reply_xattr(req, bytes.count) }
    } else if size < bytes.count {
      error(ERANGE)
    } else {
      bytes.withUnsafeBytes { buffer($0) }
    }
  }

  func statfs(_ st: inout statvfs) {
    if claim() { fuse_reply_statfs(req, &st) }
  }

  /// The first `used` bytes of a listing's buffer.
  func directory(_ entries: [CChar], _ used: Int) {
    entries.withUnsafeBytes { buffer(UnsafeRawBufferPointer(rebasing: $0[0..<used])) }
  }

  func none() {
    if claim() { fuse_reply_none(req) }
  }
}
