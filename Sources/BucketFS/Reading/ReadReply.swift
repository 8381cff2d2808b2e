import Foundation

/// What a read is answered with: bytes in memory, never a file the kernel would copy from
/// unchecked (a staged block is read back and checked first).
package enum ReadReply: Sendable {
  case bytes(Data)
  case buffer(ReadBuffer)
  /// `count` bytes from `skip` on, across cached pages.
  case pages([Data], skip: Int, count: Int)
}

extension ReadReply {
  /// The bytes themselves, in one buffer; nil when the pages are shorter than the reply.
  package func data() -> Data? {
    switch self {
    case .bytes(let data):
      return data
    case .buffer(let buffer):
      return Data(buffer.bytes)
    case .pages(let pages, let skip, let count):
      var out = Data(capacity: count)
      var skip = skip
      for page in pages where out.count < count {
        let from = min(skip, page.count)
        skip -= from
        let n = min(page.count - from, count - out.count)
        out.append(page[(page.startIndex + from)..<(page.startIndex + from + n)])
      }
      return out.count == count ? out : nil
    }
  }
}
