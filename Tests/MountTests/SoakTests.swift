import Foundation
import ChildProcess
import TestSupport
import StorageCore
import StorageEmulator
import Synchronization
import Testing

/// Many readers against a server that misbehaves: every request is answered within its bound
/// and no wrong byte reaches a reader. `BUCKETFS_SOAK_SECONDS` makes the soak run longer.
@Suite(.serialized) struct SoakTests {
  /// The hang a hostile probe found: with resets every 700 KB, `sha256sum *` beside 32 `cat`s
  /// left every staging buffer with a GET whose bytes could not arrive, because the transfer
  /// thread itself waited for a buffer; the readers, and a `stat` of another file, hung.
  @Test func manyStagedReadersUnderResetsAllFinish() async throws {
    try await MountFixture.scope { fx in
      let count = 32
      var expected: [String: String] = [:]
      for i in 0..<count {
        let data = randomData(3 << 20, seed: UInt64(7000 + i))
        _ = try await fx.put("soak/f\(i).bin", data)
        expected["f\(i).bin"] = sha256(data)
      }
      _ = try await fx.put("elsewhere/other.txt", Data("other".utf8))
      let m = try fx.mount(options: ["read_timeout=20"])
      var faults = Faults()
      faults.latency = .milliseconds(20)
      faults.resetAfterBytes = 700_000
      fx.emulator?.setFaults(faults)
      defer { fx.emulator?.setFaults(Faults()) }

      let folder = m.path("soak")
      let names = (0..<count).map { "f\($0).bin" }
      var jobs = [ChildJob(["/usr/bin/sha256sum"] + names, in: folder)]
      for name in names { jobs.append(ChildJob(["/usr/bin/sha256sum", name], in: folder)) }
      // Another file's attributes, asked while every reader is busy.
      try await Task.sleep(for: .seconds(2))
      let statStarted = Date()
      let statJob = ChildJob(["/usr/bin/stat", "-c", "%s", m.path("elsewhere/other.txt")], in: "/")
      statJob.wait(until: statStarted.addingTimeInterval(30))
      let statSeconds = Date().timeIntervalSince(statStarted)
      #expect(statJob.finished && statJob.status == 0 && statJob.output.hasPrefix("5"), "stat: \(statJob.output)")
      #expect(statSeconds < 10, "stat of another file took \(statSeconds) s")

      let deadline = Date().addingTimeInterval(90)
      for job in jobs { job.wait(until: deadline) }
      let unfinished = jobs.filter { !$0.finished }.count
      #expect(unfinished == 0, "\(unfinished) of \(jobs.count) readers still waiting after 90 s")
      var wrong = 0
      for job in jobs where job.finished {
        #expect(job.status == 0, "\(job.arguments.joined(separator: " ")): \(job.output.suffix(300))")
        for line in job.output.split(separator: "\n") {
          let parts = line.split(separator: " ", maxSplits: 1)
          guard parts.count == 2 else { continue }
          let name = parts[1].trimmingCharacters(in: CharacterSet(charactersIn: " *"))
          if expected[name] != String(parts[0]) { wrong += 1 }
        }
      }
      #expect(wrong == 0, "\(wrong) files read with wrong bytes")
    }
  }

