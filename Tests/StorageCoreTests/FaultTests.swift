import Foundation
import TestSupport
import StorageCore
import StorageEmulator
import Testing

@Suite struct FaultTests {
  @Test func retriesThrough503And429() async throws {
    try await EmulatorFixture.scope { fx in
      let ref = fx.storage.reference(withPath: "retry.txt")
      _ = try await ref.putDataAsync(Data("payload".utf8))
      for status in [503, 429, 502, 504, 408] {
        var faults = Faults()
        faults.errorStatus = status
        faults.errorFraction = 0.5
        faults.retryAfter = status == 429 ? 0 : nil
        fx.emulator.setFaults(faults)
        for _ in 0..<4 {
          #expect(try await ref.data(maxSize: 100) == Data("payload".utf8))
          _ = try await ref.getMetadata()
        }
      }
    }
  }

  @Test func persistentFailureGivesUpWithinBudget() async throws {
    try await EmulatorFixture.scope { fx in
      fx.storage.maxOperationRetryTime = 0.5
      var faults = Faults()
      faults.errorFraction = 1
      fx.emulator.setFaults(faults)
      let started = Date()
      let error = await #expect(throws: StorageError.self) {
        try await fx.storage.reference(withPath: "x").getMetadata()
      }
      #expect(error?.code == .retryLimitExceeded)
      #expect(error?.httpStatus == 503)
      // The budget, not the clock of a loaded machine: 0.5 s of backoff from 20 ms is a handful of
      // attempts (the fixture's 10 s would be about ten).
      let attempts = error?.detail.split(separator: " ").dropFirst(3).first.flatMap { Int($0) } ?? 0
      #expect((1...7).contains(attempts), "\(error?.detail ?? "")")
      _ = started
    }
  }

  @Test func stalledServerTimesOut() async throws {
    try await EmulatorFixture.scope { fx in
      let ref = fx.storage.reference(withPath: "stall.bin")
      _ = try await ref.putDataAsync(randomData(1 << 20))
      var faults = Faults()
      faults.stallAfterBytes = 1000
      fx.emulator.setFaults(faults)
      fx.storage.timeouts = TransportTimeouts(connect: .seconds(2), stall: .seconds(1))
      fx.storage.maxDownloadRetryTime = 1
      let started = Date()
      let error = await #expect(throws: StorageError.self) { try await ref.data(maxSize: 2 << 20) }
      // A stall is retried within the retry time (as the SDKs retry timeouts), then given up on
      // with the stall as the cause.
      #expect(error?.code == .retryLimitExceeded)
      #expect(error?.detail.contains("stopped answering") == true, "\(error?.detail ?? "")")
      #expect(Date().timeIntervalSince(started) < 10)
    }
  }

  /// 500 is retried (Google's guidance and the JS SDK retry it): a server that keeps answering
  /// 500 ends as retryLimitExceeded with the 500 as the cause, within the retry budget.
  @Test func internalServerErrorIsRetriedWithinTheBudget() async throws {
    try await EmulatorFixture.scope { fx in
      fx.storage.maxOperationRetryTime = 2
      let ref = fx.storage.reference(withPath: "five-hundred.txt")
      _ = try await ref.putDataAsync(Data("payload".utf8))
      var faults = Faults()
      faults.errorStatus = 500
      faults.errorFraction = 1
      fx.emulator.setFaults(faults)
      let error = await #expect(throws: StorageError.self) { try await ref.getMetadata() }
      #expect(error?.code == .retryLimitExceeded, "\(String(describing: error))")
      #expect(error?.detail.contains("attempts") == true, "\(error?.detail ?? "")")
    }
  }

  /// With `unreachableRetryTime = 0` (what the command line sets) a closed port fails at once.
  @Test func unreachableServerFailsAtOnceWhenAskedTo() async throws {
    let storage = Storage(bucket: "b")
    // A port from a listener that was closed: nothing listens there now.
    let fx = try EmulatorFixture()
    let port = fx.emulator.port
    fx.emulator.stop()
    storage.useEmulator(host: "127.0.0.1", port: port)
    storage.unreachableRetryTime = 0
    let started = Date()
    let error = await #expect(throws: StorageError.self) {
      try await storage.reference(withPath: "x").getMetadata()
    }
    #expect(error?.code == .serverUnreachable)
    // One attempt: a retried failure says how many it made.
    #expect(error?.detail.contains("attempts") == false, "\(error?.detail ?? "")")
    _ = started
  }

  /// By default an unreachable host is retried within the operation's retry time, as the SDK
  /// retries network failures: a server that comes up meanwhile answers.
  @Test func unreachableServerIsRetriedWithinTheRetryTime() async throws {
    try await scope(EmulatorFixture()) { first in
      let port = first.emulator.port
      let root = first.root
      _ = try await first.storage.reference(withPath: "late.txt").putDataAsync(Data("late".utf8))
      first.emulator.stop()
      let storage = Storage(bucket: first.storage.bucket)
      storage.useEmulator(host: "127.0.0.1", port: port)
      storage.retryInitialDelay = 0.1
      storage.maxOperationRetryTime = 20
      let restarted = Task.detached { () -> StorageEmulator? in
        try? await Task.sleep(for: .milliseconds(700))
        var config = StorageEmulator.Configuration(root: root.appendingPathComponent("server"))
        config.port = port
        return try? StorageEmulator(config)
      }
      let metadata = try await storage.reference(withPath: "late.txt").getMetadata()
      #expect(metadata.size == 4)
      await restarted.value?.stop()
    }
  }

  /// A server that restarts mid-upload forgets its sessions: the upload's retry learns that
  /// (404 on the session query) and starts a new session instead of failing (both APIs).
  @Test(arguments: [StorageAPI.firebase, .gcs]) func anUploadWhoseSessionTheServerForgotStartsAgain(api: StorageAPI) async throws {
    try await scope(EmulatorFixture()) { first in
      let port = first.emulator.port
      let root = first.root
      let storage = Storage(bucket: first.storage.bucket)
      storage.useEmulator(host: "127.0.0.1", port: port)
      storage.api = api
      storage.retryInitialDelay = 0.05
      storage.maxUploadRetryTime = 30
      storage.uploadChunkSize = 256 * 1024
      var slow = Faults()
      slow.latency = .milliseconds(20)
      first.emulator.setFaults(slow)
      let bytes = randomData(3 << 20, seed: 77)
      let task = storage.reference(withPath: "forgotten/big.bin").putData(bytes)
      #expect(await eventually(timeout: .seconds(60)) { task.bytesTransferred >= 512 * 1024 })
      first.emulator.stop()
      var config = StorageEmulator.Configuration(root: root.appendingPathComponent("server"))
      config.port = port
      let second = try StorageEmulator(config)
      defer { second.stop() }
      let metadata = try await task.result()
      #expect(metadata?.size == Int64(bytes.count))
      #expect(try await storage.reference(withPath: "forgotten/big.bin").data(maxSize: 4 << 20) == bytes)
    }
  }

  @Test func authStatusesMapToCodes() async throws {
    try await EmulatorFixture.scope(token: "s3cret") { fx in
      let ref = fx.storage.reference(withPath: "private.txt")
      let missing = await #expect(throws: StorageError.self) { try await ref.getMetadata() }
      #expect(missing?.code == .unauthenticated)
      fx.storage.setAuthToken("wrong")
      let wrong = await #expect(throws: StorageError.self) { try await ref.getMetadata() }
      #expect(wrong?.code == .unauthorized)
      #expect(!(wrong?.description.contains("wrong") ?? true))
      fx.storage.setAuthToken("s3cret")
      let absent = await #expect(throws: StorageError.self) { try await ref.getMetadata() }
      #expect(absent?.code == .objectNotFound)
      _ = try await ref.putDataAsync(Data("ok".utf8))
      // The download URL's token reads without the header.
      let url = try await ref.downloadURL()
      let other = Storage(bucket: "test-bucket")
      other.useEmulator(host: "127.0.0.1", port: fx.emulator.port)
      let response = try await HTTPClient.shared.send(HTTPRequest(method: "GET", url: url.absoluteString))
      #expect(response.status == 200)
      #expect(response.body == Data("ok".utf8))
    }
  }
}

