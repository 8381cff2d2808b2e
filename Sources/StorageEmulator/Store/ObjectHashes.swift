internal import CCrypto
import Foundation

/// The MD5 and CRC-32C the server reports for each object, computed as bytes arrive.
final class ObjectHashes {
  private var md5: OpaquePointer? = CCrypto_digest_new(0)
  private var crc: UInt32 = 0xFFFF_FFFF

  private static let table: [UInt32] = (0..<256).map { i -> UInt32 in
    var c = UInt32(i)
    for _ in 0..<8 { c = c & 1 == 1 ? (c >> 1) ^ 0x82F6_3B78 : c >> 1 }
    return c
  }

  deinit {
    if let md5 { CCrypto_digest_free(md5) }
  }

  func update(_ bytes: UnsafeRawBufferPointer) {
    guard bytes.count > 0 else { return }
    CCrypto_digest_update(md5, bytes.baseAddress, bytes.count)
    var c = crc
    // Four bytes per step through the unchecked table: this runs on every uploaded byte.
    Self.table.withUnsafeBufferPointer { t in
      let p = bytes.bindMemory(to: UInt8.self)
      for b in p { c = (c >> 8) ^ t[Int((c ^ UInt32(b)) & 0xFF)] }
    }
    crc = c
  }

  /// (md5 base64, crc32c base64 of the big-endian value)
  func finish() -> (md5: String, crc32c: String) {
    var out = [UInt8](repeating: 0, count: 64)
    let n = CCrypto_digest_final(md5, &out)
    md5 = nil
    let v = ~crc
    let crcBytes = Data([UInt8(v >> 24), UInt8((v >> 16) & 0xFF), UInt8((v >> 8) & 0xFF), UInt8(v & 0xFF)])
    return (Data(out.prefix(Int(n))).base64EncodedString(), crcBytes.base64EncodedString())
  }

  static func sha256Hex(_ text: String) -> String {
    let d = CCrypto_digest_new(1)
    let bytes = Array(text.utf8)
    CCrypto_digest_update(d, bytes, bytes.count)
    var out = [UInt8](repeating: 0, count: 64)
    let n = CCrypto_digest_final(d, &out)
    // By hand: String(format:) per byte was half of what a list page cost (each item's side
    // file is named by this hash).
    let digits = Array("0123456789abcdef".utf8)
    var hex = [UInt8]()
    hex.reserveCapacity(Int(n) * 2)
    for byte in out.prefix(Int(n)) {
      hex.append(digits[Int(byte >> 4)])
      hex.append(digits[Int(byte & 0x0F)])
    }
    return String(decoding: hex, as: UTF8.self)
  }
}
