import Foundation
import StorageCore
import TestSupport
import Testing

/// Several writers append lines to one object at once: mounts with `echo >>`, and a program
/// elsewhere over the GCS JSON API that reads, appends and writes back with `ifGenerationMatch`
/// (so it never loses a line itself). Whatever the timing, every line a writer was told was
/// written ends up in the object or in a conflict copy, no object holds a byte that no writer
/// wrote (a hole of zeros, a half line, a version spliced into another), and the outside
/// writer's lines are never overwritten.
@Suite(.serialized) struct AppendingWritersTests {
  /// The outside writer: one line at a time, read-modify-write with a precondition, retried on
  /// 412; each line is noted in the acknowledged file once the server took it.
  static let outsideWriter = #"""
    import json, sys, time, urllib.request, urllib.parse, urllib.error
    host, bucket, name, tag, seconds, acked = sys.argv[1:7]
    quoted = urllib.parse.quote(name, safe="")
    meta = f"http://{host}/storage/v1/b/{bucket}/o/{quoted}"
    upload = f"http://{host}/upload/storage/v1/b/{bucket}/o?uploadType=media&name={quoted}"
    end = time.time() + float(seconds)
    i = 0
    with open(acked, "a") as out:
        while time.time() < end:
            line = f"{tag}-{i}\n".encode()
            while True:
                try:
                    with urllib.request.urlopen(meta) as r:
                        generation = json.load(r)["generation"]
                    with urllib.request.urlopen(f"{meta}?alt=media&generation={generation}") as r:
                        body = r.read()
                except urllib.error.HTTPError as e:
                    if e.code != 404:
                        raise
                    continue
                request = urllib.request.Request(
                    f"{upload}&ifGenerationMatch={generation}", data=body + line, method="POST",
                    headers={"Content-Type": "text/plain"})
                try:
                    urllib.request.urlopen(request).close()
                    break
                except urllib.error.HTTPError as e:
                    if e.code != 412:
                        raise
            out.write(line.decode())
            out.flush()
            i += 1
            time.sleep(0.04)
    """#

  /// A shell appending a line every ~40 ms to FILE for SECONDS; each line `echo` reported
  /// written is noted in ACKED, each one tried in TRIED.
  static let mountAppender = #"""
    file=$1 tag=$2 seconds=$3 acked=$4 tried=$5
    end=$(( $(date +%s) + seconds )); i=0
    while [ "$(date +%s)" -lt "$end" ]; do
      echo "$tag-$i" >> "$tried"
      if echo "$tag-$i" >> "$file"; then echo "$tag-$i" >> "$acked"; fi
      i=$((i + 1))
      sleep 0.04
    done
    """#

  func lines(_ url: URL) -> [String] {
    ((try? String(contentsOf: url, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
  }

  func run(api: String, mounts count: Int, seconds: Int = 10) async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("log/f", Data("start\n".utf8))
      var mounts: [MountedBucket] = []
      for n in 0..<count {
        let staging = fx.root.appendingPathComponent("staging-\(n)").path
        mounts.append(try fx.mount(options: ["writable", "staging_dir=\(staging)", "metadata_ttl=60"], extra: ["--api", api], name: "\(api)-\(n)"))
      }
      for m in mounts { _ = try readFile(m.path("log/f")).get() }
      let notes = try fx.folder("notes")
      let script = notes.appendingPathComponent("outside.py")
      try Self.outsideWriter.write(to: script, atomically: true, encoding: .utf8)
      let appender = notes.appendingPathComponent("append.sh")
      try Self.mountAppender.write(to: appender, atomically: true, encoding: .utf8)
      let outsideAcked = notes.appendingPathComponent("O.acked")
      let (address, bucket) = (fx.address, fx.bucket)
      var writers: [Task<(Int32, String), Never>] = []
      writers.append(
        Task.detached {
          runTool("/usr/bin/env", ["python3", script.path, address, bucket, "log/f", "O", String(seconds), outsideAcked.path])
        })
      for (n, m) in mounts.enumerated() {
        let args = [appender.path, m.path("log/f"), "M\(n)", String(seconds)] + ["acked", "tried"].map { notes.appendingPathComponent("M\(n).\($0)").path }
        writers.append(Task.detached { runTool("/bin/sh", args) })
      }
      for writer in writers {
        let (status, output) = await writer.value
        #expect(status == 0, "\(output)")
      }
      for m in mounts {
        let (status, output) = runTool(bucketfsBinary, ["sync", m.mountpoint.path, "--timeout", "60"])
        #expect(status == 0, "\(output)")
      }

      var acked = Set(lines(outsideAcked))
      var written = acked
      for n in 0..<count {
        acked.formUnion(lines(notes.appendingPathComponent("M\(n).acked")))
        written.formUnion(lines(notes.appendingPathComponent("M\(n).tried")))
      }
      written.insert("start")
      #expect(acked.count > 20 * (count + 1), "too few lines were written to test anything: \(acked.count)")

      var objects: [String: Data] = [:]
      var token: String? = nil
      repeat {
        let page = try await fx.storage.reference(withPath: "log").listPage(delimiter: nil, pageToken: token)
        for name in page.items { objects[name] = try await fx.storage.reference(withPath: name).data(maxSize: 64 << 20) }
        token = page.nextPageToken
      } while token != nil
      #expect(Set(objects.keys).subtracting(["log/f"]).allSatisfy { $0.hasPrefix("log/f.conflict-") }, "\(objects.keys.sorted())")

      var found = Set<String>()
      for (name, bytes) in objects.sorted(by: { $0.key < $1.key }) {
        #expect(!bytes.contains(0), "\(name) holds NUL bytes: \(String(decoding: bytes, as: UTF8.self).debugDescription)")
        #expect(bytes.last == UInt8(ascii: "\n"), "\(name) ends in half a line")
        let held = String(decoding: bytes, as: UTF8.self).split(separator: "\n").map(String.init)
        let strange = held.filter { !written.contains($0) }
        #expect(strange.isEmpty, "\(name) holds lines no writer wrote: \(strange.prefix(5))")
        #expect(Set(held).count == held.count, "\(name) holds a line twice (a version spliced into another)")
        found.formUnion(held)
      }
      let lost = acked.subtracting(found)
      #expect(lost.isEmpty, "\(lost.count) of \(acked.count) acknowledged lines are in no object: \(lost.sorted().prefix(10))")
      // The outside writer's lines were each in the object when the server took them: a mount
      // that overwrote them would have overwritten a version it did not see.
      let inObject = Set(String(decoding: objects["log/f"] ?? Data(), as: UTF8.self).split(separator: "\n").map(String.init))
      let overwritten = Set(lines(outsideAcked)).subtracting(inObject)
      #expect(overwritten.isEmpty, "the outside writer's lines missing from log/f: \(overwritten.sorted().prefix(10))")
      let copies = objects.count - 1
      let mountLines = acked.filter { $0.hasPrefix("M") }.count
      print("appenders (\(api), \(count) mounts): \(acked.count) lines acknowledged, \(mountLines) by mounts, \(copies) conflict copies")
      for m in mounts { #expect(m.isMounted, "\(m.log)") }
    }
  }

  @Test(arguments: ["firebase", "gcs"]) func oneMountAndAnOutsideWriterLoseNoLine(api: String) async throws {
    try await run(api: api, mounts: 1)
  }

  @Test(arguments: ["firebase", "gcs"]) func twoMountsAndAnOutsideWriterLoseNoLine(api: String) async throws {
    try await run(api: api, mounts: 2)
  }
}
