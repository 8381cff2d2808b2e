import Foundation
import StorageCore

/// The command line: picks the command, runs it, turns failures into one line and an exit status.
public enum BucketFSCLI {
  static let usage = """
    usage: bucketfs COMMAND [OPTIONS]

    Commands:
      mount gs://BUCKET[/PREFIX] MOUNTPOINT [-f] [-d] [-o OPT,...]   mount a bucket as a folder
      serve --root DIR [--port 9199]                                 run the local bucket emulator
      ls [-l] [-r] gs://BUCKET[/PREFIX]                              list objects
      stat [--json] gs://BUCKET/OBJECT                               show an object's metadata
      cat gs://BUCKET/OBJECT [--range START-END]                     write an object to stdout
      cp [-r] SRC DST                                                copy between bucket and disk
      rm [-r] gs://BUCKET/OBJECT                                     delete objects
      mv SRC DST                                                     move objects (copied by the server)
      du [-s] [-c] [-h] gs://BUCKET[/PREFIX]                         sizes of objects
      url gs://BUCKET/OBJECT                                         print the download URL
      auth                                                           show which credentials are used
      stats MOUNTPOINT                                               what a mount has done
      sync MOUNTPOINT [--timeout S]                                  wait until a writable mount's changes are in the bucket
      refresh MOUNTPOINT [PATH]                                      show changes made elsewhere now
      pin [--background] PATH...                                     keep files and folders available offline
      unpin PATH...                                                  stop keeping them
      status MOUNTPOINT [PATH]                                       what is pinned, and how far along

    Options of the object commands:
      --emulator HOST:PORT   talk to a local emulator (or set FIREBASE_STORAGE_EMULATOR_HOST, or
                             STORAGE_EMULATOR_HOST=http://HOST:PORT for the GCS JSON API)
      --api firebase|gcs     the REST API to speak (default firebase; gs URLs of
                             storage.googleapis.com pick gcs)
      --timeout SECONDS      give up on an unresponsive server after this long
    \(ClientOptions.tokenOptions)

    `bucketfs COMMAND --help` describes each command. See also man/bucketfs.1.
    """

  public static func run(_ argv: [String], environment: [String: String] = ProcessInfo.processInfo.environment) async
    -> Int32
  {
    guard let command = argv.first else {
      FileHandle.standardError.write(Data((usage + "\n").utf8))
      return ExitStatus.usage
    }
    // mount(8) through mount.fuse3 (fstab type fuse.bucketfs) runs `bucketfs SOURCE MOUNTPOINT -o OPTIONS`.
    if command.hasPrefix("gs://") || command.contains("/v0/b/") {
      return await run(["mount", MountCommand.helperFlag] + argv, environment: environment)
    }
    var args = Arguments(Array(argv.dropFirst()))
    if command == "--version" || command == "-V" || command == "version" {
      FileHandle.standardOutput.write(Data((Version.report + "\n").utf8))
      return 0
    }
    if command == "--help" || command == "-h" || command == "help" {
      FileHandle.standardOutput.write(Data((usage + "\n").utf8))
      return 0
    }
    if args.flag("--help", "-h") {
      FileHandle.standardOutput.write(Data((help(for: command) + "\n").utf8))
      return 0
    }
    do {
      switch command {
      case "serve":
        return try ServeCommand.run(&args)
      case "mount":
        return try await MountCommand.run(&args, environment: environment)
      case "stats":
        return try StatsCommand.run(&args)
      case "sync":
        return try SyncCommand.run(&args)
      case "refresh":
        return try RefreshCommand.run(&args)
      case "pin":
        return try PinCommand.pin(&args)
      case "unpin":
        return try PinCommand.unpin(&args)
      case "status":
        return try PinCommand.status(&args)
      case "ls", "stat", "cat", "cp", "rm", "url", "auth", "mv", "du":
        let client = try ClientOptions.parse(&args, environment: environment)
        switch command {
        case "ls": return try await ObjectCommands.ls(&args, client)
        case "stat": return try await ObjectCommands.stat(&args, client)
        case "cat": return try await ObjectCommands.cat(&args, client)
        case "rm": return try await ObjectCommands.rm(&args, client)
        case "url": return try await ObjectCommands.url(&args, client)
        case "auth": return try await AuthCommand.run(&args, client)
        case "mv": return try await MoveCommand.run(&args, client)
        case "du": return try await DiskUsageCommand.run(&args, client)
        default: return try await CopyCommand.run(&args, client)
        }
      default:
        throw CommandError.usage("unknown command \(command)\n\n\(usage)")
      }
    } catch let error as CommandError {
      FileHandle.standardError.write(Data("bucketfs \(command): \(error.printable)\n".utf8))
      return error.status
    } catch {
      FileHandle.standardError.write(Data("bucketfs \(command): \(error)\n".utf8))
      return ExitStatus.failure
    }
  }

  static func help(for command: String) -> String {
    switch command {
    case "serve": return ServeCommand.usage
    case "mount": return MountCommand.usage
    case "ls": return ObjectCommands.lsUsage
    case "stat": return ObjectCommands.statUsage
    case "cat": return ObjectCommands.catUsage
    case "rm": return ObjectCommands.rmUsage
    case "url": return ObjectCommands.urlUsage
    case "cp": return CopyCommand.usage
    case "auth": return AuthCommand.usage
    case "stats": return StatsCommand.usage
    case "sync": return SyncCommand.usage
    case "refresh": return RefreshCommand.usage
    case "pin": return PinCommand.pinUsage
    case "unpin": return PinCommand.unpinUsage
    case "status": return PinCommand.statusUsage
    case "mv": return MoveCommand.usage
    case "du": return DiskUsageCommand.usage
    default: return usage
    }
  }
}
