import Foundation
import TestSupport
import StorageCore
import StorageEmulator

/// An emulator on 127.0.0.1 with a free port and a temporary root, and a client pointed at it.
final class EmulatorFixture: @unchecked Sendable {
  let root: URL
  let emulator: StorageEmulator
  let storage: Storage

  init(
    bucket: String = "test-bucket", faults: Faults = Faults(), token: String? = nil,
    configure: (inout StorageEmulator.Configuration) -> Void = { _ in }
  ) throws {
    root = FileManager.default.temporaryDirectory.appendingPathComponent("bucketfs-test-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
    var config = StorageEmulator.Configuration(root: root.appendingPathComponent("server"))
    config.port = 0
    config.faults = faults
    config.requiredToken = token
    configure(&config)
    emulator = try StorageEmulator(config)
    storage = Storage(bucket: bucket)
    storage.useEmulator(host: "127.0.0.1", port: emulator.port)
    storage.retryInitialDelay = 0.02
    storage.maxOperationRetryTime = 10
    storage.maxDownloadRetryTime = 10
    storage.maxUploadRetryTime = 10
  }

  func scratch(_ name: String) -> URL { root.appendingPathComponent(name) }

  /// Runs `body` with a new fixture, which lives until `body` returns; then its emulator stops
  /// and its folder goes, also when `body` throws.
  static func scope(
    bucket: String = "test-bucket", faults: Faults = Faults(), token: String? = nil,
    configure: (inout StorageEmulator.Configuration) -> Void = { _ in }, _ body: (EmulatorFixture) async throws -> Void
  ) async throws {
    try await TestSupport.scope(EmulatorFixture(bucket: bucket, faults: faults, token: token, configure: configure), body)
  }

  deinit {
    emulator.stop()
    try? FileManager.default.removeItem(at: root)
  }
}

func sha256(_ data: Data) -> String {
  let d = Digest(.sha256)
  d.update(data)
  return Digest.hex(d.finalize())
}

func sha256(file: URL) -> String? {
  Digest.ofFile(file.path, kind: .sha256).map(Digest.hex)
}
