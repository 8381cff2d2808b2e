import Foundation
import StorageCore
import Testing

@Suite struct ListTests {
  @Test func paginationOver2500Objects() async throws {
    try await EmulatorFixture.scope { fx in
      let root = fx.storage.reference(withPath: "many")
      let names = (0..<2500).map { String(format: "many/f%05d.txt", $0) }
      var index = 0
      // Upload with bounded concurrency.
      try await withThrowingTaskGroup(of: Void.self) { group in
        for _ in 0..<16 {
          group.addTask {}
        }
        for try await _ in group {
          guard index < names.count else { continue }
          let name = names[index]
          index += 1
          group.addTask { _ = try await fx.storage.reference(withPath: name).putDataAsync(Data(name.utf8)) }
        }
      }
      _ = try await fx.storage.reference(withPath: "many/sub/deeper.txt").putDataAsync(Data("x".utf8))

      var pages = 0
      var seen: [String] = []
      var prefixes: [String] = []
      var token: String? = nil
      repeat {
        let page = try await root.list(maxResults: 1000, pageToken: token)
        pages += 1
        // Only items count toward maxResults, and every page repeats the prefixes (v0 as the
        // official emulator pages it).
        #expect(page.items.count <= 1000)
        #expect(page.prefixes.map(\.fullPath) == ["many/sub"])
        seen += page.items.map(\.fullPath)
        for p in page.prefixes.map(\.fullPath) where !prefixes.contains(p) { prefixes.append(p) }
        token = page.pageToken
      } while token != nil
      #expect(pages == 3)
      #expect(seen == names)
      #expect(prefixes == ["many/sub"])

      let all = try await root.listAll()
      #expect(all.items.count == 2500)
      #expect(all.prefixes.map(\.fullPath) == ["many/sub"])

      let small = try await root.list(maxResults: 7)
      #expect(small.items.count == 7)
      #expect(small.pageToken != nil)
      await #expect(throws: StorageError.self) { try await root.list(maxResults: 0) }
    }
  }

  @Test func rawPagesKeepNamesVerbatim() async throws {
    try await EmulatorFixture.scope { fx in
      let root = fx.storage.reference()
      for name in ["a", "a/b", "folder/", "x//y", "top.txt"] {
        _ = try await root.object(named: name).putDataAsync(Data(name.utf8))
      }
      let page = try await root.listPage()
      #expect(page.items == ["a", "top.txt"])
      #expect(page.prefixes == ["a/", "folder/", "x/"])
      let inner = try await root.child("x").listPage()
      #expect(inner.prefixes == ["x//"])
    }
  }
}
