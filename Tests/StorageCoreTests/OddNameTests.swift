import Foundation
import StorageCore
import Testing

/// Object names that break naive clients and servers.
let oddNames: [String] = [
  "with space.txt", "  leading spaces", "trailing space ", "unicode-é-ü-ß.txt", "日本語/ファイル.txt",
  "emoji-🙂.txt", "percent%20literal", "100%", "%2F-not-a-slash", "hash#tag", "question?mark",
  "plus+sign", "amp&ersand", "equals=sign", "semi;colon", "comma,name", "at@sign", "dollar$",
  "quote'single", "quote\"double", "back\\slash", "brackets[1]", "braces{x}", "pipe|name",
  "caret^", "tilde~", "backtick`", "star*", "paren(1)", "colon:name", "less<more>",
  "nested/a/b/c/d/e.txt", "a", "a/b", "dir.with.dots/file", "-dash-start", ".hidden",
  "..dots", "...", "tab\tname", "bell\u{07}name", "escape\u{1b}[0m", "mixed/Case/FILE.TXT",
  String(repeating: "x", count: 255), String(repeating: "d/", count: 40) + "deep",
  String(repeating: "L", count: 1024), "ümlaut/ordner/datei", "space folder/space file",
  "x/../escape-attempt", "/leading-slash",
]

@Suite struct OddNameTests {
  @Test func fiftyOddNamesRoundTrip() async throws {
    #expect(oddNames.count >= 50)
    #expect(Set(oddNames).count == oddNames.count)
    try await EmulatorFixture.scope { fx in
      let root = fx.storage.reference()
      for name in oddNames {
        let ref = root.object(named: name)
        let bytes = Data(("content of " + name).utf8)
        let metadata = try await ref.putDataAsync(bytes)
        #expect(metadata.path == name, "name \(name.debugDescription)")
        #expect(try await ref.data(maxSize: 4096) == bytes, "name \(name.debugDescription)")
        #expect(try await ref.getMetadata().size == Int64(bytes.count))
      }
      var listed: [String] = []
      var token: String? = nil
      repeat {
        let page = try await root.listPage(delimiter: nil, pageToken: token, maxResults: 7)
        listed += page.items
        token = page.nextPageToken
      } while token != nil
      #expect(Set(listed) == Set(oddNames))
      #expect(listed.count == oddNames.count)
      // What GCS refuses, the emulator refuses too (400), and nothing is stored.
      for name in ["newline\nname", "CR\rname", String(repeating: "L", count: 1025)] {
        await #expect(throws: StorageError.self, "name \(name.debugDescription.prefix(20))") {
          _ = try await root.object(named: name).putDataAsync(Data("x".utf8))
        }
      }
      // Nothing escaped the emulator's root.
      let outside = try FileManager.default.contentsOfDirectory(atPath: fx.root.path)
      #expect(outside == ["server"])
    }
  }
}
