import BucketFS
import Foundation
import StorageCore
import Synchronization

/// `bucketfs mv SRC DST` and `bucketfs cp` between two bucket URLs: copies done by the server
/// (GCS `rewrite`, continued until done) without the bytes passing through here; over the
/// Firebase API, which has no server-side copy, the bytes go through a temporary file.
enum MoveCommand {
  static let usage = """
    usage: bucketfs mv SRC DST
    Moves objects within or between buckets: SRC and DST are gs:// URLs. SRC may be an object, a
    prefix (every object under it moves, keeping the names below it) or a wildcard (every match
    moves into the folder DST, by its last name). Within a bucket over the GCS API each object
    moves in one request (objects.move, no copy), only while it is the generation mv read;
    elsewhere, or where the server has no move, it is copied by the server, then the source is
    deleted only if it is still the generation that was copied. A source rewritten meanwhile is
    kept, and mv exits 1 saying so. A folder of a bucket with a hierarchical namespace moves to a
    new name in one folders.rename on the server (everything in it at once, nothing copied),
    awaited with its progress; into a folder that exists, object by object as above.
    """

  /// One object to copy: from, to.
  struct Job: Sendable {
    let source: StorageReference
    let target: StorageReference
    /// The source's metadata when the plan just read it (one object); else it is read right
    /// before its copy, so a long move copies what each source is then.
    let known: StorageMetadata?
  }

  static func run(_ args: inout Arguments, _ client: ClientOptions) async throws(CommandError) -> Int32 {
    let paths = try args.positionals()
    guard paths.count == 2, CopyCommand.isRemote(paths[0]), CopyCommand.isRemote(paths[1]) else { throw .usage(usage) }
    let jobs = try await plan(from: paths[0], to: paths[1], client, recursive: true, renamingFolder: renamedAsFolder)
    // Only a folder renamed on the server in one step leaves nothing to move.
    if jobs.isEmpty { return 0 }
    return try await carryOut(jobs, deleteSources: true)
  }

  /// The copies `SRC DST` stands for. `recursive`: a SRC that is no object is a prefix.
  /// `renamingFolder`: tried first for such a SRC, with the folder it would move to; true when
  /// it renamed the folder, and then there is nothing to copy (no jobs).
  static func plan(
    from src: String, to dst: String, _ client: ClientOptions, recursive: Bool,
    renamingFolder: ((StorageReference, StorageReference) async throws(CommandError) -> Bool)? = nil
  ) async throws(CommandError) -> [Job] {
    let target = try await client.reference(dst)
    let intoFolder = dst.endsWithSlash || target.fullPath.isEmpty
    if let matches = try await WildcardMatches.expand(src, client, objectsOnly: true) {
      let refs = try matches.references(for: src)
      let names = try WildcardMatches.distinctLastNames(refs, into: dst)
      return zip(refs, names).map { Job(source: $0.0, target: target.child($0.1), known: nil) }
    }
    let source = try await client.reference(src)
    do {
      let metadata = try await source.getMetadata()
      return [Job(source: source, target: intoFolder ? target.child(source.name) : target, known: metadata)]
    } catch where error.code == .objectNotFound && recursive {
      // Not an object: the objects under it, as `gsutil mv` moves a folder.
    } catch {
      throw .storage(error)
    }
    if let renamingFolder, try await renamingFolder(source, intoFolder ? target.child(source.name) : target) { return [] }
    let names: [String]
    do {
      names = try await ListPage.all { token async throws(StorageError) in try await source.listPage(delimiter: nil, pageToken: token) }.items
    } catch {
      throw .storage(error)
    }
    guard !names.isEmpty else { throw .storage(StorageError(code: .objectNotFound, object: src, detail: "no such object or prefix")) }
    let base = source.fullPath + "/"
    let root = source.root()
    // Named as the bucket names them, not through `child`, which drops a trailing "/": the
    // folder's own placeholder (`a/`) and those of folders in it stay placeholders under the
    // new name (they became files `n`, `n/b`).
    let into = target.fullPath.isEmpty ? "" : target.fullPath + "/"
    return names.map { Job(source: root.object(named: $0), target: target.root().object(named: into + ($0.afterBytePrefix(base) ?? $0)), known: nil) }
  }

  /// Copies every job, 16 at once; with `deleteSources`, deletes each source once copied.
  static func carryOut(_ jobs: [Job], deleteSources: Bool) async throws(CommandError) -> Int32 {
    let kept = KeptSources()
    let noMove = Atomic<Bool>(false)
    do {
      try await forEachConcurrently(jobs, limit: CopyCommand.parallelTransfers) { job throws(StorageError) in
        if deleteSources, job.source.bucket == job.target.bucket, !noMove.load(ordering: .relaxed) {
          // One request where the server moves: the source goes only as the generation read.
          let metadata: StorageMetadata
          if let known = job.known { metadata = known } else { metadata = try await job.source.getMetadata() }
          do throws(StorageError) {
            _ = try await job.source.move(to: job.target, ifSourceGenerationMatch: metadata.generation, preconditions: Preconditions())
            return
          } catch where error.httpStatus == StorageReference.moveUnsupportedStatus {
            noMove.store(true, ordering: .relaxed)
          } catch where error.code == .preconditionFailed {
            kept.add(job.source.fullPath)
            return
          }
        }
        let generation = try await copy(job)
        guard deleteSources else { return }
        do throws(StorageError) {
          try await job.source.delete(preconditions: Preconditions(ifGenerationMatch: generation))
        } catch where error.code == .preconditionFailed || error.code == .objectChanged {
          kept.add(job.source.fullPath)
        } catch where error.code == .objectNotFound {}
      }
    } catch {
      throw .storage(error)
    }
    for name in kept.names {
      FileHandle.standardError.write(Data("bucketfs mv: kept \(TerminalText.visible(name)): it changed after it was read\n".utf8))
    }
    return kept.names.isEmpty ? 0 : ExitStatus.failure
  }

  /// Copies one object; returns the source generation that was copied.
  private static func copy(_ job: Job) async throws(StorageError) -> Int64 {
    let metadata: StorageMetadata
    if let known = job.known { metadata = known } else { metadata = try await job.source.getMetadata() }
    do throws(StorageError) {
      _ = try await job.source.copy(to: job.target, generation: metadata.generation, preconditions: Preconditions())
    } catch where error.code == .invalidArgument {
      // The Firebase API: through a temporary file, with the source's metadata.
      let file = FileManager.default.temporaryDirectory.appendingPathComponent("bucketfs-mv-\(UUID().uuidString)")
      defer { try? FileManager.default.removeItem(at: file) }
      let download = job.source.write(toFile: file, generation: metadata.generation, storedBytes: true)
      _ = try await download.result()
      let carried = StorageMetadata()
      carried.contentType = metadata.contentType
      carried.contentEncoding = metadata.contentEncoding
      carried.cacheControl = metadata.cacheControl
      carried.contentDisposition = metadata.contentDisposition
      carried.contentLanguage = metadata.contentLanguage
      carried.customMetadata = metadata.customMetadata
      _ = try await job.target.putFileAsync(from: file, metadata: carried)
    }
    return metadata.generation
  }
}

private final class KeptSources: Sendable {
  private let kept = Mutex<[String]>([])
  func add(_ name: String) { kept.withLock { $0.append(name) } }
  var names: [String] { kept.withLock { $0.sorted() } }
}
