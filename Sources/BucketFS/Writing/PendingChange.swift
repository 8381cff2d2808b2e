import Foundation
import StorageCore

/// One change made through a writable mount and not yet in the bucket, as it is kept on disk
/// (`NNNNNNNNNNNN.json`, with the bytes of an upload beside it in `NNNNNNNNNNNN.data`).
struct PendingChange: Codable, Sendable, Equatable {
  enum Kind: String, Codable, Sendable {
    /// The bytes (and content type, custom metadata and time) of a new version.
    case upload
    case delete
    /// Content type and custom metadata of the object as it is (`setfattr`).
    case metadata
    /// Another object's version (`source`) copied under this name by the server: a rename
    /// where the bucket can copy, so the bytes need not be here.
    case copy

    /// Whether the change puts a new version under its name.
    var putsVersion: Bool { self == .upload || self == .copy }
  }

  /// The object version a `.copy` puts under `name`.
  struct Source: Codable, Sendable, Equatable {
    var name: String
    var generation: Int64
    var size: Int64
    var crc32c: String?
    var md5Hash: String?
  }

  /// What the object must be for the change to apply: nothing overwrites or deletes a version
  /// the change was not based on.
  enum Base: Codable, Sendable, Equatable {
    /// This generation (0: no object by that name).
    case generation(Int64)
    /// Whatever is there (folder placeholders).
    case any
    /// What this queue's previous change of the same name left there.
    case previous
  }

  /// Where a change is in its life. Kept on disk as the `state`, `produced`, `conflictName` and
  /// `error` of records written before the life was one value, so that any mount reads any queue.
  enum Life: Sendable, Equatable {
    /// Waiting its turn (or for the server to answer again).
    case pending
    /// Being carried out; a restart carries it out again.
    case started
    /// A newer upload of the name took its place before it started. Written in the same append
    /// as the newer one's record, so a load that finds it knows the newer one took over: it is
    /// dropped while that one stands (queued with sound bytes, or carried out), and waits again
    /// only when that one's bytes did not last.
    case replaced(by: UInt64)
    /// Carried out, with what that left; the record goes once the changes after it know.
    case done(Effect)
    /// Refused for good, and why; kept, so that nothing is lost, until removed by hand.
    case failed(String)
  }

  /// What a change carried out left under its name.
  enum Effect: Sendable, Equatable {
    /// This generation (0: no object, after a delete).
    case generation(Int64)
    /// Whatever was there: the change was not applied (what it was based on had changed) or
    /// found it done by someone else. A change based on it cannot know a generation either.
    case unknown
    /// Someone else's version: ours went beside it, under this name, as this generation of it
    /// (nil in records written before it was kept). A change based on this one goes there too,
    /// so that a writer who keeps going after a conflict grows one copy, not one per close.
    case conflict(String, generation: Int64? = nil)
    /// This generation, holding another writer's newer version with the bytes this change
    /// appended after it (`Rebase`): not the bytes queued, so a change based on those that only
    /// appends is carried onto it too, and any other goes beside it.
    case merged(Int64)

    /// The generation a change based on this one starts from; nil sends it beside the object.
    var generation: Int64? {
      if case .generation(let g) = self { g } else { nil }
    }
  }

  /// An upload that only appended to the version it is based on, carried onto a version
  /// another writer made since: that version's bytes, then ours from `appendedFrom` on, uploaded
  /// with a precondition on it. Kept in the record before that upload is sent, so that after a
  /// crash the change knows what it was carrying, and that an upload whose answer was lost is
  /// found in the bucket (the same size and CRC32C) instead of appended twice.
  struct Rebase: Codable, Sendable, Equatable {
    /// The generation carried onto (nil: whatever the bucket holds when it runs; 0: none).
    var onto: Int64?
    /// The size and CRC32C of what was put together, once it was.
    var size: Int64?
    var crc32c: UInt32?
  }

