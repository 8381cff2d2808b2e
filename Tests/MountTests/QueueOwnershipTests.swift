import Foundation
import StorageCore
import TestSupport
import Testing

/// Whose changes a write-back queue holds: one running mount's at a time, and a mount of one
/// folder of the bucket never carries out those made through a mount of another.
@Suite(.serialized) struct QueueOwnershipTests {
  /// Two writable mounts of the same folder with one staging folder (two writers on one
  /// machine) would share one journal, and each would remove the other's open files as a dead
  /// mount's: the second queues in a folder of its own, and both write back. What a mount left
  /// queued there is carried out by the next mount, even one alone; a mount killed with -9
  /// holds no queue.
  @Test func twoWritableMountsOfOneFolderEachHaveAQueue() async throws {
    try await MountFixture.scope { fx in
      let first = try fx.mount(options: ["writable"], name: "first")
      let second = try fx.mount(options: ["writable"], name: "second")
      #expect(second.log.contains("this one queues in"), "\(second.log)")
      for i in 0..<20 {
        #expect(FileManager.default.createFile(atPath: first.path("one-\(i).txt"), contents: Data("one \(i)".utf8)))
        #expect(FileManager.default.createFile(atPath: second.path("two-\(i).txt"), contents: Data("two \(i)".utf8)))
      }
      for m in [first, second] {
        let (status, output) = m.sync()
        #expect(status == 0, "\(output)")
      }
      for i in 0..<20 {
        #expect(await fx.object("one-\(i).txt") == Data("one \(i)".utf8))
        #expect(await fx.object("two-\(i).txt") == Data("two \(i)".utf8))
      }
      // Killed, the first holds nothing: the next mount takes its queue at once.
      kill(first.process.pid, SIGKILL)
      first.unmount()
      let next = try fx.mount(options: ["writable"], name: "next")
      #expect(!next.log.contains("this one queues in"), "\(next.log)")
      // An offline mount beside it queues in a folder of its own, and ends with its change queued.
      let offline = try fx.mount(options: ["writable", "offline"], name: "offline")
      var (status, output) = offline.shell("printf 'made offline' > offline.txt")
      #expect(status == 0, "\(output)")
      offline.unmount()
      second.unmount()
      next.unmount()
      // A mount alone takes the queue that holds a change before the empty one.
      let alone = try fx.mount(options: ["writable"], name: "alone")
      (status, output) = alone.sync()
      #expect(status == 0, "\(output)")
      #expect(await fx.object("offline.txt") == Data("made offline".utf8))
    }
  }

  /// A change queued through a mount of `photos/` names `a.txt` below that folder: a mount of
  /// `docs/` with the same staging folder has a queue of its own and never uploads it as
  /// `docs/a.txt`; the next mount of `photos/` does, as `photos/a.txt`. Mounts of two folders
  /// write back side by side.
  @Test func eachFolderOfTheBucketHasItsOwnQueue() async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("photos/seen.txt", Data("p".utf8))
      _ = try await fx.put("docs/seen.txt", Data("d".utf8))
      let offline = try fx.mount(prefix: "photos", options: ["writable", "offline"], name: "photos-offline")
      var (status, output) = offline.shell("printf 'a photo' > a.txt")
      #expect(status == 0, "\(output)")
      offline.unmount()
      let docs = try fx.mount(prefix: "docs", options: ["writable"], name: "docs")
      let photos = try fx.mount(prefix: "photos", options: ["writable"], name: "photos")
      (status, output) = docs.shell("printf 'a doc' > b.txt")
      #expect(status == 0, "\(output)")
      for m in [photos, docs] {
        (status, output) = m.sync()
        #expect(status == 0, "\(output)")
      }
      #expect(await fx.object("photos/a.txt") == Data("a photo".utf8))
      #expect(await fx.object("docs/b.txt") == Data("a doc".utf8))
      #expect(await fx.object("docs/a.txt") == nil)
      #expect(await fx.object("a.txt") == nil)
    }
  }
}
