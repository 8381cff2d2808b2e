// Reads of one open file: ranged GETs through the block cache. Sequential access is detected per
// stream (a handle read by several sequential readers keeps a stream each) and grows a prefetch
// window of parallel ranged GETs; random access fetches only the pages a read touches.
import Foundation
import StorageCore
import Synchronization

package final class ObjectReader: Sendable {
  struct Stream {
    var next: Int64
    var window: Int64  // pages
    var lastUse: UInt64
  }

  let client: any ObjectClient
  let cache: BlockCache
  let name: String
  let generation: Int64
  let size: Int64
  private let streams = Mutex<(list: [Stream], tick: UInt64)>(([], 0))
  /// Fetches started by this reader, so that closing the file stops its read-ahead.
  private let tasks = Mutex<[Task<Void, Never>]>([])

  /// Stops the fetches this reader started (when its file is closed and no other handle reads it).
  package func cancelFetches() {
    let running = tasks.withLock { t -> [Task<Void, Never>] in
      defer { t.removeAll() }
      return t
    }
    running.forEach { $0.cancel() }
  }

  static let pageSize = BlockCache.pageSize
  /// Pages per ranged GET (4 MiB), less when the cache is small.
  let runPages: Int64
  let firstWindow: Int64
  let maxWindow: Int64

  package init(client: any ObjectClient, cache: BlockCache, name: String, generation: Int64, size: Int64) {
    self.client = client
    self.cache = cache
    self.name = name
    self.generation = generation
    self.size = size
    // A quarter of the cache per stream at most, and no more than 32 MiB ahead: prefetched pages
    // must not be evicted before they are read.
    let budgetPages = Int64(cache.budget) / Self.pageSize
    runPages = max(1, min(32, budgetPages / 8))
    maxWindow = max(runPages, min(256, budgetPages / 4))
    firstWindow = min(8, maxWindow)
  }

  /// The bytes when every page they need is cached (the read is then answered without a task
  /// hop); nil otherwise, and nothing is recorded, so `reply` can run as usual.
  package func replyIfCached(offset: Int64, count: Int) -> ReadReply? {
    let end = min(size, offset + Int64(count))
    guard offset < end else { return .bytes(Data()) }
    let firstPage = offset / Self.pageSize
    let lastPage = (end - 1) / Self.pageSize
    var pages: [Data] = []
    for page in firstPage...lastPage {
      guard let data = cache.cached(BlockCache.Key(name: name, generation: generation, page: page)) else { return nil }
      pages.append(data)
    }
    prefetch(after: lastPage, window: noteAccess(offset: offset, end: end))
    return Self.gather(pages, firstPage: firstPage, offset: offset, end: end)
  }

  /// Bytes `offset..<end` as the consecutive pages starting at `firstPage` that hold them: the
  /// reply gathers them from the cache's own pages, so a read costs no copy of its own. Nil
  /// when a page is shorter than the object says.
  static func gather(_ pages: [Data], firstPage: Int64, offset: Int64, end: Int64) -> ReadReply? {
    let lastPageEnd = (firstPage + Int64(pages.count) - 1) * pageSize + Int64(pages.last?.count ?? 0)
    guard pages.dropLast().allSatisfy({ $0.count == Int(pageSize) }), lastPageEnd >= end else { return nil }
    let skip = Int(offset - firstPage * pageSize)
    if pages.count == 1 {
      let page = pages[0]
      return .bytes(page[(page.startIndex + skip)..<(page.startIndex + skip + Int(end - offset))])
    }
    return .pages(pages, skip: skip, count: Int(end - offset))
  }

  private func prefetch(after lastPage: Int64, window: Int64) {
    guard window > 0 else { return }
    // The window's end moves in whole runs, so that prefetching issues full-size GETs rather
    // than one page per read.
    let lastObjectPage = (size - 1) / Self.pageSize
    let wanted = lastPage + 1 + window
    let aligned = (wanted + runPages - 1) / runPages * runPages
    let ahead = (lastPage + 1)..<min(lastObjectPage + 1, aligned)
    if !ahead.isEmpty { fetch(pages: ahead, prefetch: true) }
  }

  /// Fetches the whole object into the block cache as a prefetch (refused when the cache's
  /// prefetch budget is spent) and waits until it is there or has failed.
  func fetchAhead() async {
    guard size > 0 else { return }
    let lastPage = (size - 1) / Self.pageSize
    fetch(pages: 0..<(lastPage + 1), prefetch: true)
    for page in 0...lastPage {
      if let run = cache.inflight(BlockCache.Key(name: name, generation: generation, page: page)) { _ = await run.wait() }
    }
  }

  package func read(offset: Int64, count: Int) async throws(BucketError) -> Data {
    guard let data = try await reply(offset: offset, count: count).data() else {
      throw BucketError(code: .unknown, object: "gs://\(client.bucket)/\(name)", detail: "short read from the server")
    }
    return data
  }

  /// Bytes `offset..<offset+count` as a reply that gathers them from the cached pages; the
  /// deadline's timeout when it passes first.
  package func reply(offset: Int64, count: Int, by deadline: ReadDeadline? = nil) async throws(BucketError) -> ReadReply {
    let end = min(size, offset + Int64(count))
    guard offset < end else { return .bytes(Data()) }
    let firstPage = offset / Self.pageSize
    let lastPage = (end - 1) / Self.pageSize
    let window = noteAccess(offset: offset, end: end)
    fetch(pages: firstPage..<(lastPage + 1))
    prefetch(after: lastPage, window: window)
    var pages: [Data] = []
    for page in firstPage...lastPage { pages.append(try await self.page(page, by: deadline)) }
    guard let reply = Self.gather(pages, firstPage: firstPage, offset: offset, end: end) else {
      throw BucketError(code: .unknown, object: "gs://\(client.bucket)/\(name)", detail: "short read from the server")
    }
    return reply
  }

  /// Records a read and returns how many pages to prefetch after it (0 for random access).
  private func noteAccess(offset: Int64, end: Int64) -> Int64 {
    streams.withLock { s in
      s.tick += 1
      let slack = Self.pageSize
      if let i = s.list.firstIndex(where: { offset >= $0.next - slack && offset <= $0.next + slack }) {
        s.list[i].window = s.list[i].window == 0 ? firstWindow : min(maxWindow, s.list[i].window * 2)
        s.list[i].next = end
        s.list[i].lastUse = s.tick
        return s.list[i].window
      }
      // A read from the start of the file is the first of a sequential stream far more often than not.
      let stream = Stream(next: end, window: offset == 0 ? firstWindow : 0, lastUse: s.tick)
      if s.list.count >= 8, let oldest = s.list.indices.min(by: { s.list[$0].lastUse < s.list[$1].lastUse }) {
        s.list[oldest] = stream
      } else {
        s.list.append(stream)
      }
      return stream.window
    }
  }

  /// Starts ranged GETs for the pages that are neither cached nor on their way.
  @discardableResult
  private func fetch(pages: Range<Int64>, prefetch: Bool = false) -> BlockCache.Run? {
    var first: BlockCache.Run? = nil
    var from = pages.lowerBound
    while from < pages.upperBound {
      // Runs never cross a multiple of runPages, so prefetch claims whole aligned runs.
      let upto = min(pages.upperBound, (from / runPages + 1) * runPages)
      guard let (claimed, run) = cache.claim(name: name, generation: generation, pages: from..<upto, prefetch: prefetch) else {
        from = upto
        continue
      }
      let bytes = (claimed.lowerBound * Self.pageSize)..<min(size, claimed.upperBound * Self.pageSize)
      let (client, cache, name, generation) = (self.client, self.cache, self.name, self.generation)
      let task = Task {
        let result: BlockCache.Run.Outcome
        await cache.admit(bytes.count)
        do throws(BucketError) {
          // The bytes go straight into page buffers: no run buffer to copy them out of.
          let pages = PageAssembler(range: bytes, pageSize: Int(Self.pageSize))
          // Admitted within the cache's budget, so the pages can always take the bytes.
          try await RangedGet.run(client, name, range: bytes, generation: generation) { chunk, _ in
            pages.append(chunk)
            return .accept
          }
          result = .success(pages.pages)
        } catch {
          result = .failure(error)
        }
        cache.admitted(bytes.count)
        cache.finish(run, name: name, generation: generation, pages: claimed, result: result)
      }
      tasks.withLock { t in
        t.append(task)
        if t.count > 64 { t.removeFirst(t.count - 64) }
      }
      if first == nil { first = run }
      from = claimed.upperBound
    }
    return first
  }

  private func page(_ page: Int64, by deadline: ReadDeadline?) async throws(BucketError) -> Data {
    let key = BlockCache.Key(name: name, generation: generation, page: page)
    var cancelled: BucketError? = nil
    for _ in 0..<4 {
      if let data = cache.cached(key) { return data }
      // Evicted between the fetch and now, or never fetched: fetch it, and wait for that very
      // run (one that ends before it is looked up again is not in flight any more, and its
      // error, ESTALE say, was lost to a generic one).
      guard let run = cache.inflight(key) ?? fetch(pages: page..<(page + 1)) else { continue }
      let outcome = await run.wait(by: deadline)
      // A run cancelled because its reader closed the file: fetch the page for this one.
      if case .failure(let error) = outcome, error.code == .cancelled {
        cancelled = error
        continue
      }
      let pages = try outcome.get()
      let index = Int(page - run.firstPage)
      guard index < pages.count else { break }
      return pages[index]
    }
    throw cancelled ?? BucketError(code: .unknown, object: "gs://\(client.bucket)/\(name)", detail: "page \(page) could not be read")
  }
}

/// Splits a GET's bytes into page buffers as they arrive; touched only by the GET's transfer
/// callbacks, then by the task that awaited it.
final class PageAssembler: @unchecked Sendable {
  private(set) var pages: [Data] = []
  private let pageSize: Int
  private var remaining: Int

  init(range: Range<Int64>, pageSize: Int) {
    self.pageSize = pageSize
    remaining = Int(range.count)
  }

  func append(_ chunk: UnsafeRawBufferPointer) {
    var rest = chunk
    while !rest.isEmpty {
      if pages.isEmpty || pages[pages.count - 1].count == pageSize {
        pages.append(Data(capacity: min(pageSize, remaining)))
      }
      let last = pages.count - 1
      let n = min(rest.count, pageSize - pages[last].count)
      pages[last].append(contentsOf: UnsafeRawBufferPointer(rebasing: rest[..<n]))
      remaining -= n
      rest = UnsafeRawBufferPointer(rebasing: rest[n...])
    }
  }
}