  var sequence: UInt64
  var kind: Kind
  /// The object name relative to the mount's prefix.
  var name: String
  var base: Base
  var contentType: String?
  /// Seconds since 1970; kept in the object's custom metadata (`mtime`, as rclone writes it).
  var mtime: Timestamp?
  /// Custom metadata entries to set (`user.meta.KEY`).
  var custom: [String: String]?
  /// The resumable session of a large upload, kept so that an upload cut short by a crash
  /// continues where the server has it instead of starting over.
  var sessionURL: String?
  var source: Source?
  var life: Life = .pending
  /// An upload's bytes as they were queued: checked when a later mount reads the queue, so
  /// that a truncated or changed `.data` file is never uploaded as the object (nil in records
  /// written before they were kept).
  var dataSize: Int64?
  var dataCRC32C: UInt32?
  /// An upload whose bytes are an overlaid edit's file: what the program wrote, over holes
  /// that the base version fills (`BaseFill`) before the bytes are uploaded or read. Nil once
  /// they are whole (then `dataCRC32C` vouches for them).
  var overlay: EditOverlay?
  /// Set when the change only appended: the bytes from this offset on are what it appended,
  /// those before it the bytes of the version it is based on. Such an upload is carried onto
  /// whatever version the bucket holds when it runs (`rebase`) instead of going beside it.
  var appendedFrom: Int64?
  /// Where the appended bytes are being carried (nil: onto the base, as queued).
  var rebase: Rebase?
  /// A rename's delete of its old name, where the new name's bytes are an upload's (this
  /// sequence): a later mount drops the delete when those bytes did not outlast a power loss,
  /// and the object keeps its old name instead of having none.
  var renamedInto: UInt64?
  /// The conflict copy the change before it went to, while this one is based on that one
  /// (`Base.previous`): it grows that copy rather than start another. Kept in the record, as
  /// the queue's memory of what the change before left is not: after `kill -9`, a writer that
  /// kept going after a conflict made a second copy.
  var grows: ConflictCopy?

  struct ConflictCopy: Codable, Sendable, Equatable {
    var name: String
    var generation: Int64
  }

  var fileName: String { Self.fileName(of: sequence) }
  static func fileName(of sequence: UInt64) -> String { sequence.zeroPadded(12) }

  /// Not yet done, replaced or refused: a worker may take it, or has.
  var isUnfinished: Bool { life == .pending || life == .started }
  /// Still the queue's (refused ones too): the mount shows what it leaves.
  var isQueued: Bool { isUnfinished || isFailed }
  var isFailed: Bool {
    if case .failed = life { true } else { false }
  }
  /// Carried out onto another writer's version, with what it appended after it (`Rebase`).
  var wasMerged: Bool {
    if case .done(.merged) = life { true } else { false }
  }
  /// Where our bytes went when the bucket held another version.
  var conflictName: String? {
    if case .done(.conflict(let name, _)) = life { name } else { nil }
  }
}

extension PendingChange {
  private enum CodingKeys: String, CodingKey {
    case sequence, kind, name, base, contentType, mtime, custom, sessionURL, source, state, error, produced, conflictName, dataSize, dataCRC32C, overlay
    case replacedBy, appendedFrom, rebase, merged, renamedInto, grows
  }

  init(from decoder: any Decoder) throws {
    let c = try decoder.container(keyedBy: CodingKeys.self)
    sequence = try c.decode(UInt64.self, forKey: .sequence)
    kind = try c.decode(Kind.self, forKey: .kind)
    name = try c.decode(String.self, forKey: .name)
    base = try c.decode(Base.self, forKey: .base)
    contentType = try c.decodeIfPresent(String.self, forKey: .contentType)
    // Whole seconds and nanoseconds; a record written before times were exact has a Double.
    if let exact = try? c.decodeIfPresent([Int64].self, forKey: .mtime), exact.count == 2 {
      mtime = Timestamp(seconds: exact[0], nanoseconds: exact[1])
    } else {
      mtime = try c.decodeIfPresent(Double.self, forKey: .mtime).map { Timestamp($0) }
    }
    custom = try c.decodeIfPresent([String: String].self, forKey: .custom)
    sessionURL = try c.decodeIfPresent(String.self, forKey: .sessionURL)
    source = try c.decodeIfPresent(Source.self, forKey: .source)
    dataSize = try c.decodeIfPresent(Int64.self, forKey: .dataSize)
    dataCRC32C = try c.decodeIfPresent(UInt32.self, forKey: .dataCRC32C)
    overlay = try c.decodeIfPresent(EditOverlay.self, forKey: .overlay)
    appendedFrom = try c.decodeIfPresent(Int64.self, forKey: .appendedFrom)
    rebase = try c.decodeIfPresent(Rebase.self, forKey: .rebase)
    renamedInto = try c.decodeIfPresent(UInt64.self, forKey: .renamedInto)
    grows = try c.decodeIfPresent(ConflictCopy.self, forKey: .grows)
    switch try c.decodeIfPresent(String.self, forKey: .state) ?? "pending" {
    case "pending": life = .pending
    case "started": life = .started
    case "replaced": life = .replaced(by: try c.decode(UInt64.self, forKey: .replacedBy))
    case "done":
      if let conflict = try c.decodeIfPresent(String.self, forKey: .conflictName) {
        life = .done(.conflict(conflict, generation: try c.decodeIfPresent(Int64.self, forKey: .produced)))
      } else if try c.decodeIfPresent(Bool.self, forKey: .merged) == true {
        life = .done(.merged(try c.decode(Int64.self, forKey: .produced)))
      } else {
        life = .done(try c.decodeIfPresent(Int64.self, forKey: .produced).map(Effect.generation) ?? .unknown)
      }
    case "failed": life = .failed(try c.decodeIfPresent(String.self, forKey: .error) ?? "refused")
    case let other:
      throw DecodingError.dataCorruptedError(forKey: .state, in: c, debugDescription: "no change is \(other)")
    }
  }

