// A `multipart/related` upload read as it arrives: the first part (the JSON metadata, at most
// 1 MiB) into memory, the second (the media) straight into a temporary file while it is hashed,
// so that an upload of any size costs the server a fixed amount of memory.
import Foundation

struct MultipartUpload {
  enum Failure: Error {
    /// Not the shape of a metadata part followed by a media part.
    case malformed(String)
    /// The body ended early or the socket broke.
    case truncated
    case local(String)
  }

  var metadata: Data
  var mediaType: String?
  var temporaryPath: String
  var size: Int64
  var hashes: ObjectHashes

  /// The boundary of a `multipart/related; boundary=…` content type. Google's Python clients
  /// (gcloud, gsutil) quote it with single quotes, which the service accepts as well as double.
  static func boundary(of contentType: String?) -> String? {
    guard let contentType, let range = contentType.range(of: "boundary=") else { return nil }
    let value = contentType[range.upperBound...].split(separator: ";").first.map {
      $0.trimmingCharacters(in: CharacterSet(charactersIn: "\"' "))
    } ?? ""
    return value.isEmpty ? nil : value
  }

  /// Reads the whole body; the media lands in a temporary file of `store` that the caller commits
  /// or removes.
  static func receive(_ body: RequestBody, boundary: String, store: ObjectStore) throws(Failure) -> MultipartUpload {
    let scanner = BodyScanner(body)
    let delimiter = Array("--\(boundary)".utf8)
    // Anything before the first delimiter is a preamble.
    try scanner.skip(until: delimiter, limit: 64 << 10)
    // RFC 2046 says CRLF, but Python's email generator (gcloud, gsutil) ends lines with LF alone
    // and the service takes both: the first delimiter line says which this body uses.
    let newline = try scanner.lineEnding()
    let partEnd = newline + delimiter
    _ = try scanner.partHeaders(newline: newline)
    var metadata = Data()
    try scanner.read(until: partEnd, limit: 1 << 20) { metadata.append(contentsOf: $0) }
    let mediaType = try scanner.partHeaders(newline: newline)
    let (path, fd) = store.temporaryFile()
    guard fd >= 0 else { throw .local("cannot create a temporary file") }
    defer { close(fd) }
    let hashes = ObjectHashes()
    var size: Int64 = 0
    do {
      try scanner.read(until: partEnd, limit: Int64.max) { bytes throws(Failure) in
        try Self.write(fd, bytes)
        hashes.update(bytes)
        size += Int64(bytes.count)
      }
      // The closing "--" and the epilogue.
      try scanner.discardRest()
    } catch {
      unlink(path)
      throw error
    }
    return MultipartUpload(metadata: metadata, mediaType: mediaType, temporaryPath: path, size: size, hashes: hashes)
  }

  private static func write(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(Failure) {
    guard writeAll(fd, bytes) else { throw .local(String(cString: strerror(errno))) }
  }
}

/// Pulls a request body through a small buffer and finds delimiters in it.
private final class BodyScanner {
  private let body: RequestBody
  private var buffer: [UInt8] = []
  private var ended = false

  init(_ body: RequestBody) { self.body = body }

  /// Reads more of the body into the buffer; false at its end.
  private func fill() throws(MultipartUpload.Failure) -> Bool {
    if ended { return false }
    let chunk: Data
    do {
      chunk = try body.read(max: 1 << 20)
    } catch {
      throw .truncated
    }
    if chunk.isEmpty {
      ended = true
      return false
    }
    buffer.append(contentsOf: chunk)
    return true
  }

  private func find(_ needle: [UInt8]) -> Int? {
    guard buffer.count >= needle.count else { return nil }
    return buffer.withUnsafeBytes { hay -> Int? in
      let base = hay.baseAddress!
      var from = 0
      let last = hay.count - needle.count
      while from <= last {
        // memchr finds candidates for the first byte; only those are compared whole.
        guard let p = memchr(base + from, Int32(needle[0]), last - from + 1) else { return nil }
        let at = base.distance(to: UnsafeRawPointer(p))
        if memcmp(base + at, needle, needle.count) == 0 { return at }
        from = at + 1
      }
      return nil
    }
  }

