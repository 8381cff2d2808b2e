import BucketFS
import Foundation
import StorageCore
import Synchronization

/// An in-memory bucket: the filesystem logic runs against it without a kernel or a server.
final class MemoryObjectClient: ObjectClient, @unchecked Sendable {
  let bucket = "mem"
  let objects = Mutex<[String: (Data, StorageMetadata)]>([:])
  let reads = Atomic<Int>(0)
  let metadataRequests = Atomic<Int>(0)

  func put(_ name: String, _ data: Data, custom: [String: String]? = nil) {
    objects.withLock { o in
      var m = StorageMetadata()
      m.customMetadata = custom
      m.path = name
      m.bucket = bucket
      m.size = Int64(data.count)
      m.generation = (o[name]?.1.generation ?? 0) + 1
      m.updated = Date(timeIntervalSince1970: 1_700_000_000)
      var crc = CRC32C()
      data.withUnsafeBytes { crc.update($0) }
      m.crc32c = crc.base64
      o[name] = (data, m)
    }
  }

  func metadata(of name: String) async throws(BucketError) -> StorageMetadata {
    metadataRequests.add(1, ordering: .relaxed)
    guard let m = objects.withLock({ $0[name]?.1 }) else {
      throw BucketError(code: .objectNotFound, object: name, detail: "no such object")
    }
    return m
  }

  func listPage(prefix: String, pageToken: String?, maxResults: Int?) async throws(BucketError) -> ListPage {
    let names = objects.withLock { $0.keys.sorted() }.filter { $0.hasPrefix(prefix) }
    var items: [String] = []
    var prefixes = Set<String>()
    for name in names {
      let rest = name.dropFirst(prefix.count)
      if let slash = rest.firstIndex(of: "/") {
        prefixes.insert(prefix + rest[...slash])
      } else {
        items.append(name)
      }
    }
    return ListPage(prefixes: prefixes.sorted(), items: items, nextPageToken: nil)
  }

  /// While held, reads wait, as on a server that stalls; `letReadsGo` lets them go on.
  private let gate = Mutex<(held: Bool, waiting: [CheckedContinuation<Void, Never>])>((false, []))

  func holdReads() { gate.withLock { $0.held = true } }

  func letReadsGo() {
    let waiting = gate.withLock { g in
      defer { g = (false, []) }
      return g.waiting
    }
    for w in waiting { w.resume() }
  }

  func read(_ name: String, range: Range<Int64>, generation: Int64) async throws(BucketError) -> Data {
    reads.add(1, ordering: .relaxed)
    await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
      let held = gate.withLock { g in
        if g.held { g.waiting.append(c) }
        return g.held
      }
      if !held { c.resume() }
    }
    guard let (data, m) = objects.withLock({ $0[name] }) else {
      throw BucketError(code: .objectNotFound, object: name, detail: "no such object")
    }
    guard m.generation == generation else { throw BucketError(code: .objectChanged, object: name, detail: "changed") }
    return data.subdata(in: Int(range.lowerBound)..<Int(min(range.upperBound, Int64(data.count))))
  }

  func downloadURL(name: String, token: String) -> String { "mem://\(name)?token=\(token)" }

}
