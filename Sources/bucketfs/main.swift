import BucketFSCommand
import Foundation

// Top-level code without `await` runs on the process's main thread before any other thread
// exists, so the signal mask set here is inherited by every thread that follows. The main thread
// then waits on a semaphore rather than in dispatchMain(), which sleeps in sigsuspend with every
// signal unblocked and would take SIGTERM itself.
signal(SIGPIPE, SIG_IGN)
let arguments = Array(CommandLine.arguments.dropFirst())
if let command = arguments.first, ["serve", "mount", "cp"].contains(command) || command.hasPrefix("gs://") {
  SignalWaiter.blockTerminationSignals()
}
let finished = DispatchSemaphore(value: 0)
nonisolated(unsafe) var status: Int32 = 0
Task.detached {
  status = await BucketFSCLI.run(arguments)
  finished.signal()
}
finished.wait()
let terminatedBy = SignalWaiter.receivedSignal
// Only for work the signal cancelled: a mount that unmounted cleanly on SIGTERM still exits 0.
exit(terminatedBy != 0 && status == ExitStatus.interrupted ? 128 + terminatedBy : status)
