import BucketFS
import ChildProcess
import CMalloc
import Foundation
import FuseBridge
import StorageCore
import Glibc

/// `bucketfs mount`: checks everything that can fail before mounting, so a failure never leaves a
/// half-mounted folder; without -f, runs the mount in a background child and returns once it is up.
enum MountCommand {
  static let usage = """
    usage: bucketfs mount gs://BUCKET[/PREFIX] MOUNTPOINT [-f] [-d] [--offline] [-o OPT,...]

    Mounts the bucket (or the folder PREFIX of it) read-only at MOUNTPOINT. Without -f the command
    returns once the mount is up and the filesystem keeps running in the background (log:
    ~/.cache/bucketfs/mount.log); with -f it stays in the foreground and unmounts on SIGINT/SIGTERM.
    `fusermount3 -u MOUNTPOINT` always unmounts.

      -f             stay in the foreground          -d   foreground, and log every request
      --offline      serve staged copies only, no server (same as -o offline)
      --emulator HOST:PORT, --api firebase|gcs, and the credential options of the object
                     commands (see bucketfs --help); the token asks for read-only access
      -o ro, allow_other, uid=N, gid=N, file_mode=0444, dir_mode=0555,
         metadata_ttl=SECONDS (60), cache_size=SIZE (192M), staging_dir=DIR,
         staging_size=SIZE (10G), stage_max_file=SIZE (2G), read_timeout=SECONDS (30), offline,
         metadata_cache_size=SIZE (256M), key_file=FILE, token_file=FILE,
         metrics=HOST:PORT (Prometheus page at /metrics)
    """

  /// Added when mount(8) runs us as its helper (`bucketfs SOURCE MOUNTPOINT -o OPTIONS`).
  static let helperFlag = "--from-mount-helper"

  /// glibc raises its mmap threshold to the size of every large block freed (up to 32 MiB), so
  /// after the first big listing, its arrays (megabytes while 100,000 entries are gathered) and
  /// list pages come from the heap, where what is freed stays as holes the daemon's RSS keeps.
  /// A fixed threshold stops that: blocks of 4 MiB and up are mapped and given back when freed.
  /// (Measured: peak RSS after `ls -l` of 100,000 and `find` of 100 x 1,000, 126 -> 106 MiB.)
  private static func keepLargeBuffersOutOfTheHeap() {
    _ = mallopt(M_MMAP_THRESHOLD, 4 << 20)
    HeapRelease.afterBurst.set { _ = malloc_trim(0) }
  }

