import Foundation

/// The mount's settings, from `-o` options.
package struct MountOptions: Sendable {
  package var uid: UInt32 = getuid()
  package var gid: UInt32 = getgid()
  package var fileMode: UInt32 = 0o444
  package var dirMode: UInt32 = 0o555
  /// As gcsfuse's default: a walk over a tree lists each folder once however long it takes.
  package var metadataTTL: Double = 60
  /// How long a name is known to be missing (gcsfuse's `negative-ttl-secs` is 5 too): an
  /// object written elsewhere shows up within this even when its folder was listed just before.
  package var negativeTTL: Double = 5
  /// How long a miss is kept: `negative_ttl`, never longer than what is known of names at all.
  package var missTTL: Double { min(metadataTTL, negativeTTL) }
  /// 192 MiB keeps the daemon's peak RSS under 300 MiB with prefetch windows in flight.
  package var cacheSize: Int = 192 << 20
  package var stagingDir: URL = MountOptions.defaultStagingDir
  package var stagingSize: Int64 = 10 << 30
  /// What the daemon keeps about names (listings, attributes fetched one by one, names known
  /// missing) may hold this much together; least recently used first out.
  package var metadataCacheSize: Int = 256 << 20
  package var stageMaxFile: Int64 = 2 << 30
  /// Seconds between passes over the pins (`pin_interval`): each lists a pinned folder with one
  /// recursive listing (a request per 1,000 objects) and fetches what changed.
  package var pinInterval: Double = 60
  /// Seconds between passes that ask every pinned object's metadata where a listing has none
  /// (`pin_verify_interval`, the Firebase v0 API; 0: only on `bucketfs refresh` and SIGHUP).
  package var pinVerifyInterval: Double = 86_400
  package var readTimeout: Double = 30
  /// The size of a large upload's chunks (the write-back queue's); nil: the client's (32M).
  package var uploadChunk: Int64?
  package var offline = false
  /// Complete staged copies are read by the kernel itself (FUSE passthrough) where it can;
  /// `-o passthrough=no` keeps every read going through the daemon.
  package var passthrough = true
  /// Mode, owner, group and times are read from and kept in the objects' custom metadata (the
  /// keys of Google's `--preserve-posix`); `-o posix=no` shows the mount's own and refuses
  /// chmod and chown.
  package var posix = true
  package var allowOther = false
  package var debug = false
  /// Credentials named in `-o` (the way fstab passes them): a key file or a token file.
  package var keyFile: String?
  /// `HOST:PORT` where the Prometheus metrics page is served (`-o metrics=127.0.0.1:9464`).
  package var metricsAddress: String?
  /// `log_level=error|warn|info|debug` and `log_format=text|json`.
  package var logLevel: String?
  package var logJSON = false
  package var tokenFile: String?
  /// `rw` was among the options. mount(8) passes it to every mount it starts, so only
  /// `bucketfs mount -o rw` makes a mount writable; in fstab that is `writable`.
  package var readWriteAsked = false
  /// Writes are accepted (`writable`, or `rw` on bucketfs's own command line).
  package var writable = false
  /// `commit=SECONDS`: how often the write-back queue's group commit makes closed files last
  /// across a power loss (ext4's `commit=`); 0: every close fsyncs before it returns.
  package var commitInterval: Double = 1
  /// A file the write-back queue writes down its disk's operations in, for a test
  /// (`RecordedQueueDisk`): from the environment (`BUCKETFS_RECORD_QUEUE_DISK`), never an option.
  package var queueDiskRecording: String?
  /// `ro` was among the options: read-only whatever else says.
  package var readOnlyAsked = false
  var modesGiven = false

  /// Settles what the options say together: `ro` wins over `writable`, and a writable mount's
  /// files and folders are writable by their owner unless modes were given.
  package mutating func settle(writableByRW: Bool) {
    if writableByRW && readWriteAsked { writable = true }
    if readOnlyAsked { writable = false }
    if writable && !modesGiven {
      fileMode = 0o644
      dirMode = 0o755
    }
  }
  /// Options passed on to libfuse untouched.
  package var fuseOptions: [String] = []

  package init() {}

  package static var defaultStagingDir: URL {
    let home = ProcessInfo.processInfo.environment["HOME"] ?? "/tmp"
    return URL(fileURLWithPath: home).appendingPathComponent(".cache/bucketfs/staging")
  }

  package enum ParseError: Error, CustomStringConvertible {
    case bad(String)
    package var description: String {
      switch self { case .bad(let s): return s }
    }
  }

  /// Parses a comma-separated `-o` list into these options.
  package mutating func apply(_ list: String) throws(ParseError) {
    for item in list.split(separator: ",").map(String.init) where !item.isEmpty {
      let kv = item.split(separator: "=", maxSplits: 1).map(String.init)
      let key = kv[0]
      let value = kv.count > 1 ? kv[1] : nil
      func need() throws(ParseError) -> String {
        guard let value, !value.isEmpty else { throw .bad("option \(key) needs a value") }
        return value
      }
      switch key {
      case "ro": readOnlyAsked = true
      // mount(8) passes rw unless ro is given; the mount is read-only whatever it says.
      case "rw": readWriteAsked = true
      // Options that mount(8), systemd and fstab use for themselves.
      case "_netdev", "noauto", "auto", "user", "users", "nouser", "owner", "group", "nofail", "defaults", "async", "sync",
        "relatime", "norelatime", "strictatime", "lazytime", "nodiratime", "diratime", "loud", "silent":
        break
      case let other where other.hasPrefix("x-") || other.hasPrefix("comment="):
        break
      case "allow_other": allowOther = try Self.boolean(value, key)
      case "offline": offline = try Self.boolean(value, key)
      case "passthrough": passthrough = try Self.boolean(value, key)
      case "posix": posix = try Self.boolean(value, key)
      case "writable": writable = try Self.boolean(value, key)
      case "uid": uid = try Self.number(need(), key)
      case "gid": gid = try Self.number(need(), key)
      case "file_mode":
        fileMode = try Self.octal(need(), key)
        modesGiven = true
      case "dir_mode":
        dirMode = try Self.octal(need(), key)
        modesGiven = true
      case "metadata_ttl": metadataTTL = try Self.seconds(need(), key, allowZero: true)
      case "negative_ttl": negativeTTL = try Self.seconds(need(), key, allowZero: true)
      case "read_timeout": readTimeout = try Self.seconds(need(), key, allowZero: false)
      case "commit": commitInterval = try Self.seconds(need(), key, allowZero: true)
      case "cache_size": cacheSize = Int(try Self.size(need(), key))
      case "staging_dir": stagingDir = URL(fileURLWithPath: try need())
      case "key_file": keyFile = try need()
      case "metrics": metricsAddress = try need()
      case "log_level":
        let value = try need()
        guard ["error", "warn", "warning", "info", "debug"].contains(value) else { throw .bad("log_level takes error, warn, info or debug") }
        logLevel = value
      case "log_format":
        let value = try need()
        guard value == "json" || value == "text" else { throw .bad("log_format takes text or json") }
        logJSON = value == "json"
      case "token_file": tokenFile = try need()
      case "staging_size": stagingSize = try Self.size(need(), key)
      case "metadata_cache_size":
        let size = try Self.size(need(), key)
        guard size >= 1 << 20 else { throw .bad("metadata_cache_size must be at least 1M") }
        metadataCacheSize = Int(clamping: size)
      case "stage_max_file": stageMaxFile = try Self.size(need(), key)
      case "pin_interval": pinInterval = try Self.seconds(need(), key, allowZero: false)
      case "pin_verify_interval": pinVerifyInterval = try Self.seconds(need(), key, allowZero: true)
      case "upload_chunk": uploadChunk = try Self.size(need(), key)
      case "default_permissions", "noatime", "atime", "nosuid", "nodev", "exec", "noexec", "suid", "dev":
        fuseOptions.append(item)
      default:
        throw .bad("unknown mount option \(key) (see man bucketfs: MOUNT OPTIONS)")
      }
    }
  }

  /// A flag alone, or with a value as mount(8) users write them.
  static func boolean(_ value: String?, _ key: String) throws(ParseError) -> Bool {
    guard let value else { return true }
    switch value.lowercased() {
    case "1", "yes", "true", "on": return true
    case "0", "no", "false", "off": return false
    default: throw .bad("\(key) takes yes or no (or nothing), not \(value)")
    }
  }

  /// Longest a time option may say: a week (anything longer is a mistake, and seconds become
  /// integer milliseconds and nanoseconds further on).
  static let maxSeconds = 7.0 * 86_400

  /// Seconds from outside (an option, a flag): finite, more than 0 (or 0 when allowed), at most a
  /// week. The one rule for every time a user gives.
  package static func seconds(_ text: String, _ key: String, allowZero: Bool) throws(ParseError) -> Double {
    guard let v = Double(text), v.isFinite, allowZero ? v >= 0 : v > 0 else {
      throw .bad("\(key) takes seconds, such as 30 or 0.5")
    }
    guard v <= maxSeconds else { throw .bad("\(key) takes at most \(Int(maxSeconds)) seconds (a week)") }
    return v
  }

  static func number(_ text: String, _ key: String) throws(ParseError) -> UInt32 {
    guard let n = UInt32(text) else { throw .bad("\(key) takes a number") }
    return n
  }

  static func octal(_ text: String, _ key: String) throws(ParseError) -> UInt32 {
    guard let n = UInt32(text, radix: 8), n <= 0o7777 else { throw .bad("\(key) takes an octal mode such as 0444") }
    return n
  }

  static let maxSize: Int64 = 1 << 50

  /// `1024`, `64K`, `256M`, `10G` (powers of 1024).
  package static func size(_ text: String, _ key: String) throws(ParseError) -> Int64 {
    let units: [Character: Int64] = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40]
    var digits = text.uppercased()
    if digits.hasSuffix("B") { digits.removeLast() }
    var multiplier: Int64 = 1
    if let last = digits.last, let m = units[last] {
      multiplier = m
      digits.removeLast()
    }
    guard let n = Int64(digits), n >= 0 else { throw .bad("\(key) takes a size such as 256M") }
    // Sizes from outside are kept where byte counts cannot overflow anywhere downstream.
    let (bytes, overflow) = n.multipliedReportingOverflow(by: multiplier)
    guard !overflow, bytes <= maxSize else { throw .bad("\(key) takes at most 1P (\(text) is too large)") }
    return bytes
  }
}
