// The daemon's numbers, for Prometheus (`-o metrics=HOST:PORT`) and for a person
// (`bucketfs stats MOUNTPOINT`): requests to the bucket by operation and outcome, bytes fetched,
// FUSE operations by type with latency histograms, and gauges read from the caches when asked.
import Foundation
import Synchronization

public final class Metrics: Sendable {
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

  public init() {}

  /// A request to the bucket ended: `outcome` is "ok" or the error code's name.
  public func request(_ operation: String, outcome: String) {
    state.withLock { $0.requests["\(operation)|\(outcome)", default: 0] += 1 }
  }

  public func fetched(_ bytes: Int) { bytesFetched.add(bytes, ordering: .relaxed) }

  /// A FUSE operation was answered after `seconds`.
  public func fuse(_ operation: String, seconds: Double) {
    state.withLock { s in
      var h = s.fuse[operation] ?? Histogram()
      for (i, bound) in Self.buckets.enumerated() where seconds <= bound { h.counts[i] += 1 }
      h.sum += seconds
      h.count += 1
      s.fuse[operation] = h
    }
  }

  /// Gauges and counters kept elsewhere, read when the page is made.
  public struct Readings: Sendable {
    public var cacheBytes: Int
    public var cacheEvictions: Int
    public var stagingBytes: Int64
    public var stagingFiles: Int
    public var openHandles: Int
    public var retries: Int
    public var tokenRefreshes: Int
    public init(cacheBytes: Int, cacheEvictions: Int, stagingBytes: Int64, stagingFiles: Int, openHandles: Int, retries: Int, tokenRefreshes: Int) {
      self.cacheBytes = cacheBytes
      self.cacheEvictions = cacheEvictions
      self.stagingBytes = stagingBytes
      self.stagingFiles = stagingFiles
      self.openHandles = openHandles
      self.retries = retries
      self.tokenRefreshes = tokenRefreshes
    }
  }

  private static func label(_ text: String) -> String {
    text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
  }

  private static func number(_ value: Double) -> String {
    value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
  }

  /// The Prometheus text exposition format (version 0.0.4).
  public func prometheus(_ r: Readings) -> String {
    let s = state.withLock { $0 }
    var out = ""
    func family(_ name: String, _ type: String, _ help: String) {
      out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
    }
    family("bucketfs_requests_total", "counter", "Requests to the bucket, by operation and outcome.")
    for (key, value) in s.requests.sorted(by: { $0.key < $1.key }) {
      let parts = key.split(separator: "|", maxSplits: 1).map(String.init)
      out += "bucketfs_requests_total{operation=\"\(Self.label(parts[0]))\",outcome=\"\(Self.label(parts[1]))\"} \(value)\n"
    }
    family("bucketfs_fetched_bytes_total", "counter", "Object bytes received from the bucket.")
    out += "bucketfs_fetched_bytes_total \(bytesFetched.load(ordering: .relaxed))\n"
    family("bucketfs_block_cache_hits_total", "counter", "Reads answered from the block cache.")
    out += "bucketfs_block_cache_hits_total \(cacheHits.load(ordering: .relaxed))\n"
    family("bucketfs_block_cache_misses_total", "counter", "Reads that needed the bucket.")
    out += "bucketfs_block_cache_misses_total \(cacheMisses.load(ordering: .relaxed))\n"
    family("bucketfs_block_cache_evictions_total", "counter", "Pages evicted from the block cache.")
    out += "bucketfs_block_cache_evictions_total \(r.cacheEvictions)\n"
    family("bucketfs_block_cache_bytes", "gauge", "Bytes held by the block cache.")
    out += "bucketfs_block_cache_bytes \(r.cacheBytes)\n"
    family("bucketfs_staging_bytes", "gauge", "Bytes of complete staged copies.")
    out += "bucketfs_staging_bytes \(r.stagingBytes)\n"
    family("bucketfs_staging_files", "gauge", "Complete staged copies.")
    out += "bucketfs_staging_files \(r.stagingFiles)\n"
    family("bucketfs_open_handles", "gauge", "Files open through the mount.")
    out += "bucketfs_open_handles \(r.openHandles)\n"
    family("bucketfs_retries_total", "counter", "Requests retried after a failure.")
    out += "bucketfs_retries_total \(r.retries)\n"
    family("bucketfs_token_refreshes_total", "counter", "Tokens fetched from the credential source.")
    out += "bucketfs_token_refreshes_total \(r.tokenRefreshes)\n"
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
  public func summary(_ r: Readings) -> [(String, String)] {
    let s = state.withLock { $0 }
    let requests = s.requests.values.reduce(0, +)
    let failed = s.requests.filter { !$0.key.hasSuffix("|ok") }.values.reduce(0, +)
    let ops = s.fuse.values.reduce(UInt64(0)) { $0 + $1.count }
    let hits = cacheHits.load(ordering: .relaxed)
    let misses = cacheMisses.load(ordering: .relaxed)
    return [
      ("requests to the bucket", "\(requests) (\(failed) failed)"),
      ("bytes fetched", "\(bytesFetched.load(ordering: .relaxed))"),
      ("block cache", "\(r.cacheBytes) bytes held, \(hits) hits, \(misses) misses, \(r.cacheEvictions) evictions"),
      ("staged copies", "\(r.stagingFiles) files, \(r.stagingBytes) bytes"),
      ("open handles", "\(r.openHandles)"),
      ("FUSE operations", "\(ops)"),
      ("retries", "\(r.retries)"),
      ("token refreshes", "\(r.tokenRefreshes)"),
    ]
  }
}
