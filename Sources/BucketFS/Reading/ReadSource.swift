// Where a read of an open file is answered from, in order: the complete staged copy, the
// partial copy being filled, the block cache with the server behind it. Each source answers or
// falls through to the next, and the one list serves both paths: the answer without waiting
// (asked first, on the libfuse thread) and the answer that may wait for the server (in the
// read's task, each wait bounded by the read's deadline).
import Foundation
import StorageCore

enum ReadSource: CaseIterable {
  /// The complete staged copy, every block checked as it is read.
  case stagedCopy
  /// The partial copy being filled: its blocks, and GETs into it for the ones missing.
  case partialCopy
  /// The block cache, and ranged GETs into it (an object not staged, or whose copy broke).
  case blockCache
}

extension BucketFilesystem {
  /// The bytes of `file` a read of `count` at `offset` asks for: up to the end of the object.
  func readRange(_ file: OpenFile, offset: Int64, count: Int) -> Range<Int64> {
    offset..<max(offset, min(file.metadata.size, offset + Int64(count)))
  }

  /// `range` of `file` from the first source that holds it now, without waiting.
  func answerNow(_ file: OpenFile, _ range: Range<Int64>) -> ReadReply? {
    for source in ReadSource.allCases {
      if let reply = answerNow(source, file, range) { return reply }
    }
    return nil
  }

  /// `range` of `file` from the first source that answers, fetching what it lacks, or the
  /// deadline's timeout.
  func answer(_ file: OpenFile, _ range: Range<Int64>, by deadline: ReadDeadline) async throws(BucketError) -> ReadReply {
    for source in ReadSource.allCases {
      if let reply = try await answer(source, file, range, by: deadline) { return reply }
    }
    // The block cache answers or throws; this is never reached.
    throw BucketError(code: .internalError, object: file.objectName, detail: "no read source answered")
  }

  /// `range` of `file` from `source` without waiting; nil when it does not hold it now.
  func answerNow(_ source: ReadSource, _ file: OpenFile, _ range: Range<Int64>) -> ReadReply? {
    switch source {
    case .stagedCopy:
      return staging?.read(file.objectName, generation: file.metadata.generation, offset: range.lowerBound, count: range.count)
    case .partialCopy:
      guard let copy = file.copy, copy.holds(offset: range.lowerBound, end: range.upperBound) else { return nil }
      return copy.verifiedReply(offset: range.lowerBound, end: range.upperBound)
    case .blockCache:
      // A working partial copy is where this object's bytes go; offline nothing was fetched.
      if options.offline || file.copy.map({ !$0.isBroken }) == true { return nil }
      return file.reader.replyIfCached(offset: range.lowerBound, count: range.count)
    }
  }

  /// `range` of `file` from `source`, fetching what it lacks; nil when the source cannot
  /// answer (no copy, or the copy cannot be used: the disk is full, say). The server's error
  /// for the bytes is thrown.
  func answer(
    _ source: ReadSource, _ file: OpenFile, _ range: Range<Int64>, by deadline: ReadDeadline
  ) async throws(BucketError) -> ReadReply? {
    switch source {
    case .stagedCopy:
      return answerNow(.stagedCopy, file, range)
    case .partialCopy:
      guard let copy = file.copy else { return nil }
      do {
        try await copy.wait(offset: range.lowerBound, end: range.upperBound, by: deadline)
        return copy.verifiedReply(offset: range.lowerBound, end: range.upperBound)
      } catch let error as BucketError {
        throw error
      } catch {
        return nil
      }
    case .blockCache:
      return try await file.reader.reply(offset: range.lowerBound, count: range.count, by: deadline)
    }
  }
}

extension BucketFilesystem {
  /// Whether the sources hold `range` (not empty) of `file` now, asked without reading it (a
  /// staged block read back is checked whole).
  func holds(_ file: OpenFile, _ range: Range<Int64>) -> Bool {
    let (name, generation) = (file.objectName, file.metadata.generation)
    if staging?.status(name, generation: generation, size: file.metadata.size).isComplete == true { return true }
    if let copy = file.copy, !copy.isBroken { return copy.holds(offset: range.lowerBound, end: range.upperBound) }
    // Page by page, not as a reply: a reply counts as a read, which reads ahead.
    let pages = (range.lowerBound / BlockCache.pageSize)...((range.upperBound - 1) / BlockCache.pageSize)
    return pages.allSatisfy { cache.cached(BlockCache.Key(name: name, generation: generation, page: $0)) != nil }
  }

  /// Waits until the sources hold `range` of `file`, fetching what they lack as `answer` would,
  /// without making a reply of it; the server's error for the bytes, or the deadline's.
  func fetch(_ file: OpenFile, _ range: Range<Int64>, by deadline: ReadDeadline) async throws(BucketError) {
    if staging?.status(file.objectName, generation: file.metadata.generation, size: file.metadata.size).isComplete == true { return }
    if let copy = file.copy, !copy.isBroken {
      do {
        return try await copy.wait(offset: range.lowerBound, end: range.upperBound, by: deadline)
      } catch let error as BucketError {
        throw error
      } catch {
        // The copy cannot be used (the disk is full, say): the block cache, as a read would.
      }
    }
    _ = try await file.reader.reply(offset: range.lowerBound, count: range.count, by: deadline)
  }
}
