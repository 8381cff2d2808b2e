import StorageCore

/// The CRC32C of an edit's bytes, taken from its writes as they arrive, so that a close need not
/// read the file back to vouch for what it queues. It is known while every write so far
/// continued the bytes in order from the start (cp, tar, a program writing a new file); a write
/// anywhere else (in the middle, past the end) or a truncation to another length leaves it
/// unknown, and the close reads the file back as before.
enum WrittenChecksum: Sendable {
  case unknown
  /// The first `length` bytes, which are the whole file, have CRC32C `crc`.
  case known(length: Int64, crc: CRC32C)

  /// `bytes` were written at `offset`; `sizeAfter` gives the file's size now (asked only for a
  /// write at the start of a file whose CRC is not known: when the file is these bytes and no
  /// more, they are all of it, whatever was there before).
  mutating func wrote(_ bytes: UnsafeRawBufferPointer, at offset: Int64, sizeAfter: () -> Int64) {
    switch self {
    case .known(let length, var crc) where offset == length:
      crc.update(bytes)
      self = .known(length: length + Int64(bytes.count), crc: crc)
    case .unknown where offset == 0 && sizeAfter() == Int64(bytes.count):
      var crc = CRC32C()
      crc.update(bytes)
      self = .known(length: Int64(bytes.count), crc: crc)
    default:
      self = .unknown
    }
  }

  /// The bytes were cut (or extended) to `size`.
  mutating func truncated(to size: Int64) {
    if size == 0 {
      self = .known(length: 0, crc: CRC32C())
    } else if case .known(let length, _) = self, length == size {
      return
    } else {
      self = .unknown
    }
  }

  /// The CRC32C of a file of `size` bytes, when the writes gave it.
  func value(forSize size: Int64) -> UInt32? {
    guard case .known(let length, let crc) = self, length == size else { return nil }
    return crc.value
  }
}
