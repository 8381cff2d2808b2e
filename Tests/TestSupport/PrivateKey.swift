import Foundation

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
