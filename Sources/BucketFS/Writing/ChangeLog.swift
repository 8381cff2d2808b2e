// The queue's records as one append-only file (`changes.log`) instead of a file per record: a
// record written, rewritten or removed is one frame appended, so a close costs the disk no new
// file (on ext4 without a journal every new inode is found by scanning past those freed in the
// last half minute, which made a file per record the largest part of an untar's cost), and a
// group commit fsyncs one file. A frame is its length, the CRC32C of its payload, and the
// payload: a change's record (`PendingChange`, JSON), records written together (all or none
// last), or the removal of one. The last frame of a change wins. A frame that is cut short or does not match its CRC ends what is read: it and
// everything after it are kept aside as damaged, never carried out. The file is rewritten with
// only the live records when the dead ones outweigh them.
import Foundation
import StorageCore
import Synchronization

final class ChangeLog: Sendable {
  /// What a load found: the payload of each change's last record, and what had to be set aside.
  struct Loaded {
    var records: [UInt64: Data] = [:]
    /// Changes whose last frame is their removal: carried out or replaced. Their bytes may
    /// still be there (a group commit unlinks them after the removal lasts, and a daemon killed
    /// in between leaves them): the queue's, to remove, not bytes without a record.
    var removed: Set<UInt64> = []
    /// The bytes from the first frame that could not be read, and why.
    var damage: (bytes: Data, reason: String)?
  }

  /// A removal's payload (`{"removed":N}`, written by hand as records are); a record's is a
  /// `PendingChange`.
  private struct Removal: Codable { var removed: UInt64 }
  /// Records written in one append (`{"together":[…]}`): all of them last, or none.
  private struct Together: Decodable { var together: [PendingChange] }

  private struct State {
    var fd: Int32 = -1
    /// Size of each live change's last frame; the rest of the file is dead frames.
    var live: [UInt64: Int] = [:]
    var size = 0
  }

  let path: String
  private let disk: any QueueDisk
  private let state = Mutex(State())
  /// Makes the bytes the records vouch for last before a compaction makes the records last
  /// (`GroupCommit.flushBytes`); nil when every record's bytes lasted before it was written.
  private let beforeRewrite: (@Sendable () throws(FSError) -> Void)?

  /// Frames longer than this are not believed: a damaged length.
  private static let largestPayload = 64 << 20
  /// The file is rewritten when it is larger than this and at least half dead.
  private static let compactFrom = 4 << 20

  init(path: String, disk: any QueueDisk, beforeRewrite: (@Sendable () throws(FSError) -> Void)? = nil) {
    self.path = path
    self.disk = disk
    self.beforeRewrite = beforeRewrite
  }

  deinit {
    let fd = state.withLock { $0.fd }
    if fd >= 0 { disk.close(fd) }
  }

  // MARK: reading

  /// The frames of `data` in order: each change's last record, and where reading stopped.
  static func parse(_ data: Data) -> Loaded {
    var loaded = Loaded()
    var at = data.startIndex
    func stop(_ reason: String) { loaded.damage = (Data(data[at...]), reason) }
    while at < data.endIndex {
      guard data.endIndex - at >= 8 else {
        stop("the journal ends in \(data.endIndex - at) bytes of a record cut short (a crash while it was written)")
        break
      }
      let length = Int(data.littleEndianUInt32(at: at))
      let crc = data.littleEndianUInt32(at: at + 4)
      guard length <= largestPayload else {
        stop("the journal is damaged at byte \(at - data.startIndex) (a record of \(length) bytes)")
        break
      }
      guard data.endIndex - at - 8 >= length else {
        stop("the journal ends in a record cut short at byte \(at - data.startIndex) (a crash while it was written)")
        break
      }
      let payload = data[(at + 8)..<(at + 8 + length)]
      var check = CRC32C()
      payload.withUnsafeBytes { check.update($0) }
      guard check.value == crc else {
        stop("the journal is damaged at byte \(at - data.startIndex): a record does not match its checksum")
        break
      }
      if let removal = try? JSONDecoder().decode(Removal.self, from: payload) {
        loaded.records.removeValue(forKey: removal.removed)
        loaded.removed.insert(removal.removed)
      } else if let change = try? JSONDecoder().decode(PendingChange.self, from: payload) {
        loaded.records[change.sequence] = Data(payload)
        loaded.removed.remove(change.sequence)
      } else if let together = try? JSONDecoder().decode(Together.self, from: payload),
        let records = try? together.together.map({ try $0.record() })
      {
        for (change, record) in zip(together.together, records) {
          loaded.records[change.sequence] = record
          loaded.removed.remove(change.sequence)
        }
      } else {
        stop("the journal holds a record at byte \(at - data.startIndex) that cannot be read")
        break
      }
      at += 8 + length
    }
    return loaded
  }

