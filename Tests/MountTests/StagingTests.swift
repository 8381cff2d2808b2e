import Foundation
import ChildProcess
import TestSupport
import StorageCore
import Testing

@Suite(.serialized) struct StagingTests {

  @Test func stagedFilesReadableWhenServerIsGoneAndOffline() async throws {
    try await MountFixture.scope { fx in
      let data = randomData(3 << 20, seed: 8)
      _ = try await fx.put("keep/offline.bin", data)
      _ = try await fx.put("keep/notes.txt", Data("notes".utf8))
      _ = try await fx.put("keep/unread.txt", Data("never opened".utf8))
      let m = try fx.mount()
      #expect(try readFile(m.path("keep/offline.bin")).get() == data)
      #expect(try readFile(m.path("keep/notes.txt")).get() == Data("notes".utf8))
      try await waitStaged(m.path("keep/offline.bin"))
      try await waitStaged(m.path("keep/notes.txt"))
      fx.stopEmulator()
      // cp out of the mount with the server gone.
      let copy = fx.root.appendingPathComponent("copy.bin")
      let copied = runTool("/bin/cp", [m.path("keep/offline.bin"), copy.path])
      #expect(copied.0 == 0, "\(copied.1)")
      #expect(try Data(contentsOf: copy) == data)
      // After the metadata TTL runs out, lookups ask the server, fail, and fall back to staged copies.
      let failedBefore = m.failedRequests
      #expect(await eventually(every: .milliseconds(200)) {
        _ = readFile(m.path("keep/notes.txt"))
        return m.failedRequests > failedBefore
      })
      #expect(try readFile(m.path("keep/notes.txt")).get() == Data("notes".utf8))
      // The folder was never listed: its staged copies are two of its three objects, so a
      // listing of it fails (EIO) rather than show them as the folder (issue 55).
      #expect(opendir(m.path("keep")) == nil && errno == EIO)
      // Nor is a name in it that is not staged "no such file": the mount cannot know (EIO).
      #expect(readFile(m.path("keep/unread.txt")) == .failure(Errno(EIO)))
      m.unmount()

      let offline = try fx.mount(extra: ["--offline"], name: "offline")
      #expect(try FileManager.default.contentsOfDirectory(atPath: offline.path("keep")).sorted() == ["notes.txt", "offline.bin"])
      #expect(try readFile(offline.path("keep/offline.bin")).get() == data)
      #expect(getxattr(offline.path("keep/notes.txt"), "user.staged") == .success("complete"))
    }
  }

  @Test func stagingEvictsLeastRecentlyUsed() async throws {
    try await MountFixture.scope { fx in
      for i in 0..<4 { _ = try await fx.put("ev/f\(i).bin", randomData(1 << 20, seed: UInt64(i) + 70)) }
      let m = try fx.mount(options: ["staging_size=2500K"])
      for i in 0..<4 {
        _ = try readFile(m.path("ev/f\(i).bin")).get()
        try await waitStaged(m.path("ev/f\(i).bin"))
      }
      let staging = fx.root.appendingPathComponent("staging")
      func stagedBytes() -> Int64 {
        var total: Int64 = 0
        if let walker = FileManager.default.enumerator(atPath: staging.path) {
          while let file = walker.nextObject() as? String {
            guard file.hasSuffix(".data") else { continue }
            total += ((try? FileManager.default.attributesOfItem(atPath: staging.appendingPathComponent(file).path)[.size]) as? NSNumber)?.int64Value ?? 0
          }
        }
        return total
      }
      // Eviction follows the last copy's completion: wait for it, not for a time.
      #expect(await eventually { stagedBytes() <= 2500 * 1024 })
      let total = stagedBytes()
      #expect(total >= 1 << 20)
      #expect(getxattr(m.path("ev/f3.bin"), "user.staged") == .success("complete"))
      #expect(getxattr(m.path("ev/f0.bin"), "user.staged") == .success("none"))
      #expect((m.stagedEvicted ?? 0) >= 1, "\(m.stat("staged copies") ?? "no stats")")
    }
  }
}