  func encode(to encoder: any Encoder) throws {
    var c = encoder.container(keyedBy: CodingKeys.self)
    try c.encode(sequence, forKey: .sequence)
    try c.encode(kind, forKey: .kind)
    try c.encode(name, forKey: .name)
    try c.encode(base, forKey: .base)
    try c.encodeIfPresent(contentType, forKey: .contentType)
    try c.encodeIfPresent(mtime.map { [$0.seconds, Int64($0.nanoseconds)] }, forKey: .mtime)
    try c.encodeIfPresent(custom, forKey: .custom)
    try c.encodeIfPresent(sessionURL, forKey: .sessionURL)
    try c.encodeIfPresent(source, forKey: .source)
    try c.encodeIfPresent(dataSize, forKey: .dataSize)
    try c.encodeIfPresent(dataCRC32C, forKey: .dataCRC32C)
    try c.encodeIfPresent(overlay, forKey: .overlay)
    try c.encodeIfPresent(appendedFrom, forKey: .appendedFrom)
    try c.encodeIfPresent(rebase, forKey: .rebase)
    try c.encodeIfPresent(renamedInto, forKey: .renamedInto)
    try c.encodeIfPresent(grows, forKey: .grows)
    switch life {
    case .pending: try c.encode("pending", forKey: .state)
    case .replaced(let newer):
      try c.encode("replaced", forKey: .state)
      try c.encode(newer, forKey: .replacedBy)
    case .started: try c.encode("started", forKey: .state)
    case .done(let effect):
      try c.encode("done", forKey: .state)
      switch effect {
      case .generation(let g): try c.encode(g, forKey: .produced)
      case .unknown: break
      case .merged(let g):
        try c.encode(g, forKey: .produced)
        try c.encode(true, forKey: .merged)
      case .conflict(let name, let generation):
        try c.encode(name, forKey: .conflictName)
        try c.encodeIfPresent(generation, forKey: .produced)
      }
    case .failed(let why):
      try c.encode("failed", forKey: .state)
      try c.encode(why, forKey: .error)
    }
  }
}

extension StorageMetadata {
  /// Whether this version has the bytes of `source` (same size and hash).
  func holdsBytes(of source: PendingChange.Source?) -> Bool {
    guard let source, size == source.size else { return false }
    if let crc = source.crc32c, let mine = crc32c { return crc == mine }
    if let md5 = source.md5Hash, let mine = md5Hash { return md5 == mine }
    return false
  }

  /// Whether this version has the bytes of the file at `path`: the same size and CRC32C (else
  /// MD5). A version with neither hash cannot be told apart, and is not.
  func holdsBytes(ofFile path: String) -> Bool {
    var st = stat()
    guard crc32c != nil || md5Hash != nil, stat(path, &st) == 0, Int64(st.st_size) == size else { return false }
    return CopyVerification.checkWhole(path: path, metadata: self) != nil
  }
}
