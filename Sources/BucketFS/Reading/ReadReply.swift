import Foundation

/// What a read is answered with: bytes in memory, or a range of a staged file, which libfuse
/// can splice into the reply without the bytes passing through the daemon.
package enum ReadReply: Sendable {
  case bytes(Data)
  case buffer(ReadBuffer)
  /// `count` bytes from `skip` on, across cached pages.
  case pages([Data], skip: Int, count: Int)
  case file(FileDescriptor, offset: Int64, count: Int)
}

extension ReadReply {
  /// The bytes themselves (a file range is read); nil when the file cannot be read.
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
    case .file(let file, let offset, let count):
      var data = Data(count: count)
      let ok = data.withUnsafeMutableBytes { BlockChecksums.readFully(file.fd, into: $0, at: offset) }
      return ok ? data : nil
    }
  }
}
