import BucketFS
import Foundation
import StorageCore

/// `bucketfs mv` of a folder within a bucket with a hierarchical namespace: one `folders.rename`
/// on the server (everything in it moves at once, no object is copied), awaited with its progress.
extension MoveCommand {
  /// Renames folder `source` (which `plan` found is no object) to `target` in one step when it
  /// can: both in one bucket over the GCS API, that bucket hierarchical, `source` a folder
  /// resource and `target` not there yet. False when it cannot, with nothing changed: the
  /// caller moves object by object (into a folder that exists, too, as gsutil merges).
  static func renamedAsFolder(_ source: StorageReference, _ target: StorageReference) async throws(CommandError) -> Bool {
    guard source.storage.api == .gcs, source.bucket == target.bucket, !source.fullPath.isEmpty, !target.fullPath.isEmpty,
      !(target.fullPath + "/").hasBytePrefix(source.fullPath + "/")
    else { return false }
    do throws(StorageError) {
      // A folder only a placeholder makes (or no folder at all) is no resource; a target that
      // is there is merged into, object by object (asked first: a refused rename is taken for
      // a retried one and waited on).
      guard try await source.bucketIsHierarchical(), try await source.folderExists(), !(try await target.folderExists()) else { return false }
      let label = "bucketfs mv: \(TerminalText.visible(source.description)) → \(TerminalText.visible(target.description))"
      let terminal = isatty(2) == 1
      try await source.renameFolder(to: target) { percent in
        if terminal { FileHandle.standardError.write(Data("\r\(label) \(percent)%\u{1B}[K".utf8)) }
      }
      if terminal { FileHandle.standardError.write(Data("\n".utf8)) }
      return true
    } catch where error.httpStatus == 409 || error.code == .objectNotFound {
      // The target is there (objects or a folder), or the source went meanwhile: object by object.
      return false
    } catch {
      throw .storage(error)
    }
  }
}
