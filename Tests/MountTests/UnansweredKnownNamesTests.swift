import Foundation
import StorageCore
import StorageEmulator
import TestSupport
import Testing

/// Issue 54, F3 / issue 55: a name the server answered a moment ago is not "no such file" when
/// it stops answering. A writable mount takes a name it knows nothing of as absent (so files can
/// be made with the server away), and that made a folder looked up half a second before gone:
/// `echo LINE >> d/log` failed ENOENT, as did `stat d`. Looked up with `metadata_ttl=0` (every
/// lookup asks) and without a listing of the folders, so only the lookups' answers are known.
@Suite(.serialized) struct UnansweredKnownNamesTests {
  @Test(arguments: ["firebase", "gcs"]) func aFrozenServerNeverMakesANameItAnsweredGone(api: String) async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("d/log", Data("INIT\n".utf8))
      _ = try await fx.put("rootlog", Data("INIT\n".utf8))
      let m = try fx.mount(options: ["writable", "metadata_ttl=0", "read_timeout=1"], extra: ["--api", api], name: "frozen-\(api)")
      var st = stat()
      #expect(stat(m.path("d/log"), &st) == 0 && st.st_size == 5)
      #expect(stat(m.path("rootlog"), &st) == 0 && st.st_size == 5)
      var frozen = Faults()
      frozen.hold = true
      fx.emulator!.setFaults(frozen)
      defer { fx.emulator!.setFaults(Faults()) }
      for path in ["d", "d/log", "rootlog"] {
        let found = stat(m.path(path), &st)
        let e = errno
        #expect(found == 0, "\(api): stat \(path) with the server frozen: errno \(e)")
        if path == "d" { #expect(st.st_mode & S_IFMT == S_IFDIR) } else { #expect(st.st_size == 5) }
      }
      for path in ["d/log", "rootlog"] {
        let (status, said) = runTool("/bin/sh", ["-c", "echo LINE >> '\(m.path(path))'"], timeout: .seconds(60))
        // Refused (EIO: the bytes it would append to cannot be read) or taken; never "no such file".
        #expect(!said.contains("No such file"), "\(api): >> \(path): \(status) \(said)")
        if status != 0 { #expect(said.contains("Input/output error"), "\(api): >> \(path): \(said)") }
      }
      fx.emulator!.setFaults(Faults())
      let (synced, syncSaid) = runTool(bucketfsBinary, ["sync", m.mountpoint.path, "--timeout", "60"])
      #expect(synced == 0, "\(syncSaid)")
      // Whatever was taken landed as an append; nothing else changed.
      for name in ["d/log", "rootlog"] {
        let bytes = await fx.object(name).map { String(decoding: $0, as: UTF8.self) }
        #expect(bytes == "INIT\n" || bytes == "INIT\nLINE\n", "\(api): \(name): \(bytes ?? "none")")
      }
    }
  }
}
