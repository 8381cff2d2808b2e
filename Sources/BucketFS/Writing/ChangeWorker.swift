// Carrying one queued change out on the bucket, each with a precondition naming the generation it
// was based on, so that nothing is overwritten or deleted that the change did not see. A change
// whose base moved on the server is not forced: an upload or copy goes beside the object under a
// conflict name (`NAME.conflict-YYYYMMDDTHHMMSSZ`), a delete or metadata change is not applied;
// both are logged. The worker touches neither the queue's records nor its state: it says how the
// change ended (`Verdict`) and `WriteBackQueue` records that.
import Foundation
import StorageCore

struct ChangeWorker: Sendable {
  /// A change as a worker takes it, with what its base stands for at that moment.
  struct Taken: Sendable {
    var change: PendingChange
    var precondition: Precondition
    /// A rename's copy of this name (a delete's) that the bucket refused for good.
    var refusedCopy: String?
    /// A copy whose source's delete is queued right after it (a rename): one move may do both.
    var moves = false
  }

  enum Precondition: Sendable, Equatable {
    /// The bucket must hold this generation (0: nothing by the name).
    case generation(Int64)
    /// Whatever is there (folder placeholders).
    case any
    /// Based on a change that went beside the object: this one goes beside it too.
    case beside
    /// Based on a change that went beside the object as this generation of conflict copy
    /// `name`: this one replaces that copy (it holds those bytes and more), or goes beside
    /// again when the copy changed meanwhile.
    case besideAt(String, generation: Int64)
  }

  /// How one try at a change ended.
  enum Verdict: Sendable {
    /// Carried out: what it left, the object's new attributes when there are, and, for a change
    /// not applied, why (logged).
    case done(PendingChange.Effect, StorageMetadata?, skipped: String? = nil)
    /// A rename's copy carried out as one move: the source is gone too, so the delete queued
    /// after it is done without a request.
    case moved(PendingChange.Effect, StorageMetadata?)
    /// Refused for good: kept in the queue, never tried again by itself.
    case refused(BucketError)
    /// To be tried again after a pause (the server away, a status a retry may cure).
    case retryLater(String)

    /// StorageCore's one rule for what a retry may cure (`Backoff.isRetryable`), and 401, which
    /// fresh credentials may; the server's word on the request itself (a refused name, a denied
    /// write) is final.
    static func of(_ error: BucketError) -> Verdict {
      let transient = error.httpStatus.map { Backoff.isRetryable(status: $0) || $0 == 401 } ?? true
      if ErrnoMapping.isServerGone(error) || (transient && (error.code == .unknown || error.code == .unauthenticated)) {
        return .retryLater(error.detail)
      }
      return .refused(error)
    }
  }

  let client: any ObjectClient
  /// Where an upload's bytes are.
  let dataPath: @Sendable (PendingChange) -> String
  /// The folder placeholder's (empty) bytes, made beside the record.
  let writeEmptyBytes: @Sendable (PendingChange) throws(FSError) -> Void
  /// A large upload's resumable session, to keep with the change as soon as the server opens it.
  let sessionOpened: @Sendable (PendingChange, String?) -> Void
  /// An append's `Rebase`, to record (lasting) before what it put together is sent.
  let rebased: @Sendable (PendingChange) throws(FSError) -> Void
  let log: @Sendable (String) -> Void

  static let notApplied = "it changed on the server since it was read"