  static func run(_ args: inout Arguments, environment: [String: String]) async throws(CommandError) -> Int32 {
    let foreground = args.flag("-f", "--foreground")
    let debug = args.flag("-d", "--debug")
    let offlineFlag = args.flag("--offline")
    let readyPipe = args.flag("--notify-ready")  // internal: the background child reports on stdout
    let fromMountHelper = args.flag(helperFlag)
    var options = MountOptions()
    // Every -o counts, in order (mount(8) passes one; people write several).
    for list in try args.values("-o") {
      do {
        try options.apply(list)
      } catch {
        throw .usage(error.description)
      }
    }
    // mount(8) passes rw to every mount: there only `writable` makes a mount writable.
    options.settle(writableByRW: !fromMountHelper)
    if offlineFlag { options.offline = true }
    options.debug = debug
    // Hidden, for the crash-state tests: off unless set.
    if let record = environment["BUCKETFS_RECORD_QUEUE_DISK"], !record.isEmpty { options.queueDiskRecording = record }
    var client = try ClientOptions.parse(&args, environment: environment)
    // A read-only mount's token asks for read-only access unless --scopes says otherwise.
    if !client.scopesGiven && !options.writable { client.credentials.scopes = [StorageScope.readOnly] }
    if let keyFile = options.keyFile { client.credentials.keyFile = keyFile }
    if let tokenFile = options.tokenFile { client.credentials.tokenFile = tokenFile }
    let positionals = try args.positionals()
    guard positionals.count == 2 else { throw .usage(usage) }
    let (url, mountpoint) = (positionals[0], positionals[1])
    guard url.hasPrefix("gs://") || url.contains("/v0/b/") else { throw .usage("\(url): expected gs://BUCKET[/PREFIX]") }

    try checkMountpoint(mountpoint)
    if !foreground && !debug {
      return try spawnBackground(environment: environment)
    }
    keepLargeBuffersOutOfTheHeap()
    if readyPipe {
      // Leave the parent's session so its terminal's signals do not reach the daemon.
      setsid()
    }

    let ref = try await client.reference(url)
    let storage = ref.storage
    storage.timeouts = TransportTimeouts(connect: .seconds(min(10, max(1, Int(options.readTimeout)))), stall: .milliseconds(Int(options.readTimeout * 1000)))
    storage.maxDownloadRetryTime = options.readTimeout
    // The write-back queue retries by itself, for as long as it takes: one attempt gives up as
    // soon as a read would, so that the queue can say the server is away.
    storage.maxUploadRetryTime = options.readTimeout
    if let chunk = options.uploadChunk { storage.uploadChunkSize = chunk }
    storage.maxOperationRetryTime = options.readTimeout
    // A program waits on each lookup and read: a server that fails a share of requests is
    // retried from 50 ms (doubling to 32 s, within read_timeout), not from the SDK's 1 s, which
    // made a cp of 31 files into the mount take 124 s with half the requests answered 503 (now
    // 7-12 s; 1.4 s without faults).
    storage.retryInitialDelay = 0.05
    let metrics = Metrics()
    let objectClient = MeteredClient(StorageObjectClient(storage: storage), metrics: metrics)
    let prefix = ref.fullPath
    if !options.offline {
      do {
        // The folder the mount shows must be listable before anything is mounted.
        _ = try await ref.listPage(delimiter: "/", pageToken: nil, maxResults: 1)
      } catch {
        throw .storage(error)
      }
      // Before the first listing, which lists a hierarchical bucket's empty folders too. A
      // server that cannot say now is asked again when a folder change needs to know.
      _ = try? await objectClient.foldersAreResources()
    }
    let logger = MountLog(level: options.logLevel.flatMap(MountLog.Level.init(name:)) ?? (debug ? .debug : .info), json: options.logJSON, environment: environment)
    // The filesystem reports what went wrong with an object (dropped copies, left-out names,
    // failed reads): warnings.
    let log: @Sendable (String) -> Void = { line in logger.write(.warn, line) }
    let staging: StagingArea
    do {
      staging = try StagingArea(
        folder: options.stagingDir, bucket: ref.bucket, sizeLimit: options.stagingSize, maxFile: options.stageMaxFile, log: log)
    } catch {
      throw .local(options.stagingDir.path, "cannot use the staging folder: \(error is PrivateFolderRefusal ? "\(error)" : error.localizedDescription)")
    }
    let fs = BucketFilesystem(
      client: objectClient, prefix: prefix, options: options, staging: staging, log: log, metrics: metrics,
      tokenRefreshes: { storage.credentials?.refreshes ?? 0 }, transferLoopAge: { storage.client.secondsSinceLastTurn })
    if let refusal = fs.writeBackRefusal {
      throw .local(options.stagingDir.path, "cannot write back: \(refusal is QueueInUse ? "\(refusal)" : refusal.localizedDescription)")
    }
    let watchdog = TransferWatchdog(client: storage.client, metrics: metrics, log: log)
    var metricsServer: MetricsServer? = nil
    if let address = options.metricsAddress {
      do {
        let server = try MetricsServer(address: address) { metrics.prometheus(fs.readings()) }
        metricsServer = server
        // With port 0 the system chose one: this line is the only place it is said.
        logger.write(.info, "metrics at http://\(server.address)/metrics")
      } catch {
        throw .usage("\(error)")
      }
    }
    if options.writable && options.stagingSize <= 0 {
      throw .usage("a writable mount keeps its changes in the staging folder: staging_size must not be 0")
    }
    var fuseOptions = [options.writable ? "rw" : "ro", "fsname=bucketfs", "subtype=bucketfs", "default_permissions"] + options.fuseOptions
    if options.allowOther { fuseOptions.append("allow_other") }
    let session: FuseSession
    do {
      session = try FuseSession(filesystem: fs, mountpoint: mountpoint, options: fuseOptions, debug: debug)
    } catch {
      throw .failed("\(mountpoint): \(error)", status: ExitStatus.failure)
    }
    if readyPipe { announceReady() }
    logger.write(.info, "mounted \(ref) on \(mountpoint)\(options.offline ? " (offline)" : "")")
    if options.readWriteAsked && !options.writable {
      logger.write(.info, "read-only: mount(8) passes rw to every mount; -o writable makes this one writable")
    }
    if options.writable { logger.write(.info, "writable: changes are queued in the staging folder and written back") }
    if let source = storage.credentials?.source {
      // Which credentials, once; never the token.
      logger.write(.info, source is AnonymousSource ? "no credentials found: requests go anonymous" : "credentials: \(source.source) (\(source.identity))")
    }

    let notifier = SystemdNotifier(environment: environment)
    notifier.send(["READY=1", "STATUS=Mounted \(ref) on \(mountpoint)\(options.offline ? " (offline)" : "")", "MAINPID=\(getpid())"])
    // SIGHUP asks the server again about everything (as `bucketfs refresh MOUNTPOINT`);
    // SIGINT and SIGTERM unmount.
    SignalWaiter.onTermination(continuingOn: SIGHUP, { _ = fs.refresh(path: "") }) { signal in
      notifier.send(["STOPPING=1", "STATUS=Unmounting \(mountpoint) (signal \(signal))"])
      fs.stopping()
      session.stop()
    }
    let result: Int32 = await withCheckedContinuation { cont in
      // The loop blocks: it gets a thread of its own, not one of the task pool's.
      let thread = Thread { cont.resume(returning: session.run()) }
      thread.stackSize = 1 << 20
      thread.start()
    }
    // What closes queued since the last group commit lasts before the daemon ends.
    fs.unmounted()
    staging.cancelAll()
    // Not while a pin pass runs: it would run on into the process's exit (issue 55 F4).
    await fs.pinPassesEnded(within: 5)
    watchdog.stop()
    metricsServer?.stop()
    // Unmounted from outside (fusermount3 -u, umount) rather than by a signal: say so as well.
    notifier.send(["STOPPING=1", "STATUS=Unmounted \(mountpoint)"])
    logger.write(.info, "unmounted \(mountpoint)")
    return result == 0 ? 0 : ExitStatus.failure
  }

