import Foundation

/// The service manager's readiness protocol (sd_notify(3)): datagrams such as `READY=1` sent to
/// the socket named by NOTIFY_SOCKET, so that a `Type=notify` unit is started only once the
/// mount is up, and knows when it stops. Without NOTIFY_SOCKET it does nothing.
struct SystemdNotifier {
  let socketPath: String?

  init(environment: [String: String]) {
    socketPath = environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
  }

  /// Sends `fields` (e.g. ["READY=1", "STATUS=…"]) as one datagram; false when it could not.
  @discardableResult
  func send(_ fields: [String]) -> Bool {
    guard let socketPath else { return false }
    let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    // "@name" is the abstract namespace: a leading NUL byte in sun_path.
    var bytes = Array(socketPath.utf8)
    if bytes.first == UInt8(ascii: "@") { bytes[0] = 0 }
    let capacity = MemoryLayout.size(ofValue: address.sun_path)
    guard bytes.count < capacity else { return false }
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
      for (i, b) in bytes.enumerated() { raw[i] = b }
    }
    let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count)
    let message = fields.joined(separator: "\n")
    let sent = message.withCString { text in
      withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
          sendto(fd, text, strlen(text), Int32(MSG_NOSIGNAL), $0, length)
        }
      }
    }
    return sent >= 0
  }
}
