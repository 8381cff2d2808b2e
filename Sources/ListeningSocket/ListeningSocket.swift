// A TCP socket listening on a numeric address: the metrics page and the emulator open theirs
// the same way (the emulator shares this with the command line, not with the client).
import Foundation

package enum ListeningSocket {
  package enum Failure: Error, Equatable {
    /// The host is not a numeric IPv4 or IPv6 address.
    case notNumeric(String)
    /// socket(2), bind(2) or listen(2) failed: why, in words.
    case refused(String)
  }

  /// A socket listening on `host:port` (port 0: one the system picks) with close-on-exec and
  /// `SO_REUSEADDR`, and the port it is bound to.
  package static func open(host: String, port: Int, backlog: Int32) throws(Failure) -> (fd: Int32, port: Int) {
    var hints = addrinfo()
    hints.ai_family = AF_UNSPEC
    hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
    hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST
    var info: UnsafeMutablePointer<addrinfo>?
    guard getaddrinfo(host, String(port), &hints, &info) == 0, let info else { throw .notNumeric(host) }
    defer { freeaddrinfo(info) }
    let fd = socket(info.pointee.ai_family, info.pointee.ai_socktype | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw .refused("socket: \(String(cString: strerror(errno)))") }
    var one: Int32 = 1
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
    guard bind(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0, listen(fd, backlog) == 0 else {
      let reason = String(cString: strerror(errno))
      close(fd)
      throw .refused(reason)
    }
    var bound = sockaddr_storage()
    var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
    withUnsafeMutablePointer(to: &bound) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { _ = getsockname(fd, $0, &length) }
    }
    let family = bound.ss_family
    let boundPort: UInt16 = withUnsafePointer(to: &bound) { ptr in
      if family == sa_family_t(AF_INET6) {
        return ptr.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin6_port) }
      }
      return ptr.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) }
    }
    return (fd, Int(boundPort))
  }
}