  static func checkMountpoint(_ path: String) throws(CommandError) {
    var st = stat()
    if DeadMount.isDead(path) {
      // A daemon of ours died and left its mount: clean exactly that state, and say so.
      guard DeadMount.cleanUp(path) else {
        throw .local(path, "cannot use as a mountpoint: a dead bucketfs mount is still there and could not be removed: run fusermount3 -u \(path)")
      }
      FileHandle.standardError.write(Data("bucketfs mount: \(path): unmounted a dead bucketfs mount left by a daemon that ended\n".utf8))
    }
    guard lstat(path, &st) == 0 else {
      let reason = errno == ENOTCONN ? "a dead mount is still there: run fusermount3 -u \(path)" : String(cString: strerror(errno))
      throw .local(path, "cannot use as a mountpoint: \(reason)")
    }
    guard (st.st_mode & S_IFMT) == S_IFDIR else { throw .local(path, "not a folder") }
    var parent = stat()
    let parentPath = URL(fileURLWithPath: path).standardizedFileURL.deletingLastPathComponent().path
    if lstat(parentPath, &parent) == 0, parent.st_dev != st.st_dev {
      throw .failed("\(path): busy: something is already mounted there", status: ExitStatus.failure)
    }
  }

  private static func announceReady() {
    FileHandle.standardOutput.write(Data("ready\n".utf8))
    // From now on the daemon writes to its log file, not to the parent's pipes.
    let logDir = URL(fileURLWithPath: ProcessInfo.processInfo.environment["HOME"] ?? "/tmp").appendingPathComponent(".cache/bucketfs")
    try? FileManager.default.createDirectory(at: logDir, withIntermediateDirectories: true)
    let logPath = logDir.appendingPathComponent("mount.log").path
    let fd = open(logPath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
    let null = open("/dev/null", O_RDWR)
    dup2(null, 0)
    dup2(null, 1)
    dup2(fd >= 0 ? fd : null, 2)
  }

  /// Runs the same command with -f in a background child and waits until it reports the mount up
  /// (exit 0) or fails (its message and status are passed on).
  private static func spawnBackground(environment: [String: String]) throws(CommandError) -> Int32 {
    let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path
    let child: ChildProcess
    do {
      // A session of its own: the daemon outlives this command and its terminal's signals.
      child = try ChildProcess(
        executable, Array(CommandLine.arguments.dropFirst()) + ["-f", "--notify-ready"], environment: environment,
        output: .pipe, errors: .pipe, newSession: true)
    } catch {
      throw .failed("cannot start the mount process: \(error)", status: ExitStatus.failure)
    }
    // The daemon closes both pipes once it says "ready" (its log takes over), or by dying.
    let (ready, message, _) = child.readToEnd()
    if String(decoding: ready, as: UTF8.self).contains("ready") { return 0 }
    let termination = child.wait()!
    FileHandle.standardError.write(message)
    return termination.status == 0 ? ExitStatus.failure : termination.status
  }
}
