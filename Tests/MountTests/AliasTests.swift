import Foundation
import StorageCore
import Testing

/// An object `a`, a folder `a/`, an object `a.object` and a folder `a.object/`, in every
/// combination: every shown name is unique and reads exactly one object, every object is
/// reachable, and an alias never shadows a real object.
@Suite(.serialized) struct AliasTests {
  static let objects: [(name: String, bytes: String)] = [
    ("a", "object a"), ("a/x", "object a/x"), ("a.object", "object a.object"), ("a.object/y", "object a.object/y"),
  ]

  @Test func everyCombinationOfObjectFolderAndAlias() async throws {
    try await MountFixture.scope { fx in
      var cases: [(folder: String, present: [(name: String, bytes: String)])] = []
      for mask in 1..<16 {
        let present = Self.objects.enumerated().filter { mask & (1 << $0.offset) != 0 }.map(\.element)
        let folder = "c\(mask)"
        for o in present { _ = try await fx.put("\(folder)/\(o.name)", Data(o.bytes.utf8)) }
        cases.append((folder, present))
      }
      let listed = try fx.mount()
      let fresh = try fx.mount(name: "fresh")
      for c in cases {
        let label = "\(c.folder): \(c.present.map(\.name))"
        let names = try FileManager.default.contentsOfDirectory(atPath: listed.path(c.folder))
        #expect(Set(names).count == names.count, "duplicate names in \(label): \(names)")
        // Files shown, and what each reads.
        var reads: [String: String] = [:]
        for name in names {
          var isDir: ObjCBool = false
          _ = FileManager.default.fileExists(atPath: listed.path("\(c.folder)/\(name)"), isDirectory: &isDir)
          if isDir.boolValue { continue }
          reads[name] = String(decoding: try readFile(listed.path("\(c.folder)/\(name)")).get(), as: UTF8.self)
          // The same name resolves to the same object on a mount that never listed the folder.
          let direct = String(decoding: try readFile(fresh.path("\(c.folder)/\(name)")).get(), as: UTF8.self)
          #expect(direct == reads[name], "\(label): \(name) reads \(direct.debugDescription) without a listing")
        }
        let topObjects = c.present.filter { !$0.name.contains("/") }.map(\.bytes).sorted()
        #expect(reads.values.sorted() == topObjects, "\(label): files read \(reads)")
        // A real object keeps its own name whenever no folder takes it.
        let folders = Set(c.present.compactMap { $0.name.split(separator: "/").count > 1 ? String($0.name.split(separator: "/")[0]) : nil })
        for o in c.present where !o.name.contains("/") && !folders.contains(o.name) {
          #expect(reads[o.name] == o.bytes, "\(label): \(o.name) is not itself")
        }
        // Folders hold their objects.
        for o in c.present where o.name.contains("/") {
          #expect(try readFile(listed.path("\(c.folder)/\(o.name)")).get() == Data(o.bytes.utf8), "\(label): \(o.name)")
        }
      }
    }
  }
}
