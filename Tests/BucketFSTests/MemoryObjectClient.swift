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

  /// Listing pages carry each object's metadata, as the GCS JSON API's do (else names only,
  /// as Firebase v0's).
  let listsWithAttributes = Atomic<Bool>(false)
  var listsAttributes: Bool { listsWithAttributes.load(ordering: .relaxed) }

  func listPage(prefix: String, pageToken: String?, maxResults: Int?) async throws(BucketError) -> ListPage {
    let (names, metadata) = objects.withLock { o in (o.keys.sorted().filter { $0.hasPrefix(prefix) }, o.mapValues(\.1)) }
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
    guard listsAttributes else { return ListPage(prefixes: prefixes.sorted(), items: items, nextPageToken: nil) }
    return ListPage(prefixes: prefixes.sorted(), items: items, itemMetadata: items.map { metadata[$0] }, nextPageToken: nil)
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

  // MARK: writes, with GCS's generation preconditions

  /// Every version written, for copies by generation (a bucket with versioning kept).
  private let versions = Mutex<[Int64: (Data, StorageMetadata)]>([:])
  private let generations = Atomic<Int64>(1000)
  /// Writes carried out whose answers are lost (the client sees a reset), one per write, while
  /// this is above 0.
  let answersToLose = Atomic<Int>(0)
  /// Writes refused as if the server were away (nothing done), one per write, while above 0.
  let writesToRefuse = Atomic<Int>(0)
  let writes = Mutex<[String]>([])
  /// What the bucket held after each change to it, and when by `clock` (a test's count of the
  /// queue's file operations): the server's state at any moment of a recorded run.
  let history = Mutex<[(at: Int, objects: [String: (Data, StorageMetadata)])]>([])
  let clock = Mutex<(@Sendable () -> Int)?>(nil)

  private func changed() {
    guard let at = clock.withLock({ $0 })?() else { return }
    let now = objects.withLock { $0 }
    history.withLock { $0.append((at, now)) }
  }

  /// Holds `seeded` (objects with their generations): new versions get generations past theirs.
  func seed(_ seeded: [String: (Data, StorageMetadata)]) {
    objects.withLock { $0 = seeded }
    let highest = seeded.values.map(\.1.generation).max() ?? 0
    while generations.load(ordering: .relaxed) < highest { generations.add(1, ordering: .relaxed) }
    versions.withLock { v in for (data, m) in seeded.values { v[m.generation] = (data, m) } }
  }

  private func precondition(_ name: String, _ ifGenerationMatch: Int64?, in o: [String: (Data, StorageMetadata)]) throws(BucketError) {
    guard let expected = ifGenerationMatch else { return }
    let actual = o[name]?.1.generation ?? 0
    if actual != expected {
      throw BucketError(code: .preconditionFailed, object: name, detail: "generation \(actual), not \(expected)", httpStatus: 412)
    }
  }

  private func gate(_ what: String) throws(BucketError) {
    writes.withLock { $0.append(what) }
    if writesToRefuse.load(ordering: .relaxed) > 0 {
      writesToRefuse.subtract(1, ordering: .relaxed)
      throw BucketError(code: .serverUnreachable, object: "", detail: "connection refused")
    }
  }

  private func answered<T>(_ value: T) throws(BucketError) -> T {
    if answersToLose.load(ordering: .relaxed) > 0 {
      answersToLose.subtract(1, ordering: .relaxed)
      throw BucketError(code: .serverUnreachable, object: "", detail: "connection reset before the answer")
    }
    return value
  }

  private func store(_ name: String, _ data: Data, custom: [String: String]?, contentType: String?, in o: inout [String: (Data, StorageMetadata)]) -> StorageMetadata {
    var m = StorageMetadata()
    m.customMetadata = custom
    m.contentType = contentType
    m.path = name
    m.bucket = bucket
    m.size = Int64(data.count)
    m.generation = generations.add(1, ordering: .relaxed).newValue
    m.updated = Date(timeIntervalSince1970: 1_700_000_000)
    var crc = CRC32C()
    data.withUnsafeBytes { crc.update($0) }
    m.crc32c = crc.base64
    o[name] = (data, m)
    versions.withLock { $0[m.generation] = (data, m) }
    return m
  }

  func upload(
    _ name: String, file path: String, contentType: String, custom: [String: String], ifGenerationMatch: Int64?, session: UploadSession?
  ) async throws(BucketError) -> StorageMetadata {
    try gate("upload \(name)")
    guard let data = FileManager.default.contents(atPath: path) else {
      throw BucketError(code: .internalError, object: name, detail: "cannot read \(path)")
    }
    let m = try objects.withLock { o throws(BucketError) in
      try precondition(name, ifGenerationMatch, in: o)
      return store(name, data, custom: custom.isEmpty ? nil : custom, contentType: contentType, in: &o)
    }
    changed()
    return try answered(m)
  }

  /// Deletes check their precondition before the object's existence, as the Firebase v0 API
  /// does: a delete of a missing object with `ifGenerationMatch` answers 412, not 404.
  let preconditionFirst = Atomic<Bool>(false)

  func delete(_ name: String, ifGenerationMatch: Int64?) async throws(BucketError) {
    try gate("delete \(name)")
    try objects.withLock { o throws(BucketError) in
      if preconditionFirst.load(ordering: .relaxed) { try precondition(name, ifGenerationMatch, in: o) }
      guard o[name] != nil else { throw BucketError(code: .objectNotFound, object: name, detail: "no such object", httpStatus: 404) }
      try precondition(name, ifGenerationMatch, in: o)
      o[name] = nil
    }
    changed()
    try answered(())
  }

  func updateMetadata(_ name: String, contentType: String?, custom: [String: String], ifGenerationMatch: Int64?) async throws(BucketError)
    -> StorageMetadata
  {
    try gate("metadata \(name)")
    let m = try objects.withLock { o throws(BucketError) in
      guard var (data, m) = o[name] else { throw BucketError(code: .objectNotFound, object: name, detail: "no such object", httpStatus: 404) }
      try precondition(name, ifGenerationMatch, in: o)
      if let contentType { m.contentType = contentType }
      var merged = m.customMetadata ?? [:]
      merged.merge(custom) { _, new in new }
      m.customMetadata = merged
      m.metageneration += 1
      o[name] = (data, m)
      _ = data
      return m
    }
    changed()
    return try answered(m)
  }

  var copiesOnServer: Bool { true }

  func copy(_ source: String, generation: Int64, to target: String, ifGenerationMatch: Int64?) async throws(BucketError) -> StorageMetadata {
    try gate("copy \(source) \(target)")
    guard let (data, from) = versions.withLock({ $0[generation] }) ?? objects.withLock({ $0[source].flatMap { $0.1.generation == generation ? $0 : nil } })
    else { throw BucketError(code: .objectNotFound, object: source, detail: "no generation \(generation)", httpStatus: 404) }
    let m = try objects.withLock { o throws(BucketError) in
      try precondition(target, ifGenerationMatch, in: o)
      return store(target, data, custom: from.customMetadata, contentType: from.contentType, in: &o)
    }
    changed()
    return try answered(m)
  }
}
