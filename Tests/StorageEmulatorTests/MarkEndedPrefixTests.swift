import Foundation
import TestSupport
import StorageEmulator
import Testing

/// A folder whose name ends in a prepend mark (U+0600) is listed on both APIs: "p\u{600}/" is
/// one character to Swift, the mark and the slash together, so a `hasSuffix("/")` check of the
/// prefix refused the v0 listing with 400 (and a mount showed the folder but `ls` of it failed).
@Suite struct MarkEndedPrefixTests {
  @Test func aFolderEndingInAPrependMarkIsListed() throws {
    try scope(Server()) { s in
      let folder = "p\u{600}"
      #expect(EmulatorTests().upload(s, folder + "/x", "x").hasPrefix("HTTP/1.1 200"))
      let prefix = (folder + "/").addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
      let v0 = s.request("GET /v0/b/bk/o?prefix=\(prefix)&delimiter=%2F HTTP/1.1\r\nConnection: close\r\n\r\n")
      #expect(v0.hasPrefix("HTTP/1.1 200"), "\(v0.prefix(300))")
      #expect(v0.contains("\"name\""))
      let gcs = s.request("GET /storage/v1/b/bk/o?prefix=\(prefix)&delimiter=%2F HTTP/1.1\r\nConnection: close\r\n\r\n")
      #expect(gcs.hasPrefix("HTTP/1.1 200"), "\(gcs.prefix(300))")
      #expect(gcs.contains("\"items\""))
    }
  }
}
