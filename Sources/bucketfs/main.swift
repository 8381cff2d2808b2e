import BucketFSCommand
import Foundation

signal(SIGPIPE, SIG_IGN)
let status = await BucketFSCLI.run(Array(CommandLine.arguments.dropFirst()))
exit(status)
