import Foundation

/// Writes all of `bytes` to `fd`, through short writes and EINTR; false (errno set) on failure.
func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Bool {
  var done = 0
  while done < bytes.count {
    let n = write(fd, bytes.baseAddress! + done, bytes.count - done)
    if n < 0 {
      if errno == EINTR { continue }
      return false
    }
    done += n
  }
  return true
}
