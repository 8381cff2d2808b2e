import Foundation

/// Splits a `multipart/related` body into its parts.
enum MultipartBody {
  struct Part {
    var contentType: String?
    var body: Data
  }

  static func split(_ data: Data, boundary: String) -> [Part] {
    let delimiter = Data("--\(boundary)".utf8)
    var parts: [Part] = []
    var searchStart = data.startIndex
    guard var current = data.range(of: delimiter, in: searchStart..<data.endIndex) else { return [] }
    while true {
      searchStart = current.upperBound
      // "--" after the delimiter closes the body.
      if data[searchStart...].starts(with: Data("--".utf8)) { break }
      guard let next = data.range(of: Data("\r\n".utf8) + delimiter, in: searchStart..<data.endIndex) else { break }
      var part = data[searchStart..<next.lowerBound]
      if part.starts(with: Data("\r\n".utf8)) { part = part.dropFirst(2) }
      // A part may have no headers at all (Go's client sends the media part that way).
      let headerEnd: Range<Data.Index>
      if part.starts(with: Data("\r\n".utf8)) {
        headerEnd = part.startIndex..<(part.startIndex + 2)
      } else if let end = part.range(of: Data("\r\n\r\n".utf8)) {
        headerEnd = end
      } else {
        break
      }
      let headerText = String(decoding: part[part.startIndex..<headerEnd.lowerBound], as: UTF8.self)
      var type: String?
      for line in headerText.split(separator: "\r\n") {
        let kv = line.split(separator: ":", maxSplits: 1)
        if kv.count == 2, kv[0].lowercased() == "content-type" { type = kv[1].trimmingCharacters(in: .whitespaces) }
      }
      parts.append(Part(contentType: type, body: Data(part[headerEnd.upperBound...])))
      current = (next.lowerBound + 2)..<next.upperBound
    }
    return parts
  }
}
