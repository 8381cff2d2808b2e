import Foundation

/// An extended attribute of a mount's root, which the daemon answers (`bucketfs stats`, `bucketfs
/// sync`): nothing but the mountpoint is needed to ask a running mount.
enum MountAttribute {
  // Glibc's module map leaves out <sys/xattr.h>: getxattr is found at run time.
  private typealias GetXattr = @convention(c) (UnsafePointer<CChar>, UnsafePointer<CChar>, UnsafeMutableRawPointer?, Int) -> Int

  static func read(_ mountpoint: String, _ name: String) throws(CommandError) -> String {
    guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "getxattr") else {
      throw .failed("cannot find getxattr in the C library", status: ExitStatus.failure)
    }
    let getxattr = unsafeBitCast(symbol, to: GetXattr.self)
    var buffer = [UInt8](repeating: 0, count: 1 << 20)
    let n = buffer.withUnsafeMutableBytes { getxattr(mountpoint, name, $0.baseAddress, $0.count) }
    guard n >= 0 else {
      let reason = errno == ENODATA || errno == ENOTSUP ? "not a bucketfs mount" : String(cString: strerror(errno))
      throw .local(mountpoint, reason)
    }
    return String(decoding: buffer[0..<n], as: UTF8.self)
  }
}
