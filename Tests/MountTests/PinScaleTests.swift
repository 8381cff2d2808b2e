import Foundation
import ChildProcess
import StorageCore
import StorageEmulator
import TestSupport
import Testing

/// Issue 55: pins of many folders. An offline walk costs no more than an online one and nothing
/// gets slower with use; keeping a pin fresh costs a listing per 1,000 objects and a request per
/// changed object, not a request per folder.
@Suite(.serialized) struct PinScaleTests {
  static let folders = 2_000

  /// `bucketfs ARGS`: exit status and what it printed (both streams).
  private func bucketfs(_ args: [String]) -> (Int32, String) { runTool(bucketfsBinary, args, timeout: .seconds(240)) }

  /// What `body` took, in seconds: only ever compared with another measured beside it.
  private func seconds(_ body: () -> Void) -> Double {
    let start = ContinuousClock.now
    body()
    let took = ContinuousClock.now - start
    return Double(took.components.seconds) + Double(took.components.attoseconds) / 1e18
  }

  /// The CPU time mount `m`'s daemon used so far, in clock ticks (user and system): work done,
  /// which a busy machine slows down less than the wall clock.
  private func cpuTicks(_ m: MountedBucket) -> Int {
    guard let stat = try? String(contentsOfFile: "/proc/\(m.process.pid)/stat", encoding: .utf8),
      let close = stat.lastIndex(of: ")")
    else { return -1 }
    // After the command's name: state is field 3, utime 14 and stime 15.
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    return (Int(fields[11]) ?? 0) + (Int(fields[12]) ?? 0)
  }

  /// `folders` folders of one small file each under `tree/`.
  private func makeTree(_ fx: MountFixture, folders: Int = folders) async throws {
    for i in 0..<folders { _ = try await fx.put("tree/d\(i)/f.txt", Data("file \(i)\n".utf8)) }
  }

  /// `count` folders of one small file each under `tree/`, 32 made at a time.
  private func makeTreeQuickly(_ fx: MountFixture, folders count: Int) async throws {
    for start in stride(from: 0, to: count, by: 32) {
      try await withThrowingTaskGroup(of: Void.self) { group in
        for i in start..<min(count, start + 32) { group.addTask { _ = try await fx.put("tree/d\(i)/f.txt", Data("file \(i)\n".utf8)) } }
        try await group.waitForAll()
      }
    }
  }

  /// The pin passes of mount `m` so far, and the objects they fetched (`bucketfs stats`).
  private func passes(_ m: MountedBucket) -> (done: Int, fetched: Int)? {
    guard let line = m.stat("pin passes") else { return nil }
    let numbers = line.split(whereSeparator: { !$0.isNumber }).compactMap { Int($0) }
    return numbers.count >= 2 ? (numbers[0], numbers[1]) : nil
  }