/// A server that ignores Range (behind a proxy that drops it) answers a ranged or resumed GET
/// with the whole object, 200: every reader still gets exactly the bytes it asked for.
@Suite struct IgnoredRangeTests {
  @Test(arguments: [StorageAPI.firebase, .gcs]) func everyReaderGetsTheBytesItAskedFor(api: StorageAPI) async throws {
    try await EmulatorFixture.scope { fx in
      fx.storage.api = api
      let data = randomData(1 << 20, seed: 31)
      let ref = fx.storage.reference(withPath: "whole-only.bin")
      _ = try await ref.putDataAsync(data)
      var faults = Faults()
      faults.ignoreRange = true
      fx.emulator.setFaults(faults)
      #expect(try await ref.data(range: 1000..<5000) == data[1000..<5000])
      let collected = Collected()
      let count = try await ref.stream(range: 70_000..<300_000) { collected.append($0) }
      #expect(count == 230_000)
      #expect(collected.data == data[70_000..<300_000])
      let whole = Collected()
      #expect(try await ref.stream { whole.append($0) } == Int64(data.count))
      #expect(whole.data == data)
      let file = fx.root.appendingPathComponent("whole-only.copy")
      _ = try await ref.write(toFile: file).result()
      #expect(try Data(contentsOf: file) == data)

      // An attempt cut short is resumed with a Range, which is ignored too.
      func cutOnce() {
        var faults = Faults()
        faults.ignoreRange = true
        faults.resetAfterBytes = 300_000
        faults.limit = 1
        fx.emulator.setFaults(faults)
      }
      cutOnce()
      #expect(try await ref.data(range: 100_000..<900_000) == data[100_000..<900_000])
      cutOnce()
      let resumed = Collected()
      #expect(try await ref.stream(range: 10..<1_000_000) { resumed.append($0) } == 999_990)
      #expect(resumed.data == data[10..<1_000_000])
      cutOnce()
      let resumedWhole = Collected()
      #expect(try await ref.stream { resumedWhole.append($0) } == Int64(data.count))
      #expect(resumedWhole.data == data)
      cutOnce()
      let again = fx.root.appendingPathComponent("whole-only.again")
      _ = try await ref.write(toFile: again).result()
      #expect(try Data(contentsOf: again) == data)
      #expect(fx.emulator.faultsInjected == 1, "the download was cut and resumed")
    }
  }
}

/// Bytes a stream handed on, in order.
final class Collected: @unchecked Sendable {
  private let lock = NSLock()
  private var bytes = Data()
  var data: Data { lock.withLock { bytes } }
  func append(_ chunk: UnsafeRawBufferPointer) -> Bool {
    lock.withLock { bytes.append(contentsOf: chunk) }
    return true
  }
}
