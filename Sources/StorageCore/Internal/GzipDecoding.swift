internal import CZlib
import Foundation

/// The bytes of an object stored with `Content-Encoding: gzip`, decompressed, for the surfaces
/// that return what the iOS SDK returns (NSURLSession decodes such a body before the app sees
/// it): `data(maxSize:)`, `getData`, `write(toFile:)`. Hashes are checked on the stored bytes
/// first; the mount and `bucketfs cp` keep the stored bytes, as gcsfuse and rclone do.
enum GzipDecoding {
  static func isGzip(_ head: HTTPResponseHead) -> Bool {
    head["content-encoding"]?.trimmingCharacters(in: .whitespaces).lowercased() == "gzip"
  }

  static func decode(_ data: Data, object: String) throws(StorageError) -> Data {
    let result = data.withUnsafeBytes { raw -> Data? in
      var out: UnsafeMutablePointer<UInt8>? = nil
      var length = 0
      guard CZlib_gunzip(raw.bindMemory(to: UInt8.self).baseAddress, raw.count, &out, &length) == 0 else { return nil }
      defer { free(out) }
      return out.map { Data(bytes: $0, count: length) } ?? Data()
    }
    guard let result else { throw notGzip(object) }
    return result
  }

  /// Decompresses file `path` in place (through a sibling temporary file).
  static func decodeFile(_ path: String, object: String) throws(StorageError) {
    let input = open(path, O_RDONLY | O_CLOEXEC)
    guard input >= 0 else { throw localFailure(path, object) }
    defer { close(input) }
    let decodedPath = path + ".gunzip"
    unlink(decodedPath)
    let output = open(decodedPath, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
    guard output >= 0 else { throw localFailure(decodedPath, object) }
    let status = CZlib_gunzip_fd(input, output)
    let saved = errno
    close(output)
    guard status == 0 else {
      unlink(decodedPath)
      if status == CZLIB_IO {
        errno = saved
        throw localFailure(decodedPath, object)
      }
      throw notGzip(object)
    }
    guard rename(decodedPath, path) == 0 else {
      let error = localFailure(path, object)
      unlink(decodedPath)
      throw error
    }
  }

  private static func notGzip(_ object: String) -> StorageError {
    StorageError(
      code: .nonMatchingChecksum, object: object,
      detail: "the server said Content-Encoding: gzip, but the bytes (whose hash matched) are not gzip")
  }

  private static func localFailure(_ path: String, _ object: String) -> StorageError {
    StorageError(code: .unknown, object: object, detail: "decompressing into \(path) failed: \(String(cString: strerror(errno)))", localFile: true)
  }
}