  func carryOut(_ taken: Taken) async -> Verdict {
    let change = taken.change
    if change.name.endsWithSlash && change.kind == .metadata { return await folderMetadata(change) }
    let base: Int64? =
      switch taken.precondition {
      case .generation(let g): g
      case .any, .beside, .besideAt: nil
      }
    // An append being carried onto a newer version goes on doing so, whatever it was based on.
    if change.kind == .upload && change.rebase != nil { return await merged(change) }
    do throws(BucketError) {
      switch taken.precondition {
      case .beside:
        guard change.kind.putsVersion else { return .done(.unknown, nil, skipped: Self.notApplied) }
        return try await beside(change)
      case .besideAt(let copy, let generation):
        guard change.kind.putsVersion else { return .done(.unknown, nil, skipped: Self.notApplied) }
        return try await beside(change, growing: copy, at: generation)
      case .generation, .any: break
      }
      switch change.kind {
      case .upload:
        // A folder's placeholder: on a hierarchical bucket the folder itself is made first (a
        // placeholder alone leaves none that other clients see or that lasts when emptied).
        if change.name.endsWithSlash, try await client.foldersAreResources() { try await client.createFolder(change.name) }
        var custom = change.custom ?? [:]
        if let mtime = change.mtime { custom["mtime"] = KeptTime.format(mtime) }
        let session = UploadSession(url: change.sessionURL) { url in sessionOpened(change, url) }
        let m = try await client.upload(
          change.name, file: dataPath(change), contentType: change.contentType ?? ContentType.infer(fromName: change.name),
          custom: custom, ifGenerationMatch: base, session: session)
        return .done(.generation(m.generation), m)
      case .copy:
        let (m, moved) = try await copied(change, to: change.name, ifGenerationMatch: base, moves: taken.moves)
        return moved ? .moved(.generation(m.generation), m) : .done(.generation(m.generation), m)
      case .metadata:
        let m = try await client.updateMetadata(change.name, contentType: change.contentType, custom: change.custom ?? [:], ifGenerationMatch: base)
        return .done(.generation(m.generation), m)
      case .delete:
        if let copy = taken.refusedCopy {
          // A rename whose copy the bucket refused: the old name keeps the only bytes there are.
          return .done(.unknown, nil, skipped: "its copy to \(copy.debugDescription) was refused, so it stays")
        }
        do throws(BucketError) {
          try await client.delete(change.name, ifGenerationMatch: base)
        } catch where error.code == .objectNotFound {
          // Gone already: what the change wanted.
        }
        if change.name.endsWithSlash, try await client.foldersAreResources() { return try await deleteFolder(change) }
        return .done(.generation(0), nil)
      }
    } catch where error.code == .objectNotFound && change.kind == .copy {
      if taken.moves, let found = try? await client.metadata(of: change.name), found.holdsBytes(of: change.source) {
        // A move whose answer was lost (or done before a kill -9) and then tried again: the
        // source is gone because the name holds it.
        let m = await keepTime(change, found, at: change.name)
        return .moved(.generation(m.generation), m)
      }
      let source = change.source.map { "\($0.name.debugDescription) (generation \($0.generation))" } ?? "the source"
      return .of(BucketError(code: .objectNotFound, object: change.name, detail: "\(source) is no longer in the bucket: it changed or was deleted there"))
    } catch where error.code == .preconditionFailed {
      return await baseMoved(change, moves: taken.moves)
    } catch {
      return .of(error)
    }
  }

  /// A folder's delete on a hierarchical bucket, its placeholder gone: the folder itself. One
  /// that holds something on the server (another client put it there after the mount looked)
  /// is kept, with what it holds.
  private func deleteFolder(_ change: PendingChange) async throws(BucketError) -> Verdict {
    do throws(BucketError) {
      try await client.deleteFolder(change.name)
    } catch where error.code == .objectNotFound {
      // Gone already.
    } catch where error.httpStatus == 409 {
      return .done(.generation(0), nil, skipped: "the folder holds what another client put in it, so the server keeps it")
    }
    return .done(.generation(0), nil)
  }

