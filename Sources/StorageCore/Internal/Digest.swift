internal import CCrypto
import Foundation

/// MD5 or SHA-256 over streamed bytes, through OpenSSL's libcrypto.
package final class Digest: @unchecked Sendable {
  package enum Kind: Int32, Sendable {
    case md5 = 0
    case sha256 = 1
  }

  private var context: OpaquePointer?

  package init(_ kind: Kind) {
    context = CCrypto_digest_new(kind.rawValue)
  }

  deinit {
    if let context { CCrypto_digest_free(context) }
  }

  package func update(_ bytes: UnsafeRawBufferPointer) {
    guard let context, let base = bytes.baseAddress, bytes.count > 0 else { return }
    CCrypto_digest_update(context, base, bytes.count)
  }

  package func update(_ data: Data) {
    data.withUnsafeBytes { update($0) }
  }

  /// The digest; the object cannot be updated afterwards.
  package func finalize() -> Data {
    guard let context else { return Data() }
    self.context = nil
    var out = [UInt8](repeating: 0, count: 64)
    let length = CCrypto_digest_final(context, &out)
    return Data(out.prefix(Int(length)))
  }

  package static func hex(_ data: Data) -> String {
    // Not String(format:) per byte: staging names every read's copy by a digest in hex.
    let digits = Array("0123456789abcdef".utf8)
    var out = [UInt8]()
    out.reserveCapacity(data.count * 2)
    for byte in data {
      out.append(digits[Int(byte >> 4)])
      out.append(digits[Int(byte & 0x0F)])
    }
    return String(decoding: out, as: UTF8.self)
  }

  /// The digest of a file's first `length` bytes (all of it when nil).
  package static func ofFile(_ path: String, kind: Kind, length: Int64? = nil) -> Data? {
    guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
    defer { try? handle.close() }
    let digest = Digest(kind)
    var remaining = length ?? Int64.max
    while remaining > 0 {
      let chunk = handle.readData(ofLength: Int(min(remaining, 4 << 20)))
      if chunk.isEmpty { break }
      digest.update(chunk)
      remaining -= Int64(chunk.count)
    }
    return digest.finalize()
  }
}

/// CRC-32C (Castagnoli), as GCS computes it, with the CPU's CRC instruction where there is one.
package struct CRC32C: Sendable {
  package private(set) var value: UInt32 = 0

  package init() {}

  /// A CRC computed before (kept in a record).
  package init(value: UInt32) { self.value = value }

  package mutating func update(_ bytes: UnsafeRawBufferPointer) {
    guard let base = bytes.baseAddress, bytes.count > 0 else { return }
    value = CCrypto_crc32c(value, base, bytes.count)
  }

  /// The CRC of consecutive parts from theirs: `parts` gives each part's CRC and length.
  package static func combining(_ parts: some Sequence<(crc: UInt32, length: Int)>) -> CRC32C {
    var whole = CRC32C()
    var shifts: [Int: UInt32] = [:]  // most parts have the same length
    for (i, part) in parts.enumerated() {
      if i == 0 {
        whole.value = part.crc
        continue
      }
      let shift = shifts[part.length] ?? CCrypto_crc32c_shift(UInt64(part.length))
      shifts[part.length] = shift
      whole.value = CCrypto_crc32c_combine(whole.value, part.crc, shift)
    }
    return whole
  }

  /// Big-endian bytes in base64, the GCS JSON form.
  package var base64: String {
    let v = value
    return Data([UInt8(v >> 24), UInt8((v >> 16) & 0xFF), UInt8((v >> 8) & 0xFF), UInt8(v & 0xFF)])
      .base64EncodedString()
  }

  /// True when `text` (decimal as the Firebase emulator writes it, or base64 as GCS does) is this CRC.
  package func matches(_ text: String) -> Bool {
    if let decimal = UInt32(text) { return decimal == value }
    return text == base64
  }
}
