import Foundation

extension ChildProcess {
  /// What a child wrote, and how it ended.
  package struct Output: Sendable {
    package var termination: Termination
    package var output: Data
    package var errors: Data
    /// True when the child was killed because it ran past its timeout.
    package var timedOut: Bool

    package var status: Int32 { termination.status }
    package var text: String { String(decoding: output, as: UTF8.self) }
    package var errorText: String { String(decoding: errors, as: UTF8.self) }
  }

  /// Starts `path`, writes `input` to it, reads its output and error to their end and waits
  /// for it; after `timeout` it is killed (SIGKILL) and what it wrote so far is kept.
  package static func run(
    _ path: String, _ arguments: [String], environment: [String: String],
    input: Data? = nil, errors: Stream = .pipe, directory: String? = nil, timeout: Duration? = nil
  ) throws(StartError) -> Output {
    let child = try ChildProcess(
      path, arguments, environment: environment, input: input == nil ? .null : .pipe, output: .pipe, errors: errors,
      directory: directory)
    let deadline = timeout.map { ContinuousClock.now + $0 }
    var (output, errorData, timedOut) = child.readToEnd(writing: input ?? Data(), until: deadline)
    if timedOut {
      child.send(SIGKILL)
    }
    var termination = child.wait(timeout: deadline.map { max(.zero, ContinuousClock.now.duration(to: $0)) })
    if termination == nil {
      timedOut = true
      child.send(SIGKILL)
      termination = child.wait()
    }
    if timedOut {
      // A grandchild may hold the pipes: take what is there, do not wait for their end.
      let rest = child.readToEnd(writing: Data(), until: ContinuousClock.now + .milliseconds(200))
      output += rest.output
      errorData += rest.errors
    }
    child.closePipes()
    return Output(termination: termination!, output: output, errors: errorData, timedOut: timedOut)
  }

  /// Writes `data` to the child's input (then closes it) while reading its output and error
  /// pipes until both end or `deadline` passes: what each held, and whether the deadline passed.
  package func readToEnd(writing data: Data = Data(), until deadline: ContinuousClock.Instant? = nil)
    -> (output: Data, errors: Data, timedOut: Bool)
  {
    var collected: [Int32: Data] = [:]
    var open = [output, errors].compactMap { $0 }
    var pending = data[...]
    if input != nil { Self.ignoreBrokenPipes }
    if let input {
      if pending.isEmpty {
        closeInput()
      } else {
        _ = fcntl(input, F_SETFL, fcntl(input, F_GETFL) | O_NONBLOCK)
      }
    }
    var buffer = [UInt8](repeating: 0, count: 65536)
    while !open.isEmpty || input != nil {
      var fds = open.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
      if let input { fds.append(pollfd(fd: input, events: Int16(POLLOUT), revents: 0)) }
      let left = deadline.map { ContinuousClock.now.duration(to: $0) }
      if let left, left <= .zero { return (collected[output ?? -1] ?? Data(), collected[errors ?? -1] ?? Data(), true) }
      let ready = poll(&fds, nfds_t(fds.count), left.map(Self.milliseconds) ?? -1)
      if ready < 0 && errno != EINTR { break }
      for fd in fds where fd.revents != 0 {
        if fd.fd == input {
          let written = pending.withUnsafeBytes { write(fd.fd, $0.baseAddress, $0.count) }
          if written > 0 { pending = pending.dropFirst(written) }
          if pending.isEmpty || (written < 0 && errno != EAGAIN && errno != EINTR) { closeInput() }
        } else {
          let count = Glibc.read(fd.fd, &buffer, buffer.count)
          if count > 0 {
            collected[fd.fd, default: Data()].append(contentsOf: buffer[..<count])
          } else if count == 0 || (errno != EAGAIN && errno != EINTR) {
            open.removeAll { $0 == fd.fd }
          }
        }
      }
    }
    return (collected[output ?? -1] ?? Data(), collected[errors ?? -1] ?? Data(), false)
  }

  /// A child that exits before reading all its input must fail our write (EPIPE), not end us.
  private static let ignoreBrokenPipes: Void = { signal(SIGPIPE, SIG_IGN) }()

  /// Reads the child's output until `text` appears or the output ends (or `deadline` passes):
  /// everything read, which may go on past `text`.
  package func readOutput(until text: String, deadline: ContinuousClock.Instant? = nil) -> Data {
    Self.read(output, until: text, deadline: deadline)
  }

  /// The same for the child's error pipe.
  package func readErrors(until text: String, deadline: ContinuousClock.Instant? = nil) -> Data {
    Self.read(errors, until: text, deadline: deadline)
  }

  private static func read(_ pipe: Int32?, until text: String, deadline: ContinuousClock.Instant?) -> Data {
    guard let pipe else { return Data() }
    var collected = Data()
    var buffer = [UInt8](repeating: 0, count: 4096)
    let marker = Data(text.utf8)
    while collected.range(of: marker) == nil {
      let left = deadline.map { ContinuousClock.now.duration(to: $0) }
      if let left, left <= .zero { break }
      var fd = pollfd(fd: pipe, events: Int16(POLLIN), revents: 0)
      let ready = poll(&fd, 1, left.map(Self.milliseconds) ?? -1)
      if ready < 0 && errno != EINTR { break }
      if ready <= 0 { continue }
      let count = Glibc.read(pipe, &buffer, buffer.count)
      if count > 0 {
        collected.append(contentsOf: buffer[..<count])
      } else if count == 0 || (errno != EAGAIN && errno != EINTR) {
        break
      }
    }
    return collected
  }
}
