import ChildProcess
import Foundation
import Synchronization
import Testing

@Suite struct ChildProcessTests {
  let environment = ProcessInfo.processInfo.environment

  /// The crash this helper exists to avoid came from spawning while the process's descriptor
  /// table changed: 1,000 children from four threads while two others open and close 2,000.
  @Test func thousandsOfChildrenWhileDescriptorsComeAndGo() {
    let tally = Tally()
    let environment = environment
    let threads = DispatchGroup()
    func thread(_ body: @escaping @Sendable () -> Void) {
      threads.enter()
      // Threads of their own, not the task pool: these block, as a busy mount's threads do.
      Thread { body(); threads.leave() }.start()
    }
    for _ in 0..<2 {
      thread {
        var opened = 0
        while tally.spawning || opened < 2000 {
          let held = (0..<200).map { _ in open("/dev/null", O_RDONLY) }
          held.forEach { _ = close($0) }
          opened += held.count
        }
        tally.add(opened: opened)
      }
    }
    for _ in 0..<4 {
      thread {
        for _ in 0..<250 {
          do {
            let child = try ChildProcess("/bin/true", [], environment: environment)
            tally.add(child.wait(timeout: .seconds(120)))
          } catch {
            tally.add(failure: "\(error)")
          }
        }
      }
    }
    threads.wait()
    #expect(tally.exitedWell == 1000, "\(tally.failures)")
    #expect(tally.opened >= 4000)
  }

  /// The child gets 0, 1 and 2 and nothing else, even a descriptor opened without O_CLOEXEC.
  @Test func noOtherDescriptorReachesTheChild() throws {
    let leaky = open("/dev/null", O_RDONLY)
    defer { close(leaky) }
    let listing = try ChildProcess.run("/bin/ls", ["-1", "/proc/self/fd"], environment: environment)
    let fds = Set(listing.text.split(separator: "\n").compactMap { Int($0) })
    // ls's own descriptor for the folder it lists is 3.
    #expect(fds.isSubset(of: [0, 1, 2, 3]), "\(fds)")
    #expect(listing.termination == .exited(0))
  }

  @Test func outputErrorsAndInputAreSeparatePipes() throws {
    let input = Data((0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 7) })
    // More than a pipe holds in each direction: input and output must be served together.
    let echoed = try ChildProcess.run("/bin/cat", [], environment: environment, input: input)
    #expect(echoed.output == input && echoed.termination == .exited(0))
    let both = try ChildProcess.run("/bin/sh", ["-c", "echo out; echo err >&2; exit 3"], environment: environment)
    #expect(both.text == "out\n" && both.errorText == "err\n" && both.termination == .exited(3))
    let merged = try ChildProcess.run(
      "/bin/sh", ["-c", "echo out; echo err >&2"], environment: environment, errors: .sameAsOutput)
    #expect(merged.text == "out\nerr\n" && merged.errors.isEmpty)
  }

  @Test func theEnvironmentIsExactlyWhatIsPassed() throws {
    let env = try ChildProcess.run("/usr/bin/env", [], environment: ["ONLY": "this"])
    #expect(env.text == "ONLY=this\n")
  }

  @Test func aChildPastItsTimeoutIsKilled() throws {
    let started = ContinuousClock.now
    let slow = try ChildProcess.run("/bin/sleep", ["60"], environment: environment, timeout: .milliseconds(200))
    #expect(slow.timedOut && slow.termination == .signaled(SIGKILL) && slow.status == 137)
    #expect(ContinuousClock.now - started < .seconds(30))
  }

  @Test func signalsAndStatusesAreReportedAsAShellDoes() throws {
    let child = try ChildProcess("/bin/sleep", ["60"], environment: environment)
    #expect(child.isRunning)
    child.send(SIGTERM)
    #expect(child.wait() == .signaled(SIGTERM))
    #expect(child.termination?.status == 128 + SIGTERM)
    // Once reaped, nothing is sent to a pid that may be another process's by now.
    child.send(SIGKILL)
    #expect(child.stop() == .signaled(SIGTERM))
  }

  @Test func aProgramThatCannotStartSaysWhy() {
    #expect(throws: ChildProcess.StartError.self) {
      try ChildProcess("/nonexistent/tool", [], environment: environment)
    }
  }

  @Test func theWorkingFolderIsSet() throws {
    let here = try ChildProcess.run("/bin/pwd", [], environment: environment, directory: "/tmp")
    #expect(here.text == "/tmp\n")
  }
}

/// What the threads of the spawning test saw.
final class Tally: @unchecked Sendable {
  private let state = Mutex<(exitedWell: Int, failures: [String], opened: Int, spawnersLeft: Int)>((0, [], 0, 1000))
  var exitedWell: Int { state.withLock { $0.exitedWell } }
  var failures: [String] { state.withLock { $0.failures } }
  var opened: Int { state.withLock { $0.opened } }
  var spawning: Bool { state.withLock { $0.spawnersLeft > 0 } }

  func add(_ ended: ChildProcess.Termination?) {
    state.withLock {
      $0.spawnersLeft -= 1
      if ended == .exited(0) { $0.exitedWell += 1 } else { $0.failures.append("\(ended.map { "\($0)" } ?? "still running")") }
    }
  }

  func add(failure: String) {
    state.withLock {
      $0.spawnersLeft -= 1
      $0.failures.append(failure)
    }
  }

  func add(opened count: Int) { state.withLock { $0.opened += count } }
}
