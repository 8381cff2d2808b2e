import Foundation
import TestSupport
import StorageCore
import Synchronization
import Testing

/// A consumer that does not keep up (a pipe nobody reads, a slow disk) must slow only its own
/// transfer: the transfer pauses instead of queueing the object in memory, and every other
/// transfer on the shared transfer thread goes on.
@Suite struct HandOffTests {
  @Test func aSlowConsumerPausesOnlyItsOwnTransfer() async throws {
    try await EmulatorFixture.scope { fx in
      let big = randomData(64 << 20, seed: 41)
      let small = randomData(1 << 20, seed: 42)
      let bigRef = fx.storage.reference(withPath: "handoff/big.bin")
      let smallRef = fx.storage.reference(withPath: "handoff/small.bin")
      _ = try await bigRef.putDataAsync(big)
      _ = try await smallRef.putDataAsync(small)

      let gate = DispatchSemaphore(value: 0)
      let received = Mutex(Data())
      let sentBefore = fx.emulator.bodyBytesSent
      let reading = Task {
        try await bigRef.stream { bytes in
          let first = received.withLock { d -> Bool in
            let first = d.isEmpty
            d.append(contentsOf: bytes)
            return first
          }
          // The consumer blocks after its first chunk, as a write to a full pipe would.
          if first { gate.wait() }
          return true
        }
      }
      // Were the consumer on the transfer thread, nothing else could move: let it go after a while
      // so that the test ends, and fail.
      let released = Atomic<Bool>(false)
      let watchdog = Task {
        try? await Task.sleep(for: .seconds(20))
        if !Task.isCancelled, !released.exchange(true, ordering: .relaxed) {
          Issue.record("the other transfer did not complete while the consumer was stuck")
          gate.signal()
        }
      }
      defer { watchdog.cancel() }
      while received.withLock({ $0.isEmpty }) { try await Task.sleep(for: .milliseconds(10)) }

      // Another transfer completes while the consumer is stuck.
      #expect(try await smallRef.data(maxSize: 2 << 20) == small)
      // Give the stuck transfer time to run on if it were not paused: the server may send only what
      // the hand-off (8 MiB) and the socket buffers hold, not the 64 MiB object.
      try await Task.sleep(for: .milliseconds(500))
      let sentWhileStuck = fx.emulator.bodyBytesSent - sentBefore - small.count
      #expect(sentWhileStuck < 32 << 20, "the server sent \(sentWhileStuck) bytes to a consumer that took one chunk")
      #expect(received.withLock { $0.count } < 1 << 20)

      if !released.exchange(true, ordering: .relaxed) { gate.signal() }
      #expect(try await reading.value == Int64(big.count))
      #expect(received.withLock { $0 } == big)
    }
  }

  @Test func aDownloadToFileIsWrittenOffTheTransferThreadAndComplete() async throws {
    try await EmulatorFixture.scope { fx in
      let bytes = randomData(24 << 20 + 7, seed: 43)
      let ref = fx.storage.reference(withPath: "handoff/file.bin")
      _ = try await ref.putDataAsync(bytes)
      let file = fx.scratch("handoff-file.bin")
      let progress = Mutex<[Int64]>([])
      let task = ref.write(toFile: file)
      task.observe(.progress) { snapshot in progress.withLock { $0.append(snapshot.progress?.completedUnitCount ?? -1) } }
      try await task.result()
      #expect(try Data(contentsOf: file) == bytes)
      // Progress comes from the bytes written, in order.
      let seen = progress.withLock { $0 }
      #expect(seen == seen.sorted())
      #expect((seen.last ?? 0) <= Int64(bytes.count))
    }
  }
}
