import Foundation
import TestSupport
import StorageCore
import StorageEmulator
import Synchronization
import Testing

final class EventLog: Sendable {
  let events = Mutex<[StorageTaskStatus]>([])
  func add(_ s: StorageTaskStatus) { events.withLock { $0.append(s) } }
  var all: [StorageTaskStatus] { events.withLock { $0 } }
}

@Suite struct TaskTests {
  @Test func pauseResumeDownloadContinuesWithRange() async throws {
    var faults = Faults()
    faults.latency = .milliseconds(0)
    try await EmulatorFixture.scope { fx in
      let bytes = randomData(24 << 20, seed: 11)
      let ref = fx.storage.reference(withPath: "pause/big.bin")
      _ = try await ref.putDataAsync(bytes)
      // Slow the server so the pause lands mid-transfer.
      var slow = Faults()
      slow.stallAfterBytes = 6 << 20
      slow.limit = 1
      fx.emulator.setFaults(slow)
      let log = EventLog()
      let dest = fx.scratch("paused.bin")
      let task = ref.write(toFile: dest)
      for status in [StorageTaskStatus.resume, .pause, .success, .failure] {
        task.observe(status) { _ in log.add(status) }
      }
      let progressed = Mutex(false)
      task.observe(.progress) { snap in
        if (snap.progress?.completedUnitCount ?? 0) > 0 { progressed.withLock { $0 = true } }
      }
      // Wait until some bytes arrived, then pause.
      #expect(await eventually { progressed.withLock { $0 } })
      task.pause()
      let pausedAt = task.snapshot.progress?.completedUnitCount ?? 0
      #expect(pausedAt > 0)
      #expect(task.snapshot.status == .pause)
      #expect(!FileManager.default.fileExists(atPath: dest.path))
      fx.emulator.setFaults(Faults())
      task.resume()
      try await task.result()
      #expect(sha256(file: dest) == sha256(bytes))
      #expect(log.all == [.resume, .pause, .resume, .success])
    }
  }

  @Test func cancelRemovesTemporaryFile() async throws {
    try await EmulatorFixture.scope { fx in
      let ref = fx.storage.reference(withPath: "cancel.bin")
      _ = try await ref.putDataAsync(randomData(4 << 20))
      var stall = Faults()
      stall.stallAfterBytes = 1 << 20
      fx.emulator.setFaults(stall)
      let folder = fx.scratch("cancel-dir")
      try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
      let task = ref.write(toFile: folder.appendingPathComponent("out.bin"))
      let log = EventLog()
      task.observe(.failure) { snap in
        #expect(snap.storageError?.code == .cancelled)
        #expect((snap.error as? NSError)?.code == StorageErrorCode.cancelled.rawValue)
        log.add(.failure)
      }
      // Cancelled mid-transfer: some bytes are in the partial file by then.
      #expect(await eventually { task.bytesTransferred > 0 })
      task.cancel()
      let error = await #expect(throws: StorageError.self) { try await task.result() }
      #expect(error?.code == .cancelled)
      // Every callback the cancel scheduled has run once the callback queue is drained.
      fx.storage.callbackQueue.sync {}
      #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).isEmpty)
      #expect(log.all == [.failure])
    }
  }

  @Test func uploadResumesAfterInjectedReset() async throws {
    try await EmulatorFixture.scope { fx in
      fx.storage.uploadChunkSize = 1 << 20
      // Room for the resets on a busy machine: with two test runs beside it, the first try
      // took the fixture's whole 10 s ("gave up after 1 attempts").
      fx.storage.maxUploadRetryTime = 60
      var reset = Faults()
      reset.resetAfterBytes = 300_000
      reset.limit = 2
      reset.pathFilter = "upload_id"
      fx.emulator.setFaults(reset)
      let bytes = randomData(5 << 20 + 123, seed: 5)
      let ref = fx.storage.reference(withPath: "resumed.bin")
      let metadata = try await ref.putDataAsync(bytes)
      #expect(metadata.size == Int64(bytes.count))
      fx.emulator.setFaults(Faults())
      #expect(sha256(try await ref.data(maxSize: 10 << 20)) == sha256(bytes))
    }
  }

  @Test func uploadPauseAndResume() async throws {
    try await EmulatorFixture.scope { fx in
      fx.storage.uploadChunkSize = 256 * 1024
      var slow = Faults()
      slow.latency = .milliseconds(30)
      fx.emulator.setFaults(slow)
      let bytes = randomData(3 << 20, seed: 9)
      let ref = fx.storage.reference(withPath: "up-pause.bin")
      let task = ref.putData(bytes)
      let log = EventLog()
      for status in [StorageTaskStatus.resume, .pause, .success, .failure] {
        task.observe(status) { _ in log.add(status) }
      }
      #expect(
        await eventually { task.bytesTransferred > 0 },
        "no byte moved: \(fx.emulator.requestsServed) requests served, \(fx.emulator.connectionsAccepted) connections, \(fx.emulator.bodyBytesReceived) bytes received")
      task.pause()
      // Paused: the transfer winds down, and resumes from what it achieved.
      #expect(await eventually { fx.storage.transfersRunning.load(ordering: .relaxed) == 0 })
      task.resume()
      let metadata = try await task.result()
      #expect(metadata?.size == Int64(bytes.count))
      #expect(log.all == [.resume, .pause, .resume, .success])
      fx.emulator.setFaults(Faults())
      #expect(sha256(try await ref.data(maxSize: 4 << 20)) == sha256(bytes))
    }
  }

  @Test func observersAddedAfterSuccessFireOnce() async throws {
    try await EmulatorFixture.scope { fx in
      let task = fx.storage.reference(withPath: "obs.txt").putData(Data("x".utf8))
      try await task.result()
      let log = EventLog()
      let handle = task.observe(.success) { _ in log.add(.success) }
      #expect(!handle.isEmpty)
      fx.storage.callbackQueue.sync {}
      #expect(log.all == [.success])
    }
  }
}
