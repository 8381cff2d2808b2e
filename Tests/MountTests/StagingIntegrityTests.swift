import Foundation
import TestSupport
import StorageCore
import Testing

/// A staged copy damaged on disk (a flipped byte, a truncation, an append) is never served:
/// online the read goes to the server, offline it fails with EIO, and the copy is dropped.
@Suite(.serialized) struct StagingIntegrityTests {
  enum Damage: CustomStringConvertible {
    case flip(Double)
    case truncate
    case append
    var description: String {
      switch self {
      case .flip(let at): return "a byte flipped at \(Int(at * 100))%"
      case .truncate: return "truncated"
      case .append: return "appended to"
      }
    }

    func apply(to path: String) throws {
      let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
      defer { try? handle.close() }
      let size = try handle.seekToEnd()
      switch self {
      case .flip(let at):
        let offset = min(size - 1, UInt64(Double(size) * at))
        try handle.seek(toOffset: offset)
        let byte = try handle.read(upToCount: 1)!
        try handle.seek(toOffset: offset)
        try handle.write(contentsOf: Data([byte[0] ^ 0x01]))
      case .truncate:
        try handle.truncate(atOffset: size - 1000)
      case .append:
        try handle.write(contentsOf: Data("extra".utf8))
      }
    }
  }


  /// The staged data files, by size.
  func stagedFiles(_ staging: URL) -> [Int64: String] {
    var out: [Int64: String] = [:]
    let walker = FileManager.default.enumerator(atPath: staging.path)
    while let file = walker?.nextObject() as? String {
      guard file.hasSuffix(".data") else { continue }
      let path = staging.appendingPathComponent(file).path
      let size = ((try? FileManager.default.attributesOfItem(atPath: path)[.size]) as? NSNumber)?.int64Value ?? -1
      out[size] = path
    }
    return out
  }

  @Test func damagedCopiesAreDroppedNotServed() async throws {
    try await MountFixture.scope { fx in
      let small = randomData(5 << 20, seed: 31)
      let large = randomData(200 << 20, seed: 32)
      _ = try await fx.put("d/small.bin", small)
      _ = try await fx.put("d/large.bin", large)
      let first = try fx.mount()
      #expect(try readFile(first.path("d/small.bin")).get() == small)
      #expect(try readFile(first.path("d/large.bin")).get() == large)
      try await waitStaged(first.path("d/small.bin"))
      try await waitStaged(first.path("d/large.bin"))
      first.unmount()

      let staging = fx.root.appendingPathComponent("staging")
      let files = stagedFiles(staging)
      let smallPath = try #require(files[Int64(small.count)])
      let largePath = try #require(files[Int64(large.count)])
      // Pristine copies of the data and index files, restored before each case.
      let pristine = try fx.folder("pristine")
      for path in [smallPath, largePath] {
        for file in [path, String(path.dropLast(5)) + ".json"] {
          try FileManager.default.copyItem(atPath: file, toPath: pristine.appendingPathComponent(URL(fileURLWithPath: file).lastPathComponent).path)
        }
      }
      func restore() throws {
        for path in [smallPath, largePath] {
          for file in [path, String(path.dropLast(5)) + ".json"] {
            try? FileManager.default.removeItem(atPath: file)
            try FileManager.default.copyItem(atPath: pristine.appendingPathComponent(URL(fileURLWithPath: file).lastPathComponent).path, toPath: file)
          }
        }
      }
      let cases: [(String, Data, String, Damage)] = [
        ("d/small.bin", small, smallPath, .flip(0)), ("d/small.bin", small, smallPath, .flip(0.5)),
        ("d/small.bin", small, smallPath, .flip(1)), ("d/large.bin", large, largePath, .flip(0)),
        ("d/large.bin", large, largePath, .flip(0.5)), ("d/large.bin", large, largePath, .flip(1)),
        ("d/small.bin", small, smallPath, .truncate), ("d/large.bin", large, largePath, .append),
      ]
      for (i, (name, data, path, damage)) in cases.enumerated() {
        // Offline: the damaged copy fails with EIO, is dropped, and says so.
        try restore()
        try damage.apply(to: path)
        let offline = try fx.mount(extra: ["--offline"], name: "offline\(i)")
        let read = readFile(offline.path(name))
        #expect(read == .failure(Errno(EIO)), "offline read of \(name) \(damage): \(read.map(\.count))")
        #expect(getxattr(offline.path(name), "user.staged") != .success("complete"), "\(name) \(damage) still says complete")
        // The request that found the damage drops the copy; another request may have answered
        // EIO first.
        _ = await eventually(timeout: .seconds(3)) { offline.stagedDropped == 1 }
        #expect(offline.stagedDropped == 1, "\(name) \(damage): \(offline.stat("staged copies") ?? "no stats"); \(offline.log)")
        offline.unmount()
        #expect(!FileManager.default.fileExists(atPath: path), "\(name) \(damage): the damaged copy was kept")
        // Online: the right bytes, from the server.
        try restore()
        try damage.apply(to: path)
        let online = try fx.mount(name: "online\(i)")
        let bytes = try readFile(online.path(name)).get()
        #expect(bytes == data, "online read of \(name) \(damage) returned wrong bytes")
        online.unmount()
      }
    }
  }
}