  /// Staging GETs that give up mid-buffer (a stalled server, past read_timeout), that break
  /// (resets) or that end early give every staging buffer back: once the readers are done, all
  /// of them are free (a GET whose buffer was lost would leave later readers waiting for good),
  /// on both APIs.
  @Test(arguments: ["firebase", "gcs"]) func everyStagingBufferComesBack(api: String) async throws {
    try await MountFixture.scope { fx in
      var files: [Data] = []
      for i in 0..<6 {
        let data = randomData(6 << 20, seed: UInt64(9100 + i))
        _ = try await fx.put("back/f\(i).bin", data)
        files.append(data)
      }
      let m = try fx.mount(options: ["metrics=127.0.0.1:0", "read_timeout=2"], extra: ["--api", api], name: api)
      let port = try await metricsPort(m)
      let expected = files
      let wrong = Mutex(0)
      func readAll() {
        DispatchQueue.concurrentPerform(iterations: 6) { i in
          // An error is allowed while the server misbehaves; other bytes are not.
          if case .success(let got) = readFile(m.path("back/f\(i).bin")), got != expected[i] { wrong.withLock { $0 += 1 } }
        }
      }
      var stalls = Faults()
      stalls.stallAfterBytes = 100_000
      stalls.limit = 12
      fx.emulator?.setFaults(stalls)
      readAll()
      var resets = Faults()
      resets.resetAfterBytes = 150_000
      resets.limit = 30
      fx.emulator?.setFaults(resets)
      readAll()
      fx.emulator?.setFaults(Faults())
      // Whole and right once the server behaves.
      for i in 0..<6 { #expect(try readFile(m.path("back/f\(i).bin")).get() == files[i]) }
      #expect(wrong.withLock { $0 } == 0)
      var free = -1.0
      for _ in 0..<150 {
        let page = String(decoding: try await HTTPClient.shared.send(HTTPRequest(method: "GET", url: "http://127.0.0.1:\(port)/metrics")).body, as: UTF8.self)
        free = page.split(separator: "\n").first { $0.hasPrefix("bucketfs_staging_buffers_free ") }
          .flatMap { $0.split(separator: " ").last }.flatMap { Double($0) } ?? -1
        if free == 16 { break }
        try await Task.sleep(for: .milliseconds(100))
      }
      #expect(free == 16, "\(free) of 16 staging buffers free 15 s after the readers were done")
    }
  }

  /// A server that answers nothing in time: `stat`, `ls` and `getfattr` of names the mount has
  /// not seen get EIO within read_timeout rather than waiting for the server.
  @Test func metadataRequestsEndWithinTheirBound() async throws {
    try await MountFixture.scope { fx in
      _ = try await fx.put("slow/a/file.txt", Data("a".utf8))
      let m = try fx.mount(options: ["read_timeout=2"])
      var faults = Faults()
      faults.latency = .seconds(8)
      fx.emulator?.setFaults(faults)
      defer { fx.emulator?.setFaults(Faults()) }
      for (what, args) in [
        ("stat", ["/usr/bin/stat", m.path("slow/a/file.txt")]), ("ls", ["/bin/ls", m.path("slow/a")]),
        ("getfattr", ["/usr/bin/getfattr", "-n", "user.generation", m.path("slow/a/file.txt")]),
      ] {
        let started = Date()
        let job = ChildJob(args, in: "/")
        job.wait(until: started.addingTimeInterval(20))
        let seconds = Date().timeIntervalSince(started)
        #expect(job.finished && job.status != 0, "\(what) answered \(job.output) while the server was silent")
        #expect(seconds < 4, "\(what) waited \(seconds) s with read_timeout=2")
      }
      // Answered at their bound, not failed fast for some other reason.
      #expect(Int(m.stat("requests past their bound") ?? "") ?? 0 >= 1, "\(m.stat("requests past their bound") ?? "no stats")")
    }
  }

  /// 32 readers (whole files, random ranges, stats) for a bounded time while the server resets
  /// connections every few hundred KB, answers 503, and stalls: every answer within its bound,
  /// none wrong.
  @Test func readersUnderEveryFaultGetRightAnswersInTime() async throws {
    // Long enough for each fault phase once (2.5 s each); BUCKETFS_SOAK_SECONDS for a real soak.
    let seconds = Double(ProcessInfo.processInfo.environment["BUCKETFS_SOAK_SECONDS"] ?? "") ?? 10
    try await MountFixture.scope { fx in
      let fileCount = 16
      var uploaded: [Data] = []
      for i in 0..<fileCount {
        let data = randomData((1 << 20) + i * 200_003, seed: UInt64(8000 + i))
        _ = try await fx.put("soak/f\(i).bin", data)
        uploaded.append(data)
      }
      let readTimeout = 4.0
      // Each request the kernel sends is answered within read_timeout; one read(2) can be two
      // requests in a row (it waits for pages another reader's request holds, that request
      // succeeds slowly, then the read asks for the rest), so a read(2) is bounded by two.
      let readBound = 2 * readTimeout + 1
      let objects = uploaded
      // Small budgets so that staging buffers, the block cache and admission are all under pressure.
      // Files over 2 MiB are read through the block cache, the others staged.
      let m = try fx.mount(options: ["read_timeout=\(Int(readTimeout))", "cache_size=8M", "stage_max_file=2M", "metadata_ttl=1"])
      let tally = SoakTally()
      let stop = Atomic<Bool>(false)
      let threads = 32
      let done = DispatchGroup()
      for t in 0..<threads {
        done.enter()
        let thread = Thread {
          defer { done.leave() }
          var rng = SeededGenerator(seed: UInt64(t + 1))
          while !stop.load(ordering: .relaxed) {
            let i = Int.random(in: 0..<fileCount, using: &rng)
            let path = m.path("soak/f\(i).bin")
            let data = objects[i]
            switch t % 4 {
            case 0:
              tally.timed("whole-file read", bound: readTimeout + 2) {
                let fd = tally.syscall("open(2)", bound: readTimeout + 2) { open(path, O_RDONLY) }
                guard fd >= 0 else { return .failed }
                defer { close(fd) }
                var offset = 0
                var buffer = [UInt8](repeating: 0, count: 256 << 10)
                while true {
                  let started = Date()
                  let n = read(fd, &buffer, buffer.count)
                  tally.note("read(2)", seconds: Date().timeIntervalSince(started), bound: readBound)
                  if n < 0 { return .failed }
                  if n == 0 {
                    // The next read of this file asks the daemon again, not the kernel's page cache.
                    _ = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)
                    return offset == data.count ? .right : .wrong
                  }
                  if offset + n > data.count || !buffer.withUnsafeBytes({ raw in
                    data.withUnsafeBytes { memcmp($0.baseAddress! + offset, raw.baseAddress!, n) == 0 }
                  }) { return .wrong }
                  offset += n
                }
              }
            case 1, 2:
              let offset = Int.random(in: 0..<data.count, using: &rng)
              let count = min(data.count - offset, Int.random(in: 1...(300 << 10), using: &rng))
              tally.timed("random read", bound: readTimeout + 2) {
                let fd = tally.syscall("open(2)", bound: readTimeout + 2) { open(path, O_RDONLY) }
                guard fd >= 0 else { return .failed }
                defer { close(fd) }
                let first = tally.syscall("pread(2)", bound: readBound) { pread(fd, offset: Int64(offset), count: count) }
                guard case .success(let got) = first else { return .failed }
                let expected = data.subdata(in: offset..<(offset + count))
                if got == expected { return .right }
                // A read that failed partway returns the bytes before the failure (the kernel
                // reads page by page): right bytes, fewer of them, is a failure in time, and the
                // next read of the rest must fail or be right.
                guard got.count < count, got == expected.prefix(got.count) else { return .wrong }
                let second = tally.syscall("pread(2)", bound: readBound) {
                  pread(fd, offset: Int64(offset + got.count), count: count - got.count)
                }
                guard case .success(let rest) = second else { return .failed }
                return rest == expected.suffix(from: expected.startIndex + got.count).prefix(rest.count) && !rest.isEmpty ? .failed : .wrong
              }
            default:
              tally.timed("stat(2)", bound: readTimeout + 2) {
                var st = stat()
                guard stat(path, &st) == 0 else { return .failed }
                return st.st_size == data.count ? .right : .wrong
              }
              Thread.sleep(forTimeInterval: 0.05)
            }
          }
        }
        thread.start()
      }
      // Faults in turn, each for a while: latency with resets every few hundred KB, a share of
      // 503s, a few stalls, and calm.
      var phases: [Faults] = []
      var resets = Faults()
      resets.latency = .milliseconds(10)
      resets.resetAfterBytes = 300_000
      phases.append(resets)
      var unavailable = Faults()
      unavailable.errorStatus = 503
      unavailable.errorFraction = 0.2
      phases.append(unavailable)
      var stalls = Faults()
      stalls.stallAfterBytes = 200_000
      stalls.limit = 3
      phases.append(stalls)
      phases.append(Faults())
      let started = Date()
      var phase = 0
      while Date().timeIntervalSince(started) < seconds {
        fx.emulator?.setFaults(phases[phase % phases.count])
        phase += 1
        try await Task.sleep(for: .seconds(min(2.5, max(0.1, seconds - Date().timeIntervalSince(started)))))
      }
      fx.emulator?.setFaults(Faults())
      stop.store(true, ordering: .relaxed)
      let finished = done.wait(timeout: .now() + readTimeout * 4 + 10) == .success
      #expect(finished, "readers still waiting \(readTimeout * 4 + 10) s after the soak ended")
      let summary = tally.summary
      print("soak \(Int(seconds)) s: \(summary)")
      #expect(tally.wrong == 0, "wrong answers: \(summary)")
      #expect(tally.late.isEmpty, "answers past their bound: \(tally.late.prefix(5)); \(summary)")
      #expect(tally.right > 100, "too few answers to judge: \(summary)")
    }
  }
}

