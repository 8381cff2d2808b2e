import Foundation
import StorageCore
import StorageEmulator
import Testing

@Suite struct FaultTests {
  @Test func retriesThrough503And429() async throws {
    let fx = try EmulatorFixture()
    defer { withExtendedLifetime(fx) {} }
    let ref = fx.storage.reference(withPath: "retry.txt")
    _ = try await ref.putDataAsync(Data("payload".utf8))
    for status in [503, 429, 500] {
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

  @Test func persistentFailureGivesUpWithinBudget() async throws {
    let fx = try EmulatorFixture()
    defer { withExtendedLifetime(fx) {} }
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
    #expect(Date().timeIntervalSince(started) < 5)
  }

  @Test func stalledServerTimesOut() async throws {
    let fx = try EmulatorFixture()
    defer { withExtendedLifetime(fx) {} }
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

  @Test func unreachableServerFailsAtOnce() async throws {
    let storage = Storage(bucket: "b")
    // A port from a listener that was closed: nothing listens there now.
    let fx = try EmulatorFixture()
    let port = fx.emulator.port
    fx.emulator.stop()
    storage.useEmulator(host: "127.0.0.1", port: port)
    let error = await #expect(throws: StorageError.self) {
      try await storage.reference(withPath: "x").getMetadata()
    }
    #expect(error?.code == .serverUnreachable)
  }

  @Test func authStatusesMapToCodes() async throws {
    let fx = try EmulatorFixture(token: "s3cret")
    defer { withExtendedLifetime(fx) {} }
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
