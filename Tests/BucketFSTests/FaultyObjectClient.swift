import BucketFS
import Foundation
import TestSupport
import StorageCore
import Synchronization

/// An in-memory bucket that misbehaves on purpose, from a seed: failed requests, short reads,
/// resets in the middle of a range, delays. Generations are honoured the way the real client
/// honours them (a read or download of a replaced generation fails with `objectChanged`), so
/// the filesystem's answers can be checked against a model byte for byte.
final class FaultyObjectClient: ObjectClient, @unchecked Sendable {
  struct Faults {
    var errorRate = 0.0
    var shortReadRate = 0.0
    var resetRate = 0.0
    var delayRate = 0.0
  }

  let bucket = "faulty"
  private let state: Mutex<(objects: [String: (Data, StorageMetadata)], rng: SeededGenerator, lastGeneration: Int64)>
  let faults: Faults
  let injected = Atomic<Int>(0)

  init(seed: UInt64, faults: Faults) {
    state = Mutex(([:], SeededGenerator(seed: seed), 0))
    self.faults = faults
  }

  /// Stores `data` as a new generation of `name`; returns the generation.
  @discardableResult
  func put(_ name: String, _ data: Data) -> Int64 {
    state.withLock { s in
      s.lastGeneration += 1
      var m = StorageMetadata()
      m.path = name
      m.bucket = bucket
      m.size = Int64(data.count)
      m.generation = s.lastGeneration
      m.metageneration = 1
      m.updated = Date(timeIntervalSince1970: 1_700_000_000 + Double(s.lastGeneration))
      var crc = CRC32C()
      data.withUnsafeBytes { crc.update($0) }
      m.crc32c = crc.base64
      s.objects[name] = (data, m)
      return s.lastGeneration
    }
  }

  func delete(_ name: String) { _ = state.withLock { $0.objects.removeValue(forKey: name) } }

  private func roll(_ rate: Double) -> Bool {
    guard rate > 0 else { return false }
    return state.withLock { Double.random(in: 0..<1, using: &$0.rng) < rate }
  }

  private func random(_ range: Range<Int>) -> Int { state.withLock { Int.random(in: range, using: &$0.rng) } }

  /// A delay, or a failed request, as the dice say.
  private func misbehave(_ name: String) async throws(BucketError) {
    if roll(faults.delayRate) { try? await Task.sleep(for: .microseconds(random(100..<3000))) }
    if roll(faults.errorRate) {
      injected.add(1, ordering: .relaxed)
      // Not a "server gone" error (timedOut, retryLimitExceeded): those switch the filesystem to
      // its staged copies, whose view is partial by design.
      throw BucketError(code: .unknown, object: name, detail: "injected failure", httpStatus: 503)
    }
  }

  func metadata(of name: String) async throws(BucketError) -> StorageMetadata {
    try await misbehave(name)
    guard let m = state.withLock({ $0.objects[name]?.1 }) else {
      throw BucketError(code: .objectNotFound, object: name, detail: "no such object")
    }
    return m
  }

  func listPage(prefix: String, pageToken: String?, maxResults: Int?) async throws(BucketError) -> ListPage {
    try await misbehave(prefix)
    let names = state.withLock { $0.objects.keys.sorted() }.filter { $0.hasPrefix(prefix) }
    var items: [String] = []
    var prefixes: [String] = []
    for name in names {
      let rest = name.dropFirst(prefix.count)
      if let slash = rest.firstIndex(of: "/") {
        let folder = prefix + rest[...slash]
        if prefixes.last != folder { prefixes.append(folder) }
      } else {
        items.append(name)
      }
    }
    if let maxResults, maxResults < items.count + prefixes.count {
      // Enough for "is there anything under this prefix?".
      return ListPage(prefixes: Array(prefixes.prefix(maxResults)), items: Array(items.prefix(max(0, maxResults - prefixes.count))), nextPageToken: nil)
    }
    return ListPage(prefixes: prefixes, items: items, nextPageToken: nil)
  }

  func read(_ name: String, range: Range<Int64>, generation: Int64) async throws(BucketError) -> Data {
    try await misbehave(name)
    guard let (data, m) = state.withLock({ $0.objects[name] }) else {
      throw BucketError(code: .objectChanged, object: name, detail: "generation \(generation) is gone", httpStatus: 404)
    }
    guard m.generation == generation else {
      throw BucketError(code: .objectChanged, object: name, detail: "generation \(generation) → \(m.generation)")
    }
    let upper = Int(min(range.upperBound, Int64(data.count)))
    let lower = Int(min(range.lowerBound, Int64(upper)))
    var bytes = data.subdata(in: lower..<upper)
    if bytes.count > 1, roll(faults.resetRate) {
      injected.add(1, ordering: .relaxed)
      throw BucketError(code: .unknown, object: name, detail: "injected reset after \(random(1..<bytes.count)) bytes")
    }
    if bytes.count > 1, roll(faults.shortReadRate) {
      // A server (or proxy) that ends the body early without an error.
      injected.add(1, ordering: .relaxed)
      bytes = bytes.prefix(random(0..<bytes.count))
    }
    return bytes
  }

  func downloadURL(name: String, token: String) -> String { "mem://\(name)?token=\(token)" }

}

