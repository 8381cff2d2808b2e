// A queue record's JSON, written by hand (`JSONWriter`): every close of a file writes one or two
// records, and Foundation's JSONEncoder was a seventh of the daemon's time in an untar. The text
// is what `PendingChange.encode(to:)` gives, key for key, so that any mount, of this version or
// an earlier one, reads it with JSONDecoder (the round trip is tested for odd names, every life
// and every base). The rare parts with nesting of their own
// (a rename's source, an overlay's ranges) still go through JSONEncoder.
import Foundation
import StorageCore

extension PendingChange {
  /// This change's record, as `JSONEncoder().encode(self)` would write it.
  func record() throws -> Data {
    var json = JSONWriter()
    json.field("sequence") { $0.number(sequence) }
    json.field("kind") { $0.string(kind.rawValue) }
    json.field("name") { $0.string(name) }
    json.field("base") { j in
      // The shape Swift's synthesized Codable gives an enum with payloads.
      switch base {
      case .generation(let g): j.raw("{\"generation\":{\"_0\":\(g)}}")
      case .any: j.raw("{\"any\":{}}")
      case .previous: j.raw("{\"previous\":{}}")
      }
    }
    if let contentType { json.field("contentType") { $0.string(contentType) } }
    if let mtime { json.field("mtime") { $0.raw("[\(mtime.seconds),\(mtime.nanoseconds)]") } }
    if let custom { json.field("custom") { $0.strings(custom) } }
    if let sessionURL { json.field("sessionURL") { $0.string(sessionURL) } }
    if let source { try json.field("source", encoded: source) }
    if let dataSize { json.field("dataSize") { $0.number(dataSize) } }
    if let dataCRC32C { json.field("dataCRC32C") { $0.number(dataCRC32C) } }
    if let overlay { try json.field("overlay", encoded: overlay) }
    if let appendedFrom { json.field("appendedFrom") { $0.number(appendedFrom) } }
    if let rebase { try json.field("rebase", encoded: rebase) }
    if let renamedInto { json.field("renamedInto") { $0.number(renamedInto) } }
    if let grows { try json.field("grows", encoded: grows) }
    switch life {
    case .pending: json.field("state") { $0.string("pending") }
    case .replaced(let newer):
      json.field("state") { $0.string("replaced") }
      json.field("replacedBy") { $0.number(newer) }
    case .started: json.field("state") { $0.string("started") }
    case .done(let effect):
      json.field("state") { $0.string("done") }
      switch effect {
      case .generation(let g): json.field("produced") { $0.number(g) }
      case .unknown: break
      case .merged(let g):
        json.field("produced") { $0.number(g) }
        json.field("merged") { $0.raw("true") }
      case .conflict(let name, let generation):
        json.field("conflictName") { $0.string(name) }
        if let generation { json.field("produced") { $0.number(generation) } }
      }
    case .failed(let why):
      json.field("state") { $0.string("failed") }
      json.field("error") { $0.string(why) }
    }
    return json.finish()
  }
}
