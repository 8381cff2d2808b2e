import BucketFS
import Foundation
import StorageCore
import StorageEmulator
import TestSupport
import Testing

/// A pin whose tree was never listed whole holds no folder whole (issue 55 F5).
extension PinTests {
  /// The line of the pin shown as `path` in `user.bucketfs.pins`, its fields read back exactly.
  fileprivate func pinLine(_ m: MountedBucket, exactly path: String) -> [String]? {
    guard case .success(let text) = getxattr(m.mountpoint.path, "user.bucketfs.pins", size: 1 << 20) else { return nil }
    return PinStatusLine.lines(text).first { $0.count >= 9 && ObjectName($0[0]) == ObjectName(path) }
  }

  /// `kill -9` during a pin's first staging, then an offline mount (the adversary's
  /// pin-kill-first.sh): folder `p` shows whole as its listing had it, every staged file reads
  /// its bytes, the one not staged yet reads EIO, and the status says how many of all it holds.
  /// Before, the record had no tree: `p` showed the folders and files staged so far (s3, whose
  /// only file was not staged, was missing; exit 0) and the status said "offline 0/0".
  @Test(arguments: ["gcs", "firebase"]) func aPinKilledInItsFirstStagingShowsItsFolderWholeOffline(api: String) async throws {
    try await MountFixture.scope { fx in
      var expected: [String: Data] = [:]
      for i in 0..<12 { expected["s\(i % 3)/f\(i)"] = randomData(1000 + i * 100, seed: UInt64(5500 + i)) }
      expected["s3/held"] = randomData(5000, seed: 5599)
      for (name, data) in expected { _ = try await fx.put("p/" + name, data) }
      // The held file's download waits, so the kill comes with every other file staged.
      var faults = Faults()
      faults.pathFilter = "held?alt=media"
      faults.hold = true
      fx.emulator!.setFaults(faults)
      do {
        let m = try fx.mount(extra: ["--api", api], name: "\(api)-pin")
        let (status, output) = runTool(bucketfsBinary, ["pin", "--background", m.path("p")], timeout: .seconds(240))
        #expect(status == 0, "\(output)")
        #expect(
          await eventually { pinLine(m, exactly: "p").map { $0[1] == "staging" && $0[2] == "12" } == true },
          "\(String(describing: pinLine(m, exactly: "p")))")
        m.process.send(SIGKILL)
        m.process.wait()
        m.unmount()
      }
      fx.emulator!.setFaults(Faults())

      let offline = try fx.mount(options: ["offline"], extra: ["--api", api], name: "\(api)-offline")
      let top = try FileManager.default.contentsOfDirectory(atPath: offline.path("p")).sorted()
      #expect(top == ["s0", "s1", "s2", "s3"], "\(top)\n\(offline.log)")
      for s in 0..<4 {
        let names = Set((try? FileManager.default.contentsOfDirectory(atPath: offline.path("p/s\(s)"))) ?? [])
        let want = Set(expected.keys.filter { $0.hasPrefix("s\(s)/") }.map { String($0.dropFirst(3)) })
        #expect(names == want, "p/s\(s) lists \(names.sorted()) of \(want.sorted())")
      }
      for (name, data) in expected where name != "s3/held" {
        #expect((try? readFile(offline.path("p/" + name)).get()) == data, "offline p/\(name): \(readFile(offline.path("p/" + name)))")
      }
      #expect(readFile(offline.path("p/s3/held")) == .failure(Errno(EIO)))
      let line = pinLine(offline, exactly: "p")
      #expect(line.map { $0[1] == "offline" && $0[2] == "12" && $0[3] == "13" } == true, "\(String(describing: line))")
      offline.unmount()

      // Online again, the pin resumes and is kept whole.
      let again = try fx.mount(extra: ["--api", api], name: "\(api)-again")
      #expect(
        await eventually { pinLine(again, exactly: "p").map { $0[1] == "kept" && $0[2] == "13" && $0[3] == "13" } == true },
        "\(String(describing: pinLine(again, exactly: "p")))")
    }
  }

  /// A pin made on an offline mount has never been listed: the folder it names shows offline as
  /// no listing at all (EIO), not as the files read earlier and staged (one of three, exit 0).
  @Test(arguments: ["gcs", "firebase"]) func aPinNeverListedHoldsNoFolderWholeOffline(api: String) async throws {
    try await MountFixture.scope { fx in
      for i in 0..<3 { _ = try await fx.put("trip/f\(i)", randomData(1000 + i, seed: UInt64(5700 + i))) }
      let online = try fx.mount(extra: ["--api", api], name: "\(api)-read")
      #expect((try? readFile(online.path("trip/f0")).get())?.count == 1000)
      try await waitStaged(online.path("trip/f0"))
      online.unmount()

      let offline = try fx.mount(options: ["offline"], extra: ["--api", api], name: "\(api)-offline")
      // Before the pin: the staged copies are the offline mount's view.
      #expect(try FileManager.default.contentsOfDirectory(atPath: offline.path("trip")) == ["f0"])
      let (status, output) = runTool(bucketfsBinary, ["pin", offline.path("trip")], timeout: .seconds(60))
      #expect(output.contains("offline"), "\(status): \(output)")
      let (lsStatus, lsOutput) = runTool("/bin/ls", [offline.path("trip")])
      #expect(lsStatus != 0 && lsOutput.contains("Input/output error"), "\(lsStatus): \(lsOutput)")
      // The staged file still reads.
      #expect((try? readFile(offline.path("trip/f0")).get())?.count == 1000)
    }
  }
}
