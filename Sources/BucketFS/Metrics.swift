// The daemon's numbers, for Prometheus (`-o metrics=HOST:PORT`) and for a person
// (`bucketfs stats MOUNTPOINT`): requests to the bucket by operation and outcome, bytes fetched,
// FUSE operations by type with latency histograms, and gauges read from the caches when asked.
import Foundation
import Synchronization

package final class Metrics: Sendable {
  /// Upper bounds of the latency histogram buckets, in seconds.
  static let buckets: [Double] = [0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30]

  struct Histogram {
    var counts = [UInt64](repeating: 0, count: Metrics.buckets.count)
    var sum = 0.0
    var count: UInt64 = 0
  }

  struct State {
    var requests: [String: UInt64] = [:]  // "operation|outcome"
    var fuse: [String: Histogram] = [:]
  }

  private let state = Mutex(State())
  let bytesFetched = Atomic<Int>(0)
  let cacheHits = Atomic<Int>(0)
  let cacheMisses = Atomic<Int>(0)
  /// FUSE requests answered with EIO because nothing else answered within their bound.
  let fuseTimeouts = Atomic<Int>(0)
  /// Files fetched ahead of their open because a process read their folder in order.
  let readAheadFiles = Atomic<Int>(0)
  /// Opens the kernel reads by itself from the staged copy (FUSE passthrough).
  package let passthroughOpens = Atomic<Int>(0)
  /// Newer versions given an inode of their own beside opens of an older one.
  let versionInodes = Atomic<Int>(0)
  /// New files the kernel wrote by itself into their queued file (FUSE passthrough).
  package let passthroughWrites = Atomic<Int>(0)
  /// Times the transfer loop was seen held up for more than a second.
  package let transferLoopStalls = Atomic<Int>(0)

  package init() {}

  /// A request to the bucket ended: `outcome` is "ok" or the error code's name.
  package func request(_ operation: String, outcome: String) {
    state.withLock { $0.requests["\(operation)|\(outcome)", default: 0] += 1 }
  }

  package func fetched(_ bytes: Int) { bytesFetched.add(bytes, ordering: .relaxed) }

  /// A FUSE operation was answered after `seconds`.
  package func fuse(_ operation: String, seconds: Double) {
    state.withLock { s in
      var h = s.fuse[operation] ?? Histogram()
      for (i, bound) in Self.buckets.enumerated() where seconds <= bound { h.counts[i] += 1 }
      h.sum += seconds
      h.count += 1
      s.fuse[operation] = h
    }
  }

  /// Gauges and counters kept elsewhere, read when the page is made.
  package struct Readings: Sendable {
    var cacheBytes: Int
    var cacheEvictions: Int
    var stagingBytes: Int64
    var stagingFiles: Int
    var stagingEvicted = 0
    var stagingDropped = 0
    var openHandles: Int
    var retries: Int
    var tokenRefreshes: Int
    /// Seconds since the transfer loop last began a turn.
    var transferLoopAge: Double
    var stagingBuffersFree: Int
    /// Pins, and the complete copies they keep.
    var pins = 0
    var pinnedFiles = 0
    var pinnedBytes: Int64 = 0
    var pinPasses = PinKeeper.PassTotals()
    /// The write-back queue (nil on a read-only mount).
    var queue: QueueTotals? = nil
    /// What the mount keeps about names: entries, bytes (about), the budget, listings evicted.
    var metadataEntries = 0
    var metadataBytes = 0
    var metadataBudget = 0
    var metadataEvictions = 0
    var foldersListedAhead = 0
    /// Folder listings the server could not give, answered from the folder's last listing.
    var listingsFromLast = 0
    /// Inodes the kernel holds (or a reply is handing out).
    var inodes = 0
  }

  private static func label(_ text: String) -> String {
    text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
  }

  private static func number(_ value: Double) -> String {
    value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
  }

  /// The Prometheus text exposition format (version 0.0.4).
  package func prometheus(_ r: Readings) -> String {
    let s = state.withLock { $0 }
    var out = ""
    func family(_ name: String, _ type: String, _ help: String) {
      out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
    }
    /// A family with one unlabelled sample.
    func single(_ name: String, _ type: String, _ help: String, _ value: some CustomStringConvertible) {
      family(name, type, help)
      out += "\(name) \(value)\n"
    }
    family("bucketfs_requests_total", "counter", "Requests to the bucket, by operation and outcome.")
    for (key, value) in s.requests.sorted(by: { $0.key < $1.key }) {
      let parts = key.split(separator: "|", maxSplits: 1).map(String.init)
      out += "bucketfs_requests_total{operation=\"\(Self.label(parts[0]))\",outcome=\"\(Self.label(parts[1]))\"} \(value)\n"
    }
    single("bucketfs_fetched_bytes_total", "counter", "Object bytes received from the bucket.", bytesFetched.load(ordering: .relaxed))
    single("bucketfs_block_cache_hits_total", "counter", "Reads answered from the block cache.", cacheHits.load(ordering: .relaxed))
    single("bucketfs_block_cache_misses_total", "counter", "Reads that needed the bucket.", cacheMisses.load(ordering: .relaxed))
    single("bucketfs_block_cache_evictions_total", "counter", "Pages evicted from the block cache.", r.cacheEvictions)
    single("bucketfs_block_cache_bytes", "gauge", "Bytes held by the block cache.", r.cacheBytes)
    single("bucketfs_staging_bytes", "gauge", "Bytes of complete staged copies.", r.stagingBytes)
    single("bucketfs_staging_files", "gauge", "Complete staged copies.", r.stagingFiles)
    single("bucketfs_pins", "gauge", "Folders and files pinned (kept available offline).", r.pins)
    single("bucketfs_pinned_files", "gauge", "Complete staged copies kept by pins.", r.pinnedFiles)
    single("bucketfs_pinned_bytes", "gauge", "Bytes of complete staged copies kept by pins.", r.pinnedBytes)
    single("bucketfs_staging_evictions_total", "counter", "Staged copies evicted to stay within the staging size.", r.stagingEvicted)
    single("bucketfs_staging_damaged_total", "counter", "Staged copies found damaged and dropped (never served).", r.stagingDropped)
    single(
      "bucketfs_staging_buffers_free", "gauge", "Staging write buffers free (\(StagingWriter.poolSize) when nothing is being staged).",
      r.stagingBuffersFree)
    single("bucketfs_open_handles", "gauge", "Files open through the mount.", r.openHandles)
    single("bucketfs_metadata_entries", "gauge", "Names and attributes the mount keeps (listings, attributes, names known missing).", r.metadataEntries)
    single("bucketfs_metadata_bytes", "gauge", "Bytes those take, about (metadata_cache_size bounds them).", r.metadataBytes)
    single("bucketfs_inodes", "gauge", "Inodes the kernel holds.", r.inodes)
    single("bucketfs_folders_listed_ahead_total", "counter", "Folder listings fetched ahead of a walk.", r.foldersListedAhead)
    single(
      "bucketfs_listings_from_last_total", "counter", "Folder listings the server could not give, answered from the last one.",
      r.listingsFromLast)
    single("bucketfs_metadata_evictions_total", "counter", "Listings dropped to stay within metadata_cache_size.", r.metadataEvictions)
    single("bucketfs_retries_total", "counter", "Requests retried after a failure.", r.retries)
    single("bucketfs_token_refreshes_total", "counter", "Tokens fetched from the credential source.", r.tokenRefreshes)
    single(
      "bucketfs_readahead_files_total", "counter", "Files fetched ahead of their open (a folder read in listing order).",
      readAheadFiles.load(ordering: .relaxed))
    single("bucketfs_passthrough_opens_total", "counter", "Opens the kernel reads from the staged copy by itself (FUSE passthrough).", passthroughOpens.load(ordering: .relaxed))
    single(
      "bucketfs_version_inodes_total", "counter", "Newer versions given an inode of their own beside open readers of an older one.",
      versionInodes.load(ordering: .relaxed))
    single("bucketfs_passthrough_written_files_total", "counter", "New files the kernel wrote by itself (FUSE passthrough).", passthroughWrites.load(ordering: .relaxed))
    single("bucketfs_fuse_timeouts_total", "counter", "FUSE requests answered EIO for passing their bound.", fuseTimeouts.load(ordering: .relaxed))
    single(
      "bucketfs_transfer_loop_seconds_since_turn", "gauge",
      "Seconds since the transfer loop last turned (it turns at least every 0.25 s).", r.transferLoopAge)
    single(
      "bucketfs_transfer_loop_stalls_total", "counter", "Times the transfer loop was held up for more than a second.",
      transferLoopStalls.load(ordering: .relaxed))
    if let q = r.queue {
      single("bucketfs_writeback_queued_changes", "gauge", "Changes made through the mount and not in the bucket yet.", q.changes)
      single("bucketfs_writeback_queued_bytes", "gauge", "Bytes of the queued uploads.", q.bytes)
      single("bucketfs_writeback_failed_changes", "gauge", "Changes the bucket refused, kept in the queue.", q.failed)
      single("bucketfs_writeback_applied_total", "counter", "Changes carried out.", q.applied)
      single("bucketfs_writeback_conflicts_total", "counter", "Uploads that went beside an object changed elsewhere.", q.conflicts)
      single("bucketfs_writeback_merges_total", "counter", "Appends carried onto a version another writer made meanwhile.", q.merges)
      single(
        "bucketfs_writeback_renames_uploaded_total", "counter", "Renames carried out as an upload under the new name, then a delete of the old.",
        q.renamesByUpload)
      single(
        "bucketfs_writeback_damaged_records", "gauge", "Queue records or bytes found damaged and kept aside, not carried out.", q.damaged)
    }
    family("bucketfs_fuse_operation_seconds", "histogram", "FUSE operations by type, by time to answer.")
    for (op, h) in s.fuse.sorted(by: { $0.key < $1.key }) {
      for (i, bound) in Self.buckets.enumerated() {
        out += "bucketfs_fuse_operation_seconds_bucket{operation=\"\(op)\",le=\"\(Self.number(bound))\"} \(h.counts[i])\n"
      }
      out += "bucketfs_fuse_operation_seconds_bucket{operation=\"\(op)\",le=\"+Inf\"} \(h.count)\n"
      out += "bucketfs_fuse_operation_seconds_sum{operation=\"\(op)\"} \(h.sum)\n"
      out += "bucketfs_fuse_operation_seconds_count{operation=\"\(op)\"} \(h.count)\n"
    }
    return out
  }

  /// A few lines for a person.
  package func summary(_ r: Readings) -> [(String, String)] {
    let s = state.withLock { $0 }
    let requests = s.requests.values.reduce(0, +)
    let failed = s.requests.filter { !$0.key.hasSuffix("|ok") }.values.reduce(0, +)
    let ops = s.fuse.values.reduce(UInt64(0)) { $0 + $1.count }
    let hits = cacheHits.load(ordering: .relaxed)
    let misses = cacheMisses.load(ordering: .relaxed)
    var lines = [
      ("requests to the bucket", "\(requests) (\(failed) failed)"),
      ("bytes fetched", "\(bytesFetched.load(ordering: .relaxed))"),
      ("block cache", "\(r.cacheBytes) bytes held, \(hits) hits, \(misses) misses, \(r.cacheEvictions) evictions"),
      ("staged copies", "\(r.stagingFiles) files, \(r.stagingBytes) bytes, \(r.stagingEvicted) evicted, \(r.stagingDropped) dropped as damaged"),
      ("pinned", "\(r.pins) pins, \(r.pinnedFiles) files, \(r.pinnedBytes) bytes kept"),
      (
        "pin passes",
        "\(r.pinPasses.passes) done, \(r.pinPasses.fetched) objects fetched; the last: \(r.pinPasses.lastPages) list pages, "
          + "\(r.pinPasses.lastAsked) metadata requests, \(r.pinPasses.lastFetched) objects fetched"
      ),
      (
        "metadata cache",
        "\(r.metadataEntries) entries, \(r.metadataBytes) bytes of \(r.metadataBudget), \(r.metadataEvictions) listings evicted, \(r.inodes) inodes"
      ),
      ("open handles", "\(r.openHandles)"),
      ("FUSE operations", "\(ops)"),
      ("retries", "\(r.retries)"),
      ("token refreshes", "\(r.tokenRefreshes)"),
      ("files read ahead", "\(readAheadFiles.load(ordering: .relaxed))"),
      ("folders listed ahead", "\(r.foldersListedAhead)"),
      ("listings answered from the last listing", "\(r.listingsFromLast)"),
      ("opens by passthrough", "\(passthroughOpens.load(ordering: .relaxed))"),
      ("newer versions opened beside older readers", "\(versionInodes.load(ordering: .relaxed))"),
      ("files written by passthrough", "\(passthroughWrites.load(ordering: .relaxed))"),
      ("requests past their bound", "\(fuseTimeouts.load(ordering: .relaxed))"),
      (
        "renames on the server",
        "\(s.requests["move|ok", default: 0]) moved in one request, \(s.requests["copy|ok", default: 0]) copied then deleted, \(r.queue?.renamesByUpload ?? 0) uploaded then deleted"
      ),
      ("folder renames on the server", "\(s.requests["folder_rename|ok", default: 0]) as one folders.rename"),
      ("transfer loop", String(format: "last turned %.2f s ago, %d stalls", r.transferLoopAge, transferLoopStalls.load(ordering: .relaxed))),
    ]
    if let q = r.queue {
      lines.append(("write-back queue", "\(q.changes) changes, \(q.bytes) bytes, \(q.failed) failed, \(q.applied) done, \(q.conflicts) conflicts, \(q.merges) appends merged"))
      lines.append(("write-back at once", "\(q.atOnce) changes (at most \(ChangeConcurrency.most))"))
      if q.damaged > 0 { lines.append(("damaged queue records", "\(q.damaged) kept aside, not carried out")) }
    }
    return lines
  }
}
