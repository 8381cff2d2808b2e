import Foundation

/// A request body read from the socket on demand: by Content-Length or chunked encoding.
final class RequestBody {
  enum Failure: Error {
    /// The peer closed or reset before the announced end.
    case truncated
    case malformed
    case tooLarge
    case local(String)
    /// The consumer stopped taking the body (a session cancelled meanwhile).
    case stopped
  }

  private let reader: SocketReader
  private var remaining: Int64
  private let chunked: Bool
  private var chunkLeft: Int64 = 0
  private var finished: Bool
  /// Called with the byte count after each read, so that faults can cut an upload.
  var onBytes: ((Int64) -> Bool)?
  private(set) var consumed: Int64 = 0

  init(reader: SocketReader, contentLength: Int64?, chunked: Bool) {
    self.reader = reader
    self.chunked = chunked
    self.remaining = contentLength ?? 0
    self.finished = !chunked && (contentLength ?? 0) == 0
  }

  var isComplete: Bool { finished }

  /// The largest object Cloud Storage holds (5 TiB): no body or chunk can be larger.
  static let largestBody: Int64 = 5 << 40

  /// Reads up to `max` bytes; an empty result means the body ended.
  func read(max: Int) throws(Failure) -> Data {
    if finished { return Data() }
    if chunked {
      if chunkLeft == 0 {
        guard let line = reader.readLine(limit: 1024) else { throw .truncated }
        let sizeText = line.split(separator: ";").first.map(String.init) ?? ""
        // A chunk larger than any object can be is a malformed request, not one to wait for.
        guard let size = Int64(sizeText.trimmingCharacters(in: .whitespaces), radix: 16), size >= 0, size <= Self.largestBody else {
          throw .malformed
        }
        if size == 0 {
          // Trailers end with an empty line.
          while let trailer = reader.readLine(limit: 8192), !trailer.isEmpty {}
          finished = true
          return Data()
        }
        chunkLeft = size
      }
      let data = reader.read(max: Int(min(Int64(max), chunkLeft)))
      if data.isEmpty { throw .truncated }
      chunkLeft -= Int64(data.count)
      if chunkLeft == 0 { _ = reader.readLine(limit: 2) }
      try account(data.count)
      return data
    }
    let data = reader.read(max: Int(min(Int64(max), remaining)))
    if data.isEmpty { throw .truncated }
    remaining -= Int64(data.count)
    if remaining == 0 { finished = true }
    try account(data.count)
    return data
  }

  private func account(_ count: Int) throws(Failure) {
    consumed += Int64(count)
    if let onBytes, !onBytes(consumed) { throw .truncated }
  }

  /// The whole body in memory, refusing more than `limit` bytes.
  func readAll(limit: Int) throws(Failure) -> Data {
    var out = Data()
    while true {
      let chunk = try read(max: 1 << 20)
      if chunk.isEmpty { return out }
      out.append(chunk)
      if out.count > limit { throw .tooLarge }
    }
  }

  /// Streams the body into `fd` from its current offset (every byte, through short writes),
  /// updating `hashes`; returns the bytes written. `landed` hears the total after each chunk is
  /// written (what a resumable session counts as received) and may stop the drain (`.stopped`).
  @discardableResult
  func drain(into fd: Int32, hashes: ObjectHashes?, landed: (Int64) -> Bool = { _ in true }) throws(Failure) -> Int64 {
    var total: Int64 = 0
    while true {
      let chunk = try read(max: 1 << 20)
      if chunk.isEmpty { return total }
      let ok = chunk.withUnsafeBytes { raw -> Bool in
        guard writeAll(fd, raw) else { return false }
        hashes?.update(raw)
        return true
      }
      if !ok { throw .local(String(cString: strerror(errno))) }
      total += Int64(chunk.count)
      if !landed(total) { throw .stopped }
    }
  }

  /// Reads and drops whatever is left so that the connection can serve the next request.
  func discard() throws(Failure) {
    while !(try read(max: 1 << 20)).isEmpty {}
  }
}
