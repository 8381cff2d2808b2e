// Memory for reads answered from staged copies. A fresh buffer per read costs a page fault per
// 4 KiB (the allocator maps and unmaps buffers this large), which made such reads slower than
// the copy itself: buffers come from a small pool and go back when the reply is sent.
import Foundation
import Synchronization

package final class ReadBuffer: @unchecked Sendable {
  /// The largest read the kernel sends (1 MiB) plus a checksum block on either side.
  static let capacity = (1 << 20) + 2 * BlockChecksums.blockSize
  /// Pooled memory: owned by the pool while in it, by one buffer while out.
  private struct Memory: @unchecked Sendable { let bytes: UnsafeMutableRawBufferPointer }
  private static let pool = Mutex<[Memory]>([])
  private static let pooled = 16

  let memory: UnsafeMutableRawBufferPointer
  /// The bytes of the answer within `memory`.
  package let range: Range<Int>

  private init(memory: UnsafeMutableRawBufferPointer, range: Range<Int>) {
    self.memory = memory
    self.range = range
  }

  /// Fills a buffer of `count` bytes with `fill` (false: nothing to answer with) and keeps
  /// `answer` of them.
  static func filled(
    count: Int, answer: Range<Int>, _ fill: (UnsafeMutableRawBufferPointer) -> Bool
  ) -> ReadBuffer? {
    let memory = count <= capacity
      ? pool.withLock { $0.popLast() }?.bytes ?? .allocate(byteCount: capacity, alignment: 4096)
      : .allocate(byteCount: count, alignment: 4096)
    guard fill(UnsafeMutableRawBufferPointer(rebasing: memory[..<count])) else {
      giveBack(memory)
      return nil
    }
    return ReadBuffer(memory: memory, range: answer)
  }

  private static func giveBack(_ memory: UnsafeMutableRawBufferPointer) {
    let kept = memory.count == capacity && pool.withLock { p -> Bool in
      guard p.count < pooled else { return false }
      p.append(Memory(bytes: memory))
      return true
    }
    if !kept { memory.deallocate() }
  }

  deinit { Self.giveBack(memory) }

  package var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: memory[range]) }
}