  /// Hands every byte before `delimiter` to `sink` (holding back only what could be the start
  /// of a delimiter) and consumes the delimiter; fails past `limit` bytes.
  func read(
    until delimiter: [UInt8], limit: Int64, sink: (UnsafeRawBufferPointer) throws(MultipartUpload.Failure) -> Void
  ) throws(MultipartUpload.Failure) {
    var passed: Int64 = 0
    while true {
      if let at = find(delimiter) {
        passed += Int64(at)
        if passed > limit { throw .malformed("a part is too large") }
        try emit(at, sink)
        buffer.removeFirst(delimiter.count)
        return
      }
      let safe = buffer.count - (delimiter.count - 1)
      if safe > 0 {
        passed += Int64(safe)
        if passed > limit { throw .malformed("a part is too large") }
        try emit(safe, sink)
      }
      guard try fill() else { throw .malformed("the body ended inside a part") }
    }
  }

  private func emit(_ count: Int, _ sink: (UnsafeRawBufferPointer) throws(MultipartUpload.Failure) -> Void) throws(MultipartUpload.Failure) {
    guard count > 0 else { return }
    var failure: MultipartUpload.Failure?
    buffer.withUnsafeBytes { raw in
      do throws(MultipartUpload.Failure) {
        try sink(UnsafeRawBufferPointer(rebasing: raw[0..<count]))
      } catch {
        failure = error
      }
    }
    if let failure { throw failure }
    buffer.removeFirst(count)
  }

  func skip(until delimiter: [UInt8], limit: Int64) throws(MultipartUpload.Failure) {
    try read(until: delimiter, limit: limit) { _ in }
  }

  /// After a delimiter: the part's header lines up to the empty line; returns its Content-Type.
  /// A part may have no headers at all (Go's client sends the media part that way).
  func partHeaders(newline: [UInt8]) throws(MultipartUpload.Failure) -> String? {
    while buffer.count < 2 { guard try fill() else { throw .malformed("the body ended after a delimiter") } }
    if buffer[0] == UInt8(ascii: "-") && buffer[1] == UInt8(ascii: "-") {
      throw .malformed("a multipart upload needs a JSON part and a media part")
    }
    var headers = Data()
    try read(until: newline, limit: 1024) { _ in }  // the rest of the delimiter line
    while true {
      var line = Data()
      try read(until: newline, limit: 16 << 10) { line.append(contentsOf: $0) }
      if line.isEmpty { break }
      headers.append(line)
      headers.append(0x0A)
      if headers.count > 64 << 10 { throw .malformed("part headers too large") }
    }
    for line in String(decoding: headers, as: UTF8.self).split(separator: "\n") {
      let kv = line.split(separator: ":", maxSplits: 1)
      if kv.count == 2, kv[0].lowercased() == "content-type" { return kv[1].trimmingCharacters(in: .whitespaces) }
    }
    return nil
  }

  /// Right after the first delimiter: the line ending the delimiter line ends with (a boundary
  /// may be followed by spaces before it).
  func lineEnding() throws(MultipartUpload.Failure) -> [UInt8] {
    while true {
      if let lf = buffer.firstIndex(of: 0x0A) {
        return lf > 0 && buffer[lf - 1] == 0x0D ? [0x0D, 0x0A] : [0x0A]
      }
      if buffer.count > 1024 { throw .malformed("the delimiter line is too long") }
      guard try fill() else { throw .malformed("the body ended after a delimiter") }
    }
  }

  func discardRest() throws(MultipartUpload.Failure) {
    buffer.removeAll()
    while try fill() { buffer.removeAll(keepingCapacity: true) }
  }
}
