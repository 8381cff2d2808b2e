// The local copy of one object version in the staging folder, and the only ways it changes.
//
//   absent ──open (large)──▶ filling ──last block, hash matches──▶ complete
//     ▲  ▲                      │                                    │
//     │  └──given up, damaged───┘                                    │
//     └──────────────── evicted, or damaged on disk ─────────────────┘
//   absent ──first read (small), hash matches──▶ complete
//
// A name written through a writable mount is not a staged copy but a change in the write-back
// queue (dirty while open, then pending, uploading, conflict or failed; docs/design.md draws
// both). The index (StagingIndex) holds the copies; CopyVerification checks them.
import Foundation
import StorageCore

struct LocalCopy: Sendable {
  enum State: Sendable {
    /// Being fetched: reads and the filler write into `PartialCopy`, under a temporary name.
    case filling(PartialCopy)
    /// Verified whole and renamed into place; every read checks the blocks it touches against
    /// `checksums` (nil: made by a version that kept none, verified whole on first use).
    /// `identity`: the data file as it was when last verified (nil: not known), which a copy
    /// must still be to be read by the kernel itself (passthrough).
    case complete(checksums: BlockChecksums?, identity: CopyIdentity?)
  }

  let name: String
  let metadata: StorageMetadata
  /// Where the data file is once complete.
  let dataPath: String
  private(set) var state: State

  static func filling(_ copy: PartialCopy, dataPath: String) -> LocalCopy {
    LocalCopy(name: copy.name, metadata: copy.metadata, dataPath: dataPath, state: .filling(copy))
  }

  static func complete(
    name: String, metadata: StorageMetadata, dataPath: String, checksums: BlockChecksums?, identity: CopyIdentity?
  ) -> LocalCopy {
    LocalCopy(name: name, metadata: metadata, dataPath: dataPath, state: .complete(checksums: checksums, identity: identity))
  }

  var filling: PartialCopy? {
    if case .filling(let copy) = state { return copy }
    return nil
  }

  var isComplete: Bool {
    if case .complete = state { return true }
    return false
  }

  var checksums: BlockChecksums? {
    if case .complete(let checksums, _) = state { return checksums }
    return nil
  }

  var identity: CopyIdentity? {
    if case .complete(_, let identity) = state { return identity }
    return nil
  }

  /// filling → complete, once the copy was verified and renamed into place. False (nothing
  /// changes) from any other state.
  mutating func completed(checksums: BlockChecksums, identity: CopyIdentity?) -> Bool {
    guard case .filling = state else { return false }
    state = .complete(checksums: checksums, identity: identity)
    return true
  }

  /// complete → complete, verified whole again (on first use without checksums, or before a
  /// passthrough open of a file that changed): its checksums and its file as it is now.
  mutating func checked(_ checksums: BlockChecksums, identity: CopyIdentity?) {
    guard case .complete = state else { return }
    state = .complete(checksums: checksums, identity: identity)
  }

  /// What the rest of the mount sees of a complete copy.
  var entry: StagingArea.Entry { StagingArea.Entry(name: name, metadata: metadata, dataPath: dataPath) }
}
