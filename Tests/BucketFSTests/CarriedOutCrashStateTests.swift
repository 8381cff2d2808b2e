@testable import BucketFS
import Foundation
import Synchronization
import Testing

/// Crash states of a queue whose changes are carried out while it records: each state a power
/// loss or `kill -9` could leave of its folder, opened by a new queue against the bucket as the
/// server had it at that moment, and carried out. No name ever goes back to a version the
/// server had moved past (a deleted file comes back, a replaced version goes up again), nothing
/// goes beside as a conflict (there is one writer), and what a commit made last is there.
@Suite struct CarriedOutCrashStateTests {
  enum Act {
    case change(CrashStateTests.Step)
    /// The workers carry out everything queued so far.
    case carryOut
    case commit
  }

  /// Replaces, deletes after an upload carried out, uploads after a delete, across three names,
  /// with every name's values distinct so that a version is known by its bytes.
  static let acts: [Act] = [
    .change(("a", Data("a1\n".utf8), .generation(0))),
    .change(("b", Data("b1\n".utf8), .generation(0))),
    .change(("a", Data("a2, replacing a1\n".utf8), .previous)),
    .carryOut,
    .change(("a", nil, .previous)),
    .change(("b", Data("b2\n".utf8), .previous)),
    .carryOut,
    .commit,
    .change(("b", Data("b3, replacing b2\n".utf8), .previous)),
    .change(("c", Data("c1\n".utf8), .generation(0))),
    .change(("c", Data("c2, replacing c1\n".utf8), .previous)),
    .carryOut,
    .change(("c", nil, .previous)),
    .change(("a", Data("a3, after the delete\n".utf8), .previous)),
    .carryOut,
    .change(("b", nil, .previous)),
  ]

  @Test func noCrashStateBringsBackAVersionTheServerMovedPast() async throws {
    let work = FileManager.default.temporaryDirectory.appendingPathComponent("carried-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: work) }
    let queueFolder = work.appendingPathComponent("queue")
    let disk = CrashStateTests.RecordingDisk()
    let bucket = MemoryObjectClient()
    bucket.clock.withLock { $0 = { disk.operations.count } }
    let queue = try WriteBackQueue(folder: queueFolder, disk: disk, commit: 3600) { _ in }
    queue.start(client: bucket) { _, _ in }
    var steps: [CrashStateTests.Step] = []
    var issued: [Int] = []
    var lasted: [Int?] = []
    for act in Self.acts {
      switch act {
      case .change(let step):
        issued.append(disk.operations.count)
        lasted.append(nil)
        try CrashStateTests.perform(step, as: steps.count, on: queue, disk: disk)
        steps.append(step)
      case .carryOut:
        let left = await queue.waitUntilEmpty(within: 30)
        #expect(left.changes == 0, "\(queue.describe())")
      case .commit:
        try queue.commit()
        for j in lasted.indices where lasted[j] == nil { lasted[j] = disk.operations.count }
      }
    }
    let ops = disk.operations
    let history = bucket.history.withLock { $0 }
    let states = CrashStateTests.crashStates(ops, folder: queueFolder.path)
    #expect(states.count > ops.count, "\(states.count) states from \(ops.count) operations")
    let covered = Set(CrashStateTests.crashStates(ops, folder: queueFolder.path, onlyCovered: true).map(\.files))
    // Every state when there are few; else an even sample of them, the last among them.
    let picked = states.count <= 300 ? Array(states.indices) : Array(Set(stride(from: 0, to: states.count, by: states.count / 300) + [states.count - 1])).sorted()
    let names = Set(steps.map(\.name))
    for index in picked {
      let (cut, files) = states[index]
      let label = "state \(index) of \(states.count) (after \(cut) of \(ops.count) operations: \(files.keys.sorted()))"
      let replay = work.appendingPathComponent("state-\(index)")
      try FileManager.default.createDirectory(at: replay, withIntermediateDirectories: true)
      defer { try? FileManager.default.removeItem(at: replay) }
      for (name, data) in files { try data.write(to: replay.appendingPathComponent(name)) }
      // The server as it was at the cut: every change it had made by then.
      let server = history.last { $0.at <= cut }?.objects ?? [:]
      let next = MemoryObjectClient()
      next.seed(server)
      let reopened = try WriteBackQueue(folder: replay) { _ in }
      if covered.contains(files) {
        #expect(reopened.totals.damaged == 0, "\(label): \(reopened.totals.damaged) records set aside as damaged")
      }
      reopened.start(client: next) { _, _ in }
      let left = await reopened.waitUntilEmpty(within: 30)
      #expect(left.changes == 0, "\(label): not carried out: \(reopened.describe())")
      let final = next.objects.withLock { $0.mapValues(\.0) }
      #expect(!final.keys.contains { $0.contains(".conflict-") }, "\(label): \(final.keys.sorted())")
      for name in names {
        let mine = steps.indices.filter { steps[$0].name == name && issued[$0] < cut }
        // The newest of the name's steps the server had, or that a commit made last: the name
        // ends there or at a step after it, never before.
        let onServer = mine.last { steps[$0].bytes == server[name]?.0 } ?? -1
        let committed = mine.last { lasted[$0].map { $0 <= cut } ?? false } ?? -1
        let floor = max(onServer, committed)
        let allowed: [Data?] = (floor == -1 ? [nil] : []) + mine.filter { $0 >= floor }.map { steps[$0].bytes }
        let shown = final[name].map { String(decoding: $0, as: UTF8.self) } ?? "absent"
        #expect(allowed.contains(final[name]), "\(label): \(name) ends as \(shown); the server had step \(onServer), step \(committed) was committed")
      }
    }
  }
}