/// Counts a soak's answers: right, wrong, failed (an error in time is allowed), and late.
final class SoakTally: @unchecked Sendable {
  enum Outcome { case right, wrong, failed }
  private let lock = NSLock()
  private(set) var right = 0
  private(set) var wrong = 0
  private(set) var failed = 0
  private(set) var late: [String] = []
  private var slowest: [String: Double] = [:]

  func timed(_ what: String, bound: Double, _ body: () -> Outcome) {
    let started = Date()
    let outcome = body()
    let spent = Date().timeIntervalSince(started)
    lock.withLock {
      switch outcome {
      case .right: right += 1
      case .wrong: wrong += 1
      case .failed: failed += 1
      }
    }
    // A whole-file or random read is several system calls, each with its own bound.
    if what != "whole-file read" && what != "random read" { note(what, seconds: spent, bound: bound) }
  }

  /// Runs one system call, noting its time against `bound`.
  func syscall<T>(_ what: String, bound: Double, _ call: () -> T) -> T {
    let started = Date()
    let result = call()
    note(what, seconds: Date().timeIntervalSince(started), bound: bound)
    return result
  }

  func note(_ what: String, seconds: Double, bound: Double) {
    lock.withLock {
      slowest[what] = max(slowest[what] ?? 0, seconds)
      if seconds > bound { late.append("\(what) \(String(format: "%.1f", seconds)) s") }
    }
  }

