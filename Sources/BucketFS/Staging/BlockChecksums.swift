// A CRC32C per 64 KiB block of a staged copy, kept in its index so that every read from disk is
// checked: a copy damaged after it was verified (a flipped bit, a truncation, an append) is never
// served. The CPU's CRC instruction makes the check far cheaper than the read itself; 64 KiB
// blocks keep the bytes read beyond what the kernel asked for small.
import Foundation
import StorageCore

package struct BlockChecksums: Sendable, Equatable {
  package static let blockSize = 64 * 1024
  package var crcs: [UInt32]

  /// Checksums of `bytes` (starting at a block boundary).
  static func of(_ bytes: UnsafeRawBufferPointer) -> BlockChecksums {
    var crcs: [UInt32] = []
    crcs.reserveCapacity(bytes.count / blockSize + 1)
    var start = 0
    while start < bytes.count {
      let block = UnsafeRawBufferPointer(rebasing: bytes[start..<min(bytes.count, start + blockSize)])
      var crc = CRC32C()
      crc.update(block)
      crcs.append(crc.value)
      start += blockSize
    }
    return BlockChecksums(crcs: crcs)
  }

  /// Reads the file at `path` (which must hold exactly `size` bytes) and checksums it; nil when it
  /// cannot be read or its size is not `size`. Also returns the MD5 when `md5` is asked.
  static func compute(path: String, size: Int64, md5: Bool) -> (BlockChecksums, CRC32C, String?)? {
    let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var st = stat()
    guard fstat(fd, &st) == 0, Int64(st.st_size) == size else { return nil }
    var all = BlockChecksums(crcs: [])
    let digest = md5 ? Digest(.md5) : nil
    // No larger than the file: a close queues a 4 KiB file's bytes through here, and a 4 MiB
    // buffer for it (zeroed, faulted in) cost more than the close's fsyncs.
    let chunk = Int(min(Int64(64 * blockSize), max(size, 1)))
    var buffer = [UInt8](repeating: 0, count: chunk)
    var offset: Int64 = 0
    while offset < size {
      let want = Int(min(Int64(chunk), size - offset))
      let ok = buffer.withUnsafeMutableBytes { raw -> Bool in
        guard readFully(fd, into: UnsafeMutableRawBufferPointer(rebasing: raw[0..<want]), at: offset) else { return false }
        let bytes = UnsafeRawBufferPointer(rebasing: raw[0..<want])
        all.crcs += of(bytes).crcs
        digest?.update(bytes)
        return true
      }
      guard ok else { return nil }
      offset += Int64(want)
    }
    // The whole file's CRC from its blocks' (the bytes are read and checksummed once).
    let lengths = all.crcs.indices.map { i in Int(min(Int64(blockSize), size - Int64(i) * Int64(blockSize))) }
    let whole = CRC32C.combining(zip(all.crcs, lengths).map { (crc: $0, length: $1) })
    return (all, whole, digest.map { $0.finalize().base64EncodedString() })
  }

  /// Fills `buffer` from `fd` at `offset`; false on an error or an early end of file.
  static func readFully(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) -> Bool {
    var done = 0
    while done < buffer.count {
      let n = pread(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset) + off_t(done))
      if n < 0 && errno == EINTR { continue }
      if n <= 0 { return false }
      done += n
    }
    return true
  }

  /// The index of the first block of `bytes` (which start at block `firstBlock`) whose checksum
  /// differs from the recorded one; nil when all match.
  func firstMismatch(_ bytes: UnsafeRawBufferPointer, firstBlock: Int) -> Int? {
    var start = 0
    var block = firstBlock
    while start < bytes.count {
      guard block < crcs.count else { return block }
      var crc = CRC32C()
      crc.update(UnsafeRawBufferPointer(rebasing: bytes[start..<min(bytes.count, start + Self.blockSize)]))
      if crc.value != crcs[block] { return block }
      start += Self.blockSize
      block += 1
    }
    return nil
  }

  /// Little-endian words in base64, as the index stores them.
  var encoded: String {
    var data = Data(capacity: crcs.count * 4)
    for c in crcs { withUnsafeBytes(of: c.littleEndian) { data.append(contentsOf: $0) } }
    return data.base64EncodedString()
  }

  init(crcs: [UInt32]) { self.crcs = crcs }

  init?(encoded: String) {
    guard let data = Data(base64Encoded: encoded), data.count % 4 == 0 else { return nil }
    var crcs: [UInt32] = []
    crcs.reserveCapacity(data.count / 4)
    data.withUnsafeBytes { raw in
      for i in stride(from: 0, to: raw.count, by: 4) {
        crcs.append(UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: i, as: UInt32.self)))
      }
    }
    self.crcs = crcs
  }

  /// How many blocks an object of `size` bytes has.
  static func count(for size: Int64) -> Int { Int((size + Int64(blockSize) - 1) / Int64(blockSize)) }
}