  /// The bucket did not hold the version `change` was based on.
  private func baseMoved(_ change: PendingChange, moves: Bool = false) async -> Verdict {
    if change.name.endsWithSlash {
      // A folder placeholder someone else made (or removed) meanwhile: the folder is as wanted,
      // and gets the entries this one carried.
      guard change.kind == .upload, let custom = change.custom, !custom.isEmpty else { return .done(.unknown, nil) }
      var asMetadata = change
      asMetadata.kind = .metadata
      return await folderMetadata(asMetadata)
    }
    if change.kind == .copy, let found = try? await client.metadata(of: change.name), found.holdsBytes(of: change.source) {
      // A retried copy whose first try went through: the name holds what the copy put there.
      let m = await keepTime(change, found, at: change.name)
      return .done(.generation(m.generation), m)
    }
    if change.kind == .upload, let found = try? await client.metadata(of: change.name), found.holdsBytes(ofFile: dataPath(change)) {
      // An upload whose answer was lost (a reset, a stall, kill -9 before the answer): the
      // retry's precondition fails on the version the first try made. The name holds our bytes,
      // so it is done, not a conflict.
      return .done(.generation(found.generation), found)
    }
    // Only appended: carried onto the version there now, not beside it.
    if change.kind == .upload && change.appendedFrom != nil { return await merged(change) }
    if change.kind == .delete {
      // A delete whose object is gone: what it wanted, most often its own first try whose
      // answer was lost (a reset, kill -9). A server may check the precondition before the
      // object's existence (Firebase's v0 answers 412 there, GCS 404); taken for "changed",
      // it sent every later change of the name beside as conflict copies.
      do throws(BucketError) {
        _ = try await client.metadata(of: change.name)
      } catch where error.code == .objectNotFound {
        return .done(.generation(0), nil)
      } catch {
        return .of(error)
      }
    }
    guard change.kind.putsVersion else { return .done(.unknown, nil, skipped: Self.notApplied) }
    if moves, let source = change.source, (try? await client.metadata(of: source.name))?.generation != source.generation {
      // The move's source is no longer the version the rename saw: nothing moved, and the
      // other writer's version stays where it is (the rename's delete is not carried out).
      return .of(BucketError(code: .objectNotFound, object: change.name, detail: "\(source.name.debugDescription) (generation \(source.generation)) is no longer in the bucket: it changed or was deleted there"))
    }
    do throws(BucketError) {
      return try await beside(change, moves: moves)
    } catch {
      return .of(error)
    }
  }

  /// A folder's mode, owner or times (`change.custom`) on its placeholder, whatever version is
  /// there (a placeholder has no bytes to lose); a folder without one gets one. A placeholder
  /// removed or made meanwhile is tried again the other way.
  private func folderMetadata(_ change: PendingChange) async -> Verdict {
    let custom = change.custom ?? [:]
    var lastError = BucketError(code: .internalError, object: change.name, detail: "the placeholder kept changing")
    for _ in 0..<3 {
      do throws(BucketError) {
        let m = try await client.updateMetadata(change.name, contentType: nil, custom: custom, ifGenerationMatch: nil)
        return .done(.generation(m.generation), m)
      } catch where error.code == .objectNotFound {
        lastError = error
      } catch {
        return .of(error)
      }
      do throws(FSError) {
        try writeEmptyBytes(change)
      } catch {
        return .of(BucketError(code: .unknown, object: change.name, detail: "cannot write to the queue: errno \(error.errno)"))
      }
      do throws(BucketError) {
        let m = try await client.upload(
          change.name, file: dataPath(change), contentType: "application/x-directory", custom: custom, ifGenerationMatch: 0, session: nil)
        return .done(.generation(m.generation), m)
      } catch where error.code == .preconditionFailed {
        lastError = error
      } catch {
        return .of(error)
      }
    }
    return .of(lastError)
  }

