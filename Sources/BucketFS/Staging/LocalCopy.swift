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
    case complete(checksums: BlockChecksums?)
  }

  let name: String
  let metadata: StorageMetadata
  /// Where the data file is once complete.
  let dataPath: String
  private(set) var state: State

  static func filling(_ copy: PartialCopy, dataPath: String) -> LocalCopy {
    LocalCopy(name: copy.name, metadata: copy.metadata, dataPath: dataPath, state: .filling(copy))
  }

  static func complete(name: String, metadata: StorageMetadata, dataPath: String, checksums: BlockChecksums?) -> LocalCopy {
    LocalCopy(name: name, metadata: metadata, dataPath: dataPath, state: .complete(checksums: checksums))
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
    if case .complete(let checksums) = state { return checksums }
    return nil
  }

  /// filling → complete, once the copy was verified and renamed into place. False (nothing
  /// changes) from any other state.
  mutating func completed(checksums: BlockChecksums) -> Bool {
    guard case .filling = state else { return false }
    state = .complete(checksums: checksums)
    return true
  }

  /// complete without checksums → complete with them, once verified whole on first use.
  mutating func checked(_ checksums: BlockChecksums) {
    guard case .complete(nil) = state else { return }
    state = .complete(checksums: checksums)
  }

  /// What the rest of the mount sees of a complete copy.
  var entry: StagingArea.Entry { StagingArea.Entry(name: name, metadata: metadata, dataPath: dataPath) }
}
