// An upload that only appended (`PendingChange.appendedFrom`), whose base another writer
// replaced, is carried onto the version the bucket holds: that version's bytes, then ours from
// where the append began, uploaded with a precondition on that version and tried again on 412,
// as a careful appender elsewhere does for itself. No conflict copy, no line lost. What was put
// together is recorded before it is sent (`Rebase`), so that a retry after a lost answer or a
// `kill -9` finds it in the bucket instead of appending it twice.
import Foundation
import StorageCore

extension ChangeWorker {
  /// Tries before giving the turn back, when other writers keep changing the object.
  static let mergeTries = 8

  /// `change`'s appended bytes onto the newest version of its object.
  func merged(_ change: PendingChange) async -> Verdict {
    guard let from = change.appendedFrom else {
      return .refused(BucketError(code: .internalError, object: change.name, detail: "an append without the offset it began at"))
    }
    var change = change
    let together = dataPath(change) + ".merged.tmp"
    defer { unlink(together) }
    for _ in 0..<Self.mergeTries {
      let current: StorageMetadata?
      do throws(BucketError) {
        current = try await client.metadata(of: change.name)
      } catch where error.code == .objectNotFound {
        current = nil
      } catch {
        return .of(error)
      }
      // What an earlier try may have put there (its answer lost, or a kill -9 before it was
      // recorded): the queued bytes as they were, and what the last recorded merge put together.
      var landed: [(size: Int64, crc: UInt32)] = []
      if let size = change.dataSize, let crc = change.dataCRC32C, size > from { landed.append((size, crc)) }
      if let rebase = change.rebase, let size = rebase.size, let crc = rebase.crc32c { landed.append((size, crc)) }
      let onto = current?.generation ?? 0
      let size: Int64
      let crc: UInt32
      let prefixes: [Int64: UInt32]
      do throws(BucketError) {
        (size, crc, prefixes) = try await putTogether(change, onto: current, appendedFrom: from, into: together, watching: landed.map(\.size))
      } catch where error.code == .objectNotFound || error.code == .objectChanged {
        continue  // that version went meanwhile
      } catch {
        return .of(error)
      }
      if let current, landed.contains(where: { prefixes[$0.size] == $0.crc }) {
        // The bucket's version starts with bytes an earlier try sent: they landed (other
        // writers may have appended after them). Sent again, they would be there twice.
        return .done(.merged(current.generation), current)
      }
      change.rebase = PendingChange.Rebase(onto: onto, size: size, crc32c: crc)
      do throws(FSError) {
        try rebased(change)
      } catch {
        return .retryLater("cannot record the queue's change: errno \(error.errno)")
      }
      var custom = change.custom ?? [:]
      if let mtime = change.mtime { custom["mtime"] = KeptTime.format(mtime) }
      do throws(BucketError) {
        let m = try await client.upload(
          change.name, file: together, contentType: change.contentType ?? ContentType.infer(fromName: change.name), custom: custom,
          ifGenerationMatch: onto, session: nil)
        log("write-back: \(change.name.debugDescription) changed on the server since it was read; what was appended went onto its newest version")
        return .done(.merged(m.generation), m)
      } catch where error.code == .preconditionFailed {
        continue
      } catch {
        return .of(error)
      }
    }
    return .retryLater("\(change.name.debugDescription) kept changing on the server while appended bytes were carried onto it")
  }

  /// Version `current`'s bytes (none: nothing), then `change`'s from `appendedFrom` on, in file
  /// `path`: their size and CRC32C, and the CRC32C of `current`'s first bytes at each length in
  /// `watching` that it has.
  private func putTogether(
    _ change: PendingChange, onto current: StorageMetadata?, appendedFrom: Int64, into path: String, watching: [Int64]
  ) async throws(BucketError) -> (Int64, UInt32, [Int64: UInt32]) {
    func failed(_ what: String) -> BucketError {
      BucketError(code: .unknown, object: change.name, detail: "cannot \(what) in the queue's folder: errno \(errno)")
    }
    let out = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    guard out >= 0 else { throw failed("make \(path)") }
    defer { close(out) }
    var crc = CRC32C()
    var offset: Int64 = 0
    var prefixes: [Int64: UInt32] = [:]
    let marks = Set(watching)
    func put(_ data: Data) throws(BucketError) {
      let written = data.withUnsafeBytes { bytes in
        // The running CRC is noted where a watched length falls within these bytes.
        var at = 0
        for mark in marks.sorted() where mark > offset && mark <= offset + Int64(bytes.count) {
          let upTo = Int(mark - offset)
          crc.update(UnsafeRawBufferPointer(rebasing: bytes[at..<upTo]))
          at = upTo
          prefixes[mark] = crc.value
        }
        crc.update(UnsafeRawBufferPointer(rebasing: bytes[at...]))
        return pwrite(out, bytes.baseAddress, bytes.count, off_t(offset))
      }
      guard written == data.count else { throw failed("write \(path)") }
      offset += Int64(data.count)
    }
    if let current {
      let chunk: Int64 = 8 << 20
      while offset < current.size {
        try put(try await RangedGet.data(client, change.name, range: offset..<min(current.size, offset + chunk), generation: current.generation))
      }
    }
    // Only the bucket's version's lengths count: the appended bytes are ours, not what it holds.
    let held = prefixes
    let input = open(dataPath(change), O_RDONLY | O_CLOEXEC)
    guard input >= 0 else { throw failed("read the queued bytes of") }
    defer { close(input) }
    var at = appendedFrom
    var buffer = [UInt8](repeating: 0, count: 1 << 20)
    while true {
      let n = buffer.withUnsafeMutableBytes { pread(input, $0.baseAddress, $0.count, off_t(at)) }
      guard n >= 0 else { throw failed("read the queued bytes of") }
      if n == 0 { break }
      try put(Data(buffer[0..<n]))
      at += Int64(n)
    }
    return (offset, crc.value, held)
  }
}
