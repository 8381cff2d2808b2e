// Reads of one open file: ranged GETs through the block cache. Sequential access is detected per
// stream (a handle read by several sequential readers keeps a stream each) and grows a prefetch
// window of parallel ranged GETs; random access fetches only the pages a read touches.
import Foundation
import StorageCore
import Synchronization

public final class ObjectReader: Sendable {
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
  public func cancelFetches() {
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

  public init(client: any ObjectClient, cache: BlockCache, name: String, generation: Int64, size: Int64) {
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
  /// hop); nil otherwise, and nothing is recorded, so `read` can run as usual.
  public func readIfCached(offset: Int64, count: Int) -> Data? {
    let end = min(size, offset + Int64(count))
    guard offset < end else { return Data() }
    let firstPage = offset / Self.pageSize
    let lastPage = (end - 1) / Self.pageSize
    var pages: [Data] = []
    for page in firstPage...lastPage {
      guard let data = cache.cached(BlockCache.Key(name: name, generation: generation, page: page)) else { return nil }
      pages.append(data)
    }
    prefetch(after: lastPage, window: noteAccess(offset: offset, end: end))
    return Self.assemble(pages, firstPage: firstPage, offset: offset, end: end)
  }

  /// Bytes `offset..<end` out of consecutive pages starting at `firstPage`; a read within one page
  /// is a slice of it (no copy). Nil when a page is shorter than the object says.
  static func assemble(_ pages: [Data], firstPage: Int64, offset: Int64, end: Int64) -> Data? {
    var out = Data()
    for (i, data) in pages.enumerated() {
      let pageStart = (firstPage + Int64(i)) * pageSize
      let from = Int(max(offset, pageStart) - pageStart)
      let to = Int(min(end, pageStart + Int64(data.count)) - pageStart)
      guard from < to else { return nil }
      let slice = data[(data.startIndex + from)..<(data.startIndex + to)]
      if pages.count == 1 { return slice }
      if i == 0 { out.reserveCapacity(Int(end - offset)) }
      out.append(slice)
    }
    return out
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

  public func read(offset: Int64, count: Int) async throws(StorageError) -> Data {
    let end = min(size, offset + Int64(count))
    guard offset < end else { return Data() }
    let firstPage = offset / Self.pageSize
    let lastPage = (end - 1) / Self.pageSize
    let window = noteAccess(offset: offset, end: end)
    fetch(pages: firstPage..<(lastPage + 1))
    prefetch(after: lastPage, window: window)
    var pages: [Data] = []
    for page in firstPage...lastPage { pages.append(try await self.page(page)) }
    guard let data = Self.assemble(pages, firstPage: firstPage, offset: offset, end: end) else {
      throw StorageError(code: .unknown, object: "gs://\(client.bucket)/\(name)", detail: "short read from the server")
    }
    return data
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
  private func fetch(pages: Range<Int64>, prefetch: Bool = false) {
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
        let result: Result<Data, StorageError>
        do throws(StorageError) {
          let data = try await client.read(name, range: bytes, generation: generation)
          // Fewer bytes than the object has there would reach the kernel as an early end of file.
          guard data.count == bytes.count else {
            throw StorageError(
              code: .unknown, object: "gs://\(client.bucket)/\(name)",
              detail: "short read: \(data.count) of \(bytes.count) bytes at \(bytes.lowerBound)")
          }
          result = .success(data)
        } catch {
          result = .failure(error)
        }
        cache.finish(run, name: name, generation: generation, pages: claimed, result: result)
      }
      tasks.withLock { t in
        t.append(task)
        if t.count > 64 { t.removeFirst(t.count - 64) }
      }
      from = claimed.upperBound
    }
  }

  private func page(_ page: Int64) async throws(StorageError) -> Data {
    let key = BlockCache.Key(name: name, generation: generation, page: page)
    for _ in 0..<4 {
      if let data = cache.cached(key) { return data }
      if let run = cache.inflight(key) {
        let outcome = await run.wait()
        // A run cancelled because its reader closed the file: fetch the page for this one.
        if case .failure(let error) = outcome, error.code == .cancelled { continue }
        let data = try outcome.get()
        let start = Int((page - run.firstPage) * Self.pageSize)
        guard start < data.count else { break }
        return data[(data.startIndex + start)..<(data.startIndex + min(data.count, start + Int(Self.pageSize)))]
      }
      // Evicted between the fetch and now: fetch it again.
      fetch(pages: page..<(page + 1))
    }
    throw StorageError(code: .unknown, object: "gs://\(client.bucket)/\(name)", detail: "page \(page) could not be read")
  }
}
