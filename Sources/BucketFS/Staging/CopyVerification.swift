// How a local copy is checked. A copy is verified whole against the object's hash before it
// becomes complete (the block checksums taken as the bytes arrived combine into its CRC32C;
// without a CRC32C the file is read back), and every read from a complete copy checks the
// blocks it touches, so a copy damaged on disk is never served.
import Foundation
import StorageCore

enum CopyVerification {
  struct Damage: Error { let reason: String }

  /// `checksums` (taken from the bytes as they arrived) when they combine into the object's
  /// CRC32C and the file at `path` has the object's size; without a CRC32C to compare, the
  /// file is read back (`checkWhole`). Nil when the copy does not match.
  static func verified(path: String, metadata m: StorageMetadata, checksums: BlockChecksums?) -> BlockChecksums? {
    guard let expected = m.crc32c, let checksums, checksums.crcs.count == BlockChecksums.count(for: m.size) else {
      return checkWhole(path: path, metadata: m)
    }
    let block = BlockChecksums.blockSize
    let lengths = checksums.crcs.indices.map { i in min(block, Int(m.size) - i * block) }
    guard CRC32C.combining(zip(checksums.crcs, lengths).map { (crc: $0, length: $1) }).matches(expected) else { return nil }
    var st = stat()
    guard stat(path, &st) == 0, Int64(st.st_size) == m.size else { return nil }
    return checksums
  }

  /// Block checksums of the file at `path`, after checking the whole file against the object's
  /// CRC32C (or MD5). Nil when it does not match.
  static func checkWhole(path: String, metadata m: StorageMetadata) -> BlockChecksums? {
    guard let (checksums, crc, md5) = BlockChecksums.compute(path: path, size: m.size, md5: m.crc32c == nil && m.md5Hash != nil)
    else { return nil }
    if let expected = m.crc32c, !crc.matches(expected) { return nil }
    if m.crc32c == nil, let expected = m.md5Hash, md5 != expected { return nil }
    return checksums
  }

  /// Why `bytes` are not the object's (nil: they match its CRC32C, else its MD5, or it has
  /// neither).
  static func mismatch(_ bytes: Data, metadata m: StorageMetadata) -> String? {
    if let expected = m.crc32c {
      var crc = CRC32C()
      bytes.withUnsafeBytes { crc.update($0) }
      return crc.matches(expected) ? nil : "CRC32C mismatch"
    }
    if let expected = m.md5Hash {
      let digest = Digest(.md5)
      digest.update(bytes)
      return digest.finalize().base64EncodedString() == expected ? nil : "MD5 mismatch"
    }
    return nil
  }

  /// Bytes `offset..<offset+count` of complete copy `copy` through `file`: whole blocks around
  /// the range are read and each is checked against the copy's checksums.
  static func read(_ copy: LocalCopy, file: FileDescriptor, offset: Int64, count: Int) -> Result<ReadReply, Damage> {
    guard let checksums = copy.checksums else { return .failure(Damage(reason: "it has no checksums")) }
    let size = copy.metadata.size
    var st = stat()
    guard fstat(file.fd, &st) == 0, Int64(st.st_size) == size else {
      return .failure(Damage(reason: "it holds \(st.st_size) bytes, the object \(size)"))
    }
    guard checksums.crcs.count == BlockChecksums.count(for: size) else {
      return .failure(Damage(reason: "its index does not fit its size"))
    }
    let end = min(size, offset + Int64(count))
    guard offset < end else { return .success(.bytes(Data())) }
    let blockSize = Int64(BlockChecksums.blockSize)
    let firstBlock = offset / blockSize
    let from = firstBlock * blockSize
    let to = min(size, ((end - 1) / blockSize + 1) * blockSize)
    var damage: Damage?
    let buffer = ReadBuffer.filled(count: Int(to - from), answer: Int(offset - from)..<Int(end - from)) { raw in
      guard BlockChecksums.readFully(file.fd, into: raw, at: from) else {
        damage = Damage(reason: "reading it failed: \(String(cString: strerror(errno)))")
        return false
      }
      if let bad = checksums.firstMismatch(UnsafeRawBufferPointer(raw), firstBlock: Int(firstBlock)) {
        damage = Damage(reason: "block \(bad) (bytes \(Int64(bad) * blockSize)…) does not match its checksum")
        return false
      }
      return true
    }
    guard let buffer else { return .failure(damage ?? Damage(reason: "reading it failed")) }
    return .success(.buffer(buffer))
  }
}
