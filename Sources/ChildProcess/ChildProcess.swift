// A program this process starts: posix_spawn with explicit standard streams and environment,
// every other descriptor closed in the child, and its end learned through a pidfd.
//
// Foundation's `Process` is not used anywhere in this package: on Linux with this toolchain its
// `run()` reads past a buffer while listing /proc/self/fd (swift-corelibs-foundation #5472) and
// crashes at random in a process with many descriptors, which a mount is. This is the one place
// that starts a program; the token command, the mount's self-start, fusermount and the tests'
// tools all go through it.
internal import CSpawn
import Foundation
import Synchronization

/// A child process: its pid, the parent's ends of its pipes, and how it ended once it has.
package final class ChildProcess: @unchecked Sendable {
  /// Where one of the child's standard streams goes.
  package enum Stream: Sendable {
    /// /dev/null.
    case null
    /// This process's own stream of the same number.
    case inherit
    /// A pipe whose other end this object keeps (`input`, `output`, `errors`).
    case pipe
    /// Standard error only: the same pipe or file as standard output.
    case sameAsOutput
    /// A descriptor of the caller's (a log file, say), which it keeps and closes.
    case descriptor(Int32)
  }

  /// How a child ended.
  package enum Termination: Equatable, Sendable, CustomStringConvertible {
    case exited(Int32)
    case signaled(Int32)

    /// The exit status as a shell reports it: the code, or 128 + the signal.
    package var status: Int32 {
      switch self {
      case .exited(let code): code
      case .signaled(let signal): 128 + signal
      }
    }

    package var description: String {
      switch self {
      case .exited(let code): "exited with status \(code)"
      case .signaled(let signal): "killed by signal \(signal)"
      }
    }
  }

  /// A program that could not be started.
  package struct StartError: Error, CustomStringConvertible {
    package let path: String
    package let errno: Int32
    package var description: String { "\(path): cannot start: \(String(cString: strerror(errno)))" }
  }

  package let pid: Int32
  package let path: String
  /// The parent's ends of the pipes asked for (closed by `closePipes` or deinit).
  package private(set) var input: Int32?
  package private(set) var output: Int32?
  package private(set) var errors: Int32?
  /// -1 on a kernel without pidfds (before 5.3): then waiting polls.
  private let pidfd: Int32
  /// Set once, by whoever reaps the child; guards against signalling a reused pid.
  private let ended = Mutex<Termination?>(nil)

  /// Starts `path` (an absolute path: nothing is looked up in PATH) with `arguments` and exactly
  /// `environment`.
  package init(
    _ path: String, _ arguments: [String], environment: [String: String],
    input inputStream: Stream = .null, output outputStream: Stream = .null, errors errorStream: Stream = .null,
    directory: String? = nil, newSession: Bool = false
  ) throws(StartError) {
    self.path = path
    var opened: [Int32] = []  // the child's ends, closed here once it has them
    var parentEnds: [Int32] = []
    func fail(_ code: Int32) -> StartError {
      (opened + parentEnds).forEach { _ = close($0) }
      return StartError(path: path, errno: code)
    }
    func childEnd(_ stream: Stream, reading: Bool) throws(StartError) -> (child: Int32, parent: Int32?) {
      switch stream {
      case .inherit, .sameAsOutput: return (-1, nil)
      case .descriptor(let fd): return (fd, nil)
      case .null:
        let fd = open("/dev/null", (reading ? O_RDONLY : O_WRONLY) | O_CLOEXEC)
        guard fd >= 0 else { throw fail(errno) }
        opened.append(fd)
        return (fd, nil)
      case .pipe:
        var fds: [Int32] = [-1, -1]
        guard CSpawn_pipe(&fds) == 0 else { throw fail(errno) }
        // fds[0] reads, fds[1] writes: the child reads its input and writes its output.
        let (child, parent) = reading ? (fds[0], fds[1]) : (fds[1], fds[0])
        opened.append(child)
        parentEnds.append(parent)
        return (child, parent)
      }
    }
    let stdin = try childEnd(inputStream, reading: true)
    let stdout = try childEnd(outputStream, reading: false)
    var stderr = try childEnd(errorStream, reading: false)
    if case .sameAsOutput = errorStream { stderr = (stdout.child, nil) }
    let argv = [path] + arguments
    let envp = environment.map { "\($0.key)=\($0.value)" }
    var child: Int32 = 0
    let status = withCStrings(argv) { argvPointer in
      withCStrings(envp) { envpPointer in
        CSpawn_start(
          &child, path, argvPointer, envpPointer, stdin.child, stdout.child, stderr.child, directory, newSession ? 1 : 0)
      }
    }
    guard status == 0 else { throw fail(status) }
    opened.forEach { _ = close($0) }
    pid = child
    input = stdin.parent
    output = stdout.parent
    errors = stderr.parent
    pidfd = CSpawn_pidfd(child)
  }

  deinit {
    closePipes()
    if pidfd >= 0 { close(pidfd) }
  }

  /// Closes the parent's ends of the pipes: the child reads EOF and its writes fail.
  package func closePipes() {
    for fd in [input, output, errors].compactMap({ $0 }) { close(fd) }
    input = nil
    output = nil
    errors = nil
  }

  /// Closes the child's standard input: it reads EOF.
  package func closeInput() {
    if let input { close(input) }
    input = nil
  }

  /// How the child ended, reaping it if it just has; nil while it runs.
  package var termination: Termination? {
    ended.withLock { ended in
      if ended == nil {
        var status: Int32 = 0
        let reaped = waitpid(pid, &status, WNOHANG)
        if reaped == pid {
          ended = Self.termination(status)
        } else if reaped < 0 && errno == ECHILD {
          // Reaped elsewhere (nothing here does that): its status is lost, but it has ended.
          ended = .exited(-1)
        }
      }
      return ended
    }
  }

  package var isRunning: Bool { termination == nil }

  /// Sends `signal` unless the child has ended (its pid may belong to another process by then).
  package func send(_ signal: Int32) {
    if pidfd >= 0 {
      _ = CSpawn_pidfd_signal(pidfd, signal)
      return
    }
    ended.withLock { ended in
      if ended == nil { kill(pid, signal) }
    }
  }

  /// Waits until the child ends, at most `timeout` (nil: for ever); nil when it still runs.
  @discardableResult
  package func wait(timeout: Duration? = nil) -> Termination? {
    let deadline = timeout.map { ContinuousClock.now + $0 }
    while true {
      if let done = termination { return done }
      let left = deadline.map { ContinuousClock.now.duration(to: $0) }
      if let left, left <= .zero { return nil }
      if pidfd >= 0 {
        var fd = pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)
        _ = poll(&fd, 1, left.map(Self.milliseconds) ?? -1)
      } else {
        usleep(10_000)
      }
    }
  }

  /// Asks the child to stop (SIGTERM), then makes it (SIGKILL) after `grace`; how it ended.
  @discardableResult
  package func stop(grace: Duration = .seconds(5)) -> Termination {
    if let done = termination { return done }
    send(SIGTERM)
    if let done = wait(timeout: grace) { return done }
    send(SIGKILL)
    return wait()!
  }

  static func termination(_ status: Int32) -> Termination {
    // WIFEXITED / WEXITSTATUS / WTERMSIG are macros Swift cannot call.
    let signal = status & 0x7f
    return signal == 0 ? .exited((status >> 8) & 0xff) : .signaled(signal)
  }

  static func milliseconds(_ duration: Duration) -> Int32 {
    let (seconds, attoseconds) = duration.components
    let ms = seconds * 1000 + attoseconds / 1_000_000_000_000_000 + 1
    return Int32(clamping: max(0, ms))
  }
}

/// Calls `body` with a NULL-terminated C array of `strings`, valid only during the call.
private func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) -> R) -> R {
  // strdup'd copies: the array must outlive every String's temporary buffer.
  let pointers = strings.map { strdup($0) } + [nil]
  defer { pointers.forEach { free($0) } }
  return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
}
