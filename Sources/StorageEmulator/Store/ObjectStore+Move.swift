// `objects.move` and the object half of `folders.rename`: a name changed in one step under the
// index lock, so no reader sees both names or neither, and no other write lands in between.
import Foundation

extension ObjectStore {
  enum MoveOutcome<Refusal> {
    case moved(ObjectRecord)
    /// The source name holds no object.
    case noSource
    /// `refuse` gave a reason (a precondition that failed): nothing changed.
    case refused(Refusal)
    case failed
  }

  /// Moves `source` to `target` within `bucket`: the target becomes a new generation (metageneration
  /// 1, new times) with the source's bytes and metadata, and the source is gone, in one step.
  /// `refuse` sees the source and the target as they are at that step (nil: no target) and may
  /// stop it; the bytes are renamed, never copied.
  func move<Refusal>(
    bucket: String, source: String, target: String, refuse: (ObjectRecord, ObjectRecord?) -> Refusal?
  ) -> MoveOutcome<Refusal> {
    if Self.nameProblem(target) != nil { return .failed }
    let outcome: MoveOutcome<Refusal> = buckets.withLock { all in
      guard all[bucket]?.generations[Key(source)] != nil else { return .noSource }
      guard let from = all[bucket]!.cache[Key(source)] ?? readRecord(bucket, Key(source)) else { return .failed }
      let existing = all[bucket]!.generations[Key(target)] == nil ? nil : (all[bucket]!.cache[Key(target)] ?? readRecord(bucket, Key(target)))
      if let refusal = refuse(from, existing) { return .refused(refusal) }
      guard let moved = moveLocked(&all, bucket: bucket, from, to: target, replacing: existing) else { return .failed }
      return .moved(moved)
    }
    return outcome
  }

  /// Renames every object under `prefix` to the same name under `newPrefix`, in one step; nil
  /// (nothing changed) when any name under `newPrefix` exists. Answers how many moved.
  func moveAll(bucket: String, prefix: String, newPrefix: String) -> Int? {
    buckets.withLock { all -> Int? in
      guard let b = all[bucket] else { return 0 }
      let newBytes = Array(newPrefix.utf8)
      let at = b.lowerBound(Key(newPrefix))
      if at < b.sorted.count && b.sorted[at].bytes.starts(with: newBytes) { return nil }
      let prefixBytes = Array(prefix.utf8)
      var keys: [Key] = []
      var i = b.lowerBound(Key(prefix))
      while i < b.sorted.count && b.sorted[i].bytes.starts(with: prefixBytes) {
        keys.append(b.sorted[i])
        i += 1
      }
      var moved = 0
      for key in keys {
        guard let from = all[bucket]!.cache[key] ?? readRecord(bucket, key) else { continue }
        let target = newPrefix + String(decoding: key.bytes[prefixBytes.count...], as: UTF8.self)
        guard Self.nameProblem(target) == nil, moveLocked(&all, bucket: bucket, from, to: target, replacing: nil) != nil else { continue }
        moved += 1
      }
      return moved
    }
  }

  /// The move itself, with the index lock held: the bytes renamed to the target's data file, the
  /// target's side file written, then the source's side file and index entry removed.
  private func moveLocked(_ all: inout [String: Bucket], bucket: String, _ from: ObjectRecord, to target: String, replacing: ObjectRecord?)
    -> ObjectRecord?
  {
    let folder = bucketFolder(bucket)
    let generation = nextGeneration()
    let now = Int64(Date().timeIntervalSince1970 * 1000)
    var record = from
    record.name = target
    record.generation = generation
    record.metageneration = 1
    record.timeCreated = now
    record.updated = now
    record.dataFile = ObjectHashes.sha256Hex(target) + "-\(generation).bin"
    // A reader with the source's bytes open keeps reading them: rename keeps the open file.
    guard rename(dataPath(from), folder.appendingPathComponent(record.dataFile).path) == 0 else { return nil }
    guard writeSideFile(record) else {
      _ = rename(folder.appendingPathComponent(record.dataFile).path, dataPath(from))
      return nil
    }
    let source = Key(from.name)
    let key = Key(target)
    all[bucket]!.changes += 1
    if all[bucket]!.generations.updateValue(generation, forKey: key) == nil {
      all[bucket]!.sorted.insert(key, at: all[bucket]!.lowerBound(key))
    }
    all[bucket]!.remember(key, record)
    Self.appendLine(IndexLog.putLine(key, generation: generation), to: all[bucket]!.log)
    all[bucket]!.generations.removeValue(forKey: source)
    all[bucket]!.cache.removeValue(forKey: source)
    all[bucket]!.sorted.remove(at: all[bucket]!.lowerBound(source))
    Self.appendLine(IndexLog.deleteLine(source), to: all[bucket]!.log)
    unlink(sideFile(bucket, from.name))
    if let replacing, replacing.dataFile != record.dataFile { unlink(dataPath(replacing)) }
    folders?.objectWritten(bucket, target)
    changed?()
    return record
  }
}