  var summary: String {
    lock.withLock {
      let slow = slowest.sorted { $0.key < $1.key }.map { "\($0.key) slowest \(String(format: "%.2f", $0.value)) s" }
      return "\(right) right, \(wrong) wrong, \(failed) failed in time, \(late.count) late; " + slow.joined(separator: ", ")
    }
  }
}

/// A child process with its output collected; `wait(until:)` ends it (by pid) at the deadline.
final class ChildJob: @unchecked Sendable {
  let arguments: [String]
  private let process: ChildProcess?
  private let outputFile: URL
  private(set) var finished = false
  var status: Int32 { process?.termination?.status ?? -1 }
  var output: String { (try? String(contentsOf: outputFile, encoding: .utf8)) ?? "" }

  init(_ arguments: [String], in directory: String) {
    self.arguments = arguments
    outputFile = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("job-\(UUID().uuidString.prefix(8))")
    FileManager.default.createFile(atPath: outputFile.path, contents: nil)
    let out = try? FileHandle(forWritingTo: outputFile)
    defer { try? out?.close() }
    process = out.flatMap { out in
      try? ChildProcess(
        arguments[0], Array(arguments.dropFirst()), environment: ProcessInfo.processInfo.environment,
        output: .descriptor(out.fileDescriptor), errors: .sameAsOutput, directory: directory)
    }
  }

  func wait(until deadline: Date) {
    guard let process else { return }
    if process.wait(timeout: .seconds(max(0, deadline.timeIntervalSinceNow))) == nil {
      // A process waiting on a FUSE request the daemon never answers cannot die until the
      // mount goes (the fixture unmounts and ends the daemon): it is not waited for here.
      process.send(SIGKILL)
    } else {
      finished = true
    }
  }

  deinit { try? FileManager.default.removeItem(at: outputFile) }
}