  /// Issue 55: an idle pin of 2,000 files in 2,000 folders costs the server at most ⌈N/1000⌉
  /// requests a pass (one recursive listing), not a listing per folder and (v0) a metadata
  /// request per object; an object changed outside is fetched again, and no other.
  @Test(arguments: ["firebase", "gcs"]) func keepingAPinFreshCostsAListingPageAThousandObjects(api: String) async throws {
    try await MountFixture.scope { fx in
      try await makeTreeQuickly(fx, folders: Self.folders)
      let m = try fx.mount(options: ["metadata_ttl=600", "pin_interval=1"], extra: ["--api", api], name: api)
      let (status, output) = bucketfs(["pin", m.path("tree")])
      #expect(status == 0, "\(output)")
      let emulator = try #require(fx.emulator)
      // From the end of one pass to the end of a later one: each pass between costs its pages,
      // and the pass after the last may have begun (one more pass's worth at most).
      #expect(await eventually { (passes(m)?.done ?? 0) >= 1 }, "\(m.stat("pin passes") ?? String(m.log.suffix(500)))")
      let first = try #require(passes(m))
      let requestsBefore = emulator.requestsServed
      #expect(await eventually { (passes(m)?.done ?? 0) >= first.done + 3 })
      let requests = emulator.requestsServed - requestsBefore
      let last = try #require(passes(m))
      let perPass = (Self.folders + 999) / 1000
      #expect(requests <= (last.done - first.done + 1) * perPass, "\(requests) requests in \(last.done - first.done) passes")
      #expect(last.fetched == first.fetched, "\(m.stat("pin passes") ?? "")")

      // One object changed outside the mount. The GCS listing carries its generation; a v0
      // listing has names only, so there `refresh` asks every object's metadata.
      _ = try await fx.put("tree/d7/f.txt", Data("changed\n".utf8))
      if api == "firebase" {
        let (refreshed, text) = bucketfs(["refresh", m.mountpoint.path, m.path("tree")])
        #expect(refreshed == 0, "\(text)")
      }
      #expect(await eventually { (passes(m)?.fetched ?? 0) >= last.fetched + 1 }, "\(m.stat("pin passes") ?? "")")
      let changed = try #require(passes(m))
      #expect(await eventually { (passes(m)?.done ?? 0) >= changed.done + 2 })
      #expect(passes(m)?.fetched == last.fetched + 1, "only the changed object is fetched: \(m.stat("pin passes") ?? "")")
      m.unmount()
      let offline = try fx.mount(options: ["offline"], name: "offline-\(api)")
      #expect((try? String(contentsOfFile: offline.path("tree/d7/f.txt"), encoding: .utf8)) == "changed\n")
      #expect((try? String(contentsOfFile: offline.path("tree/d8/f.txt"), encoding: .utf8)) == "file 8\n")
    }
  }

  /// The files `find` finds under `path`, and what it said when it failed.
  private func find(_ path: String) -> (count: Int, output: String) {
    let (status, output) = runTool("/usr/bin/find", [path, "-type", "f"])
    return (status == 0 ? output.split(separator: "\n").count : -1, output)
  }

  @Test func anOfflineWalkOfPinnedFoldersCostsNoMoreThanAnOnlineOneAndNeverSlowsDown() async throws {
    try await MountFixture.scope { fx in
      try await makeTree(fx)
      let m = try fx.mount()
      let (status, output) = bucketfs(["pin", m.path("tree")])
      #expect(status == 0, "\(output)")
      m.unmount()

      // Side by side: a walk of a fresh online mount (each folder listed by the server), then
      // the same walk of an offline mount of the pin.
      let online = try fx.mount(name: "online")
      var walked = (count: 0, output: "")
      let onlineWalk = seconds { walked = find(online.path("tree")) }
      #expect(walked.count == Self.folders, "\(walked.output.suffix(300))")
      online.unmount()
      let offline = try fx.mount(options: ["offline"], name: "offline")
      let offlineWalk = seconds { walked = find(offline.path("tree")) }
      #expect(walked.count == Self.folders, "\(walked.output.suffix(300))")
      #expect(offlineWalk <= onlineWalk, "offline walk \(offlineWalk) s, online \(onlineWalk) s")

      // The same listing 100 times, as issue 55 asks (about 1.6 s in all): the last runs cost
      // the daemon as much work as the first.
      var runs: [Int] = []
      for _ in 0..<100 {
        let before = cpuTicks(offline)
        let (listed, text) = runTool("/bin/ls", ["-l", offline.path("tree")])
        #expect(listed == 0, "\(text.suffix(300))")
        runs.append(cpuTicks(offline) - before)
      }
      // Sums of ten runs, with 10 ticks (a tick a run) for the clock's grain: before issue 55
      // the first ten took 1,800 ticks and the last ten 4,000 until the daemon died; after it,
      // about 10 each.
      let first = runs.prefix(10).reduce(0, +)
      let last = runs.suffix(10).reduce(0, +)
      #expect(last <= first * 2 + 10, "daemon CPU ticks of each run: \(runs)")
    }
  }
}