  /// Our bytes beside the object, whose version in the bucket was not the one they were based on:
  /// in conflict copy `growing` when it still holds `generation` (the bytes of the change this
  /// one follows), else under a new conflict name.
  private func beside(_ change: PendingChange, growing copy: String? = nil, at generation: Int64 = 0, moves: Bool = false) async throws(BucketError)
    -> Verdict
  {
    var custom = change.custom ?? [:]
    custom["bucketfs-conflict-of"] = change.name
    if let mtime = change.mtime { custom["mtime"] = KeptTime.format(mtime) }
    // A rename's source moved beside the object takes its old name with it.
    var moved = false
    func put(_ target: String, ifGenerationMatch: Int64) async throws(BucketError) -> StorageMetadata {
      if change.kind == .copy {
        let (m, didMove) = try await copied(change, to: target, ifGenerationMatch: ifGenerationMatch, moves: moves)
        moved = didMove
        return m
      }
      return try await client.upload(
        target, file: dataPath(change), contentType: change.contentType ?? ContentType.infer(fromName: change.name), custom: custom,
        ifGenerationMatch: ifGenerationMatch, session: nil)
    }
    func done(_ effect: PendingChange.Effect, _ m: StorageMetadata) -> Verdict { moved ? .moved(effect, m) : .done(effect, m) }
    if let copy {
      do throws(BucketError) {
        let m = try await put(copy, ifGenerationMatch: generation)
        return done(.conflict(copy, generation: m.generation), m)
      } catch where error.code == .preconditionFailed || error.code == .objectNotFound {
        // Someone changed or removed the copy: it keeps what it holds, ours goes to a new one.
      }
    }
    // A name no other conflict takes, even one in the same second on another machine, over an
    // API whose precondition is checked before the upload rather than kept by the server; a
    // server that refuses every one is an error, not a loop.
    var refused = BucketError(code: .preconditionFailed, object: change.name, detail: "no conflict name was free")
    for _ in 0..<3 {
      let target = Self.conflictName(change.name, at: Date())
      do throws(BucketError) {
        let m = try await put(target, ifGenerationMatch: 0)
        log("write-back: \(change.name.debugDescription) changed on the server since it was read; our version is \(target.debugDescription)")
        return done(.conflict(target, generation: m.generation), m)
      } catch where error.code == .preconditionFailed {
        refused = error
      }
    }
    throw refused
  }

  /// The server-side copy of `change` to `target`: with `moves` (a rename) one `objects.move`
  /// where the server has it, which takes the source away too (answered `true`), else a copy.
  /// The copy takes the source's metadata; a source that kept no time of its own gets the one
  /// the mount showed.
  private func copied(_ change: PendingChange, to target: String, ifGenerationMatch: Int64?, moves: Bool = false) async throws(BucketError)
    -> (StorageMetadata, moved: Bool)
  {
    guard let source = change.source else { throw BucketError(code: .internalError, object: change.name, detail: "a copy without a source") }
    if moves && client.movesOnServer {
      do throws(BucketError) {
        let m = try await client.move(source.name, generation: source.generation, to: target, ifGenerationMatch: ifGenerationMatch)
        return (await keepTime(change, m, at: target), true)
      } catch where error.isMoveUnsupported {
        log("write-back: the server has no objects.move; renames copy, then delete")
      }
    }
    let m = try await client.copy(source.name, generation: source.generation, to: target, ifGenerationMatch: ifGenerationMatch)
    return (await keepTime(change, m, at: target), false)
  }

  /// A copy whose source kept no time of its own gets the one the mount showed (best effort: the
  /// bytes are in place either way).
  private func keepTime(_ change: PendingChange, _ m: StorageMetadata, at target: String) async -> StorageMetadata {
    guard let mtime = change.mtime, m.customMetadata?["mtime"] == nil else { return m }
    return (try? await client.updateMetadata(target, contentType: nil, custom: ["mtime": KeptTime.format(mtime)], ifGenerationMatch: m.generation)) ?? m
  }

  static func conflictName(_ name: String, at date: Date) -> String {
    let f = DateFormatter()
    f.locale = Locale(identifier: "en_US_POSIX")
    f.timeZone = TimeZone(identifier: "UTC")
    f.dateFormat = "yyyyMMdd'T'HHmmss'Z'"
    return name + ".conflict-" + f.string(from: date) + "-" + String(UInt32.random(in: 0...UInt32.max) | 1 << 31, radix: 36)
  }
}
