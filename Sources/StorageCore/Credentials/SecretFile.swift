// Files that hold a secret: a token, a refresh token, a key. What such a file holds is sent to
// a server as a credential, so a file someone else could have put in its place is refused: a
// symlink on the way that belongs to another user (the trick that turns `/tmp/token` into
// `/etc/shadow`), a target that is not a regular file owned by this user or root, one too large
// to be a credential.
import Foundation

enum SecretFile {
  static let maxSize = 1 << 20

  /// The file's bytes, or an `unauthenticated` error saying why it was refused (never its content).
  static func read(_ path: String, what: String) throws(StorageError) -> Data {
    func refuse(_ why: String) -> StorageError {
      StorageError(code: .unauthenticated, object: path, detail: "refusing the \(what): \(why)")
    }
    let me = geteuid()
    var current = path
    // Follows symlinks by hand, so that each one's owner is checked.
    for _ in 0..<16 {
      var st = stat()
      guard lstat(current, &st) == 0 else { throw refuse("cannot read it (\(String(cString: strerror(errno))))") }
      guard st.st_mode & S_IFMT == S_IFLNK else { break }
      guard st.st_uid == me || st.st_uid == 0 else {
        throw refuse("\(current) is a symlink owned by another user (uid \(st.st_uid))")
      }
      var target = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
      let n = readlink(current, &target, target.count - 1)
      guard n > 0 else { throw refuse("cannot read the symlink \(current)") }
      let link = String(decoding: target[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
      current = link.hasPrefix("/") ? link : (current as NSString).deletingLastPathComponent + "/" + link
    }
    let fd = open(current, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
    guard fd >= 0 else { throw refuse("cannot read it (\(String(cString: strerror(errno))))") }
    defer { close(fd) }
    var st = stat()
    guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG else { throw refuse("it is not a regular file") }
    guard st.st_uid == me || st.st_uid == 0 else {
      throw refuse("it belongs to another user (uid \(st.st_uid)), not to uid \(me) or root")
    }
    guard st.st_size <= maxSize else { throw refuse("it is \(st.st_size) bytes, too large to be a credential") }
    var data = Data(count: Int(st.st_size))
    let got = data.withUnsafeMutableBytes { raw in raw.count == 0 ? 0 : Foundation.read(fd, raw.baseAddress!, raw.count) }
    guard got >= 0 else { throw refuse("cannot read it (\(String(cString: strerror(errno))))") }
    data.count = got
    return data
  }

  /// The first line of the file, which must be a token: visible ASCII of the characters tokens
  /// are made of (RFC 6750's b64token: letters, digits, `-._~+/`, then `=` padding).
  static func token(_ path: String, what: String) throws(StorageError) -> String {
    let data = try read(path, what: what)
    let text = String(decoding: data, as: UTF8.self)
    let line = text.split(whereSeparator: \.isNewline).first.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
    guard !line.isEmpty else {
      throw StorageError(code: .unauthenticated, object: path, detail: "the \(what) is empty")
    }
    guard isToken(line) else {
      throw StorageError(
        code: .unauthenticated, object: path,
        detail: "refusing the \(what): its first line is not a token (tokens are letters, digits and -._~+/=)")
    }
    return line
  }

  static func isToken(_ text: String) -> Bool {
    guard !text.isEmpty, text.utf8.count <= 16 << 10 else { return false }
    var padding = false
    for byte in text.utf8 {
      switch byte {
      case UInt8(ascii: "="): padding = true
      case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
        UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "+"), UInt8(ascii: "/"):
        if padding { return false }
      default: return false
      }
    }
    return true
  }
}
