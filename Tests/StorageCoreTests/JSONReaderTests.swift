import Foundation
import Testing

@testable import StorageCore

/// The list reader against Foundation's: the same values for every document, names with every
/// escape JSON has, and nil for what is not JSON.
@Suite struct JSONReaderTests {
  /// `value` as Foundation's JSONSerialization gives it, to compare with.
  func plain(_ v: JSONValue) -> Any {
    switch v {
    case .object(let m): return Dictionary(m.map { ($0.0, plain($0.1)) }, uniquingKeysWith: { a, _ in a }) as [String: Any]
    case .array(let a): return a.map(plain)
    case .string(let s): return s
    case .number(let n): return Double(n)!
    case .bool(let b): return b
    case .null: return NSNull()
    }
  }

  func same(_ a: Any, _ b: Any) -> Bool {
    switch (a, b) {
    case (let x as [String: Any], let y as [String: Any]):
      return x.count == y.count && x.allSatisfy { k, v in y[k].map { same(v, $0) } ?? false }
    case (let x as [Any], let y as [Any]): return x.count == y.count && zip(x, y).allSatisfy { same($0, $1) }
    case (let x as String, let y as String): return x.utf8.elementsEqual(y.utf8)
    case (let x as Bool, let y as NSNumber): return x == y.boolValue
    case (let x as Double, let y as NSNumber): return x == y.doubleValue
    case (is NSNull, is NSNull): return true
    default: return false
    }
  }

  @Test(arguments: [
    #"{"items":[{"name":"a\"b\\c\/d","size":"12"}],"nextPageToken":"t"}"#,
    #"{"s":"tab\tnew\nline\r\b\f","u":"\u00e9\u0041\ud83d\ude00","raw":"café 😀","e":"","n":[1,-2.5,3e2,0]}"#,
    #"  [ true , false , null , { } , [ ] , "x" ]  "#,
    #"{"deep":{"er":{"est":[[["ok"]]]}}}"#,
  ])
  func readsAsFoundationDoes(document: String) throws {
    let data = Data(document.utf8)
    let mine = try #require(JSONValue.read(data))
    let theirs = try JSONSerialization.jsonObject(with: data, options: .fragmentsAllowed)
    #expect(same(plain(mine), theirs), "\(document)")
  }

  @Test(arguments: [
    "", "{", #"{"a":}"#, #"{"a" 1}"#, #"["a",]"#, "[1 2]", #""unterminated"#, #"{"a":"\x"}"#, "tru", #"{"a":1}x"#,
    "\"control \u{01} char\"", #""\u12G4""#, String(repeating: "[", count: 100) + String(repeating: "]", count: 100),
  ])
  func refusesWhatIsNotJSON(document: String) {
    #expect(JSONValue.read(Data(document.utf8)) == nil, "\(document.debugDescription)")
  }

  @Test func aLoneSurrogateIsAReplacementCharacter() throws {
    let v = try #require(JSONValue.read(Data(#"["\ud800x","\udc00"]"#.utf8)))
    #expect(v.array?.compactMap(\.string) == ["\u{FFFD}x", "\u{FFFD}"])
  }

  @Test func aGCSPageBecomesItsItemsMetadataAndToken() throws {
    let page = #"""
      {"kind":"storage#objects","nextPageToken":"next\/one","prefixes":["a/","b/"],
       "items":[{"name":"x\u00e9","bucket":"bk","size":"42","generation":"1700000000000001","metageneration":"3",
                 "updated":"2026-01-02T03:04:05.678Z","crc32c":"AAAAAA==","contentType":"text/plain",
                 "metadata":{"k":"v","n":7,"firebaseStorageDownloadTokens":"tok","caf\u00e9 \"q\"":"x"},
                 "selfLink":"http://h/o/x","kind":"storage#object","id":"bk/x/1","extra":{"nested":[1,{"a":"b\"c"}]}},
                {"name":"v0-only"}]}
      """#
    let listed = try #require(ListPage.decode(Data(page.utf8)))
    #expect(listed.prefixes == ["a/", "b/"])
    #expect(listed.items == ["xé", "v0-only"])
    #expect(listed.nextPageToken == "next/one")
    let m = try #require(listed.metadata["xé"])
    #expect(m.size == 42 && m.generation == 1_700_000_000_000_001 && m.metageneration == 3)
    #expect(m.contentType == "text/plain" && m.crc32c == "AAAAAA==" && m.bucket == "bk")
    #expect(m.customMetadata == ["k": "v", "n": "7", "café \"q\"": "x"])
    #expect(m.downloadTokens == "tok")
    #expect(m.updated == StorageMetadata.parseDate("2026-01-02T03:04:05.678Z"))
    #expect(listed.metadata["v0-only"] == nil)
    #expect(ListPage.decode(Data("[1]".utf8)) == nil)
    #expect(ListPage.decode(Data(#"{"items":[{"name":"a","size":"1"}"#.utf8)) == nil)
    #expect(ListPage.decode(Data(#"{"items":[{"name":"a","size":"1"}]} x"#.utf8)) == nil)
    #expect(ListPage.decode(Data(#"{"items":[{"name":"a","size":"1","extra":{"x":"\#u{01}"}}]}"#.utf8)) == nil)
  }
}

/// The JSON the client writes by hand reads back as what was meant, for any text.
@Suite struct JSONWriterTests {
  @Test func anUploadsMetadataReadsBackWhateverItHolds() throws {
    let odd = ["plain", "quote\"back\\slash", "tab\tnew\nline\rcr", "nul\u{0}bell\u{7}del\u{7f}", "café 日本語 😀", "slash/and/more", ""]
    for (i, text) in odd.enumerated() {
      let m = StorageMetadata()
      m.contentType = "text/plain; x=\"\(text)\""
      m.cacheControl = i % 2 == 0 ? "no-cache" : nil
      m.customMetadata = [text: "v\(i)", "k\(i)": text, "goog-reserved-posix-mode": "644"]
      let written = m.writableJSON(name: "dir/\(text)")
      let read = try #require(try JSONSerialization.jsonObject(with: written) as? [String: Any], "\(String(decoding: written, as: UTF8.self))")
      #expect(read["name"] as? String == "dir/\(text)")
      #expect(read["contentType"] as? String == m.contentType)
      #expect(read["cacheControl"] as? String == m.cacheControl)
      #expect(read["metadata"] as? [String: String] == m.customMetadata)
      #expect(read.count == (i % 2 == 0 ? 4 : 3))
    }
  }
}
