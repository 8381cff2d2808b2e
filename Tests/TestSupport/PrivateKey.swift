import Foundation
import Synchronization

/// A throwaway private key (RSA 2048, or "EC" for P-256) written to `path` by the openssl command,
/// in PEM; none is committed.
package func makePrivateKey(at path: String, algorithm: String = "RSA") throws -> String {
  let args = algorithm == "RSA"
    ? ["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", path]
    : ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path]
  let (status, output) = runTool("/usr/bin/openssl", args)
  guard status == 0 else { throw KeyNotMade(output: output) }
  return try String(contentsOfFile: path, encoding: .utf8)
}

struct KeyNotMade: Error, CustomStringConvertible {
  let output: String
  var description: String { "openssl genpkey failed: \(output)" }
}

/// `makePrivateKey` off the task pool: key generation takes seconds on a busy machine, and a
/// test that blocks a pool thread for that long stalls every async test beside it (two cores:
/// two threads).
package func makePrivateKey(at path: String, algorithm: String = "RSA") async throws -> String {
  try await withCheckedThrowingContinuation { done in
    DispatchQueue.global().async {
      done.resume(with: Result { try makePrivateKey(at: path, algorithm: algorithm) as String })
    }
  }
}

/// One RSA key for every test of this process that needs some key (each fixture made its own,
/// and each keygen blocked a thread for up to seconds under load).
package func sharedRSAKey() async throws -> String {
  let task = SharedKey.task.withLock { task in
    if let task { return task }
    let made = Task {
      let path = FileManager.default.temporaryDirectory.appendingPathComponent("bucketfs-test-key-\(UUID().uuidString).pem").path
      defer { try? FileManager.default.removeItem(atPath: path) }
      return try await makePrivateKey(at: path)
    }
    task = made
    return made
  }
  return try await task.value
}

private enum SharedKey {
  static let task = Mutex<Task<String, any Error>?>(nil)
}