  /// Reads the file: the live records, and the damage set aside by the caller. The file is then
  /// rewritten with the live records only, when anything else was in it.
  func load() throws(FSError) -> Loaded {
    let data = FileManager.default.contents(atPath: path) ?? Data()
    let loaded = Self.parse(data)
    let liveBytes = loaded.records.values.reduce(0) { $0 + 8 + $1.count }
    try state.withLock { s throws(FSError) in
      s.live = loaded.records.mapValues { 8 + $0.count }
      if liveBytes != data.count || access(path, F_OK) != 0 {
        try rewrite(&s, with: loaded.records.keys.sorted().map { loaded.records[$0]! })
      } else {
        try open(&s)
        s.size = data.count
      }
    }
    return loaded
  }

  // MARK: writing

  /// Appends the records of `changes` and the removals of `removed`, in one write; `sync`:
  /// fsynced before it returns (else the page cache holds them, and a group commit makes them
  /// last).
  func append(_ changes: [PendingChange], removed: [UInt64] = [], sync: Bool) throws(FSError) {
    var frames = Data()
    var sizes: [(UInt64, Int?)] = []
    var payloads: [Data] = []
    for change in changes {
      guard let payload = try? change.record() else { throw FSError(EIO) }
      payloads.append(payload)
      sizes.append((change.sequence, 8 + payload.count))
    }
    // Records written together are one frame: a power loss that cuts the append keeps none of
    // them, never a prefix (a rename's new name without its old name's delete).
    if payloads.count == 1 {
      Self.frame(payloads[0], into: &frames)
    } else if !payloads.isEmpty {
      var together = Data("{\"together\":[".utf8)
      for (i, payload) in payloads.enumerated() {
        if i > 0 { together.append(UInt8(ascii: ",")) }
        together.append(payload)
      }
      together.append(contentsOf: "]}".utf8)
      Self.frame(together, into: &frames)
    }
    for sequence in removed {
      let payload = Data("{\"removed\":\(sequence)}".utf8)
      Self.frame(payload, into: &frames)
      sizes.append((sequence, nil))
    }
    guard !frames.isEmpty else { return }
    try state.withLock { s throws(FSError) in
      if s.fd < 0 { try open(&s) }
      let written = frames.withUnsafeBytes { disk.write(s.fd, $0) }
      guard written == frames.count else {
        let e = written < 0 ? errno : ENOSPC
        // A part written would be read as a record cut short: the file goes back to its end.
        if written > 0 { _ = disk.truncate(s.fd, to: Int64(s.size)) }
        throw FSError(e)
      }
      s.size += frames.count
      for (sequence, size) in sizes { s.live[sequence] = size }
      if sync, disk.fsync(s.fd) != 0 { throw FSError(errno) }
      let liveBytes = s.live.values.reduce(0, +)
      if s.size > Self.compactFrom && liveBytes * 2 < s.size {
        // Best effort: a failed rewrite leaves the file as it was, dead frames and all.
        try? compact(&s)
      }
    }
  }

  private static func frame(_ payload: Data, into frames: inout Data) {
    var crc = CRC32C()
    payload.withUnsafeBytes { crc.update($0) }
    frames.appendLittleEndian(UInt32(payload.count))
    frames.appendLittleEndian(crc.value)
    frames.append(payload)
  }

  private func open(_ s: inout State) throws(FSError) {
    let fd = disk.open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
    guard fd >= 0 else { throw FSError(errno) }
    if s.fd >= 0 { disk.close(s.fd) }
    s.fd = fd
  }

  /// The live records, read back from the file, written to a new file that takes its place.
  private func compact(_ s: inout State) throws(FSError) {
    try beforeRewrite?()
    let loaded = Self.parse(FileManager.default.contents(atPath: path) ?? Data())
    let kept = loaded.records.keys.filter { s.live[$0] != nil }.sorted().map { loaded.records[$0]! }
    try rewrite(&s, with: kept)
    s.live = s.live.filter { loaded.records[$0.key] != nil }
  }

  /// The file replaced by one holding `payloads`: written under a temporary name, fsynced,
  /// renamed, and the folder fsynced.
  private func rewrite(_ s: inout State, with payloads: [Data]) throws(FSError) {
    var frames = Data()
    for payload in payloads { Self.frame(payload, into: &frames) }
    try DurableFile(disk: disk).replace(path, with: frames).throwingIfNotDurable()
    try open(&s)
    s.size = frames.count
  }
}

extension DurableFile.Placed {
  /// A folder that could not be synced is EIO here: the caller cannot say "in place" instead.
  func throwingIfNotDurable() throws(FSError) {
    if case .folderNotSynced(let e) = self { throw FSError(e) }
  }
}

extension Data {
  fileprivate func littleEndianUInt32(at index: Index) -> UInt32 {
    var value: UInt32 = 0
    for i in 0..<4 { value |= UInt32(self[index + i]) << (8 * i) }
    return value
  }

  fileprivate mutating func appendLittleEndian(_ value: UInt32) {
    for i in 0..<4 { append(UInt8(truncatingIfNeeded: value >> (8 * i))) }
  }
}
