import Foundation
import TestSupport
import Testing

/// The unit template parses and verifies with systemd's own checker, in a scratch root that
/// holds what it names (the binary, fusermount3, the standard targets).
@Suite struct SystemdUnitTests {
  @Test func unitTemplateVerifies() throws {
    let analyze = "/usr/bin/systemd-analyze"
    guard FileManager.default.isExecutableFile(atPath: analyze) else {
      Issue.record("systemd-analyze is not installed (Debian package systemd): the unit cannot be verified")
      return
    }
    let repo = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    let unit = repo.appendingPathComponent("packaging/systemd/bucketfs@.service")
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("unit-root-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: root) }
    let fm = FileManager.default
    let units = root.appendingPathComponent("usr/lib/systemd/system")
    try fm.createDirectory(at: units, withIntermediateDirectories: true)
    try fm.createDirectory(at: root.appendingPathComponent("usr/bin"), withIntermediateDirectories: true)
    try fm.createDirectory(at: root.appendingPathComponent("bin"), withIntermediateDirectories: true)
    try fm.copyItem(atPath: bucketfsBinary, toPath: root.appendingPathComponent("usr/bin/bucketfs").path)
    try fm.copyItem(atPath: "/bin/fusermount3", toPath: root.appendingPathComponent("bin/fusermount3").path)
    try fm.copyItem(at: unit, to: units.appendingPathComponent("bucketfs@.service"))
    for target in (try? fm.contentsOfDirectory(atPath: "/lib/systemd/system")) ?? [] where target.hasSuffix(".target") {
      try? fm.copyItem(atPath: "/lib/systemd/system/\(target)", toPath: units.appendingPathComponent(target).path)
    }
    let (status, output) = runTool(analyze, ["verify", "--man=no", "--root=\(root.path)", "bucketfs@photos.service"])
    #expect(status == 0 && output.isEmpty, "systemd-analyze verify: \(output)")
    let text = try String(contentsOf: unit, encoding: .utf8)
    #expect(text.contains("Type=notify") && text.contains("ExecStop=/bin/fusermount3 -u"))
  }
}
