// What a bucket folder holds, as one file the server reads at start instead of every side file:
// a header naming the bucket, then a line per change, appended as it happens:
//   +GENERATION<TAB>NAME      the name holds that generation now
//   -<TAB>NAME                the name was deleted
// Object names never hold a line feed or carriage return (Cloud Storage refuses them), so a line
// is a change, whatever other bytes the name has. A store whose log is missing, cut short, or
// disagrees with the side files in count is indexed from the side files again (the side files
// stay the record of each object; the log says which exist).
import Foundation

struct IndexLog {
  static let fileName = "index"
  static let header = "bucketfs-emulator-index 1\t"

  /// The bucket's live names and generations as the log says, with how many lines it took (the
  /// log is written again when mostly superseded lines); nil when it cannot be trusted.
  struct Replayed {
    var bucket: String
    var generations: [ObjectStore.Key: Int64]
    var lines: Int
  }

  static func replay(folder: URL) -> Replayed? {
    guard let data = FileManager.default.contents(atPath: folder.appendingPathComponent(fileName).path) else { return nil }
    return data.withUnsafeBytes { raw -> Replayed? in
      let bytes = raw.bindMemory(to: UInt8.self)
      // Only whole lines: a log whose last line has no line feed was cut short.
      guard bytes.last == 0x0A else { return nil }
      var lineStart = 0
      var bucket: String?
      var generations: [ObjectStore.Key: Int64] = [:]
      var lines = 0
      while lineStart < bytes.count {
        var end = lineStart
        while bytes[end] != 0x0A { end += 1 }
        let line = UnsafeBufferPointer(rebasing: bytes[lineStart..<end])
        lineStart = end + 1
        guard let tab = line.firstIndex(of: 0x09) else { return nil }
        let name = Array(line[(tab + 1)...])
        if bucket == nil {
          guard String(decoding: line[..<(tab + 1)], as: UTF8.self) == header else { return nil }
          bucket = String(decoding: name, as: UTF8.self)
          continue
        }
        lines += 1
        switch line.first {
        case UInt8(ascii: "+"):
          guard let generation = Int64(String(decoding: line[1..<tab], as: UTF8.self)) else { return nil }
          generations[ObjectStore.Key(bytes: name)] = generation
        case UInt8(ascii: "-"):
          generations.removeValue(forKey: ObjectStore.Key(bytes: name))
        default:
          return nil
        }
      }
      guard let bucket else { return nil }
      return Replayed(bucket: bucket, generations: generations, lines: lines)
    }
  }

  static func putLine(_ name: ObjectStore.Key, generation: Int64) -> [UInt8] { Array("+\(generation)\t".utf8) + name.bytes + [0x0A] }
  static func deleteLine(_ name: ObjectStore.Key) -> [UInt8] { Array("-\t".utf8) + name.bytes + [0x0A] }

  /// A fresh log of exactly `generations`, written beside and renamed over the old one.
  static func write(folder: URL, bucket: String, generations: [ObjectStore.Key: Int64]) -> Bool {
    var out = Array((header + bucket + "\n").utf8)
    out.reserveCapacity(generations.count * 40)
    for (key, generation) in generations { out += putLine(key, generation: generation) }
    let tmp = folder.appendingPathComponent(fileName + ".new").path
    let fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o600)
    guard fd >= 0 else { return false }
    let written = out.withUnsafeBytes { writeAll(fd, $0) } && fsync(fd) == 0
    close(fd)
    guard written, rename(tmp, folder.appendingPathComponent(fileName).path) == 0 else {
      unlink(tmp)
      return false
    }
    return true
  }

  /// Appends `line` to the folder's log (opened once per bucket and kept).
  static func openForAppend(folder: URL) -> Int32 {
    open(folder.appendingPathComponent(fileName).path, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW)
  }
}
