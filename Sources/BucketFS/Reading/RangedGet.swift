// The one way BucketFS fetches an object's bytes: a ranged GET of one version into a sink (the
// block cache's pages, a staged copy's blocks, an edit's file). A GET that ends before the range
// does is one error everywhere: fewer bytes than the object has there would reach a reader as an
// early end of file.
import Foundation
import StorageCore

enum RangedGet {
  /// Bytes `range` of `generation` handed to `deliver` in order (on the transfer thread: it must
  /// not wait; `.pause` until `valve` opens); throws when fewer arrive.
  static func run(
    _ client: any ObjectClient, _ name: String, range: Range<Int64>, generation: Int64, valve: DeliveryValve? = nil,
    into deliver: @escaping @Sendable (UnsafeRawBufferPointer, Int64) -> HTTPTransfer.Flow
  ) async throws(BucketError) {
    let count = try await client.read(name, range: range, generation: generation, valve: valve, into: deliver)
    guard count == Int64(range.count) else { throw shortRead(client, name, count, of: range) }
  }

  /// Bytes `range` of `generation` in memory.
  static func data(_ client: any ObjectClient, _ name: String, range: Range<Int64>, generation: Int64) async throws(BucketError) -> Data {
    let buffer = Gathered(capacity: Int(range.count))
    try await run(client, name, range: range, generation: generation) { chunk, _ in
      buffer.append(chunk)
      return .accept
    }
    return buffer.data
  }

  static func shortRead(_ client: any ObjectClient, _ name: String, _ count: Int64, of range: Range<Int64>) -> BucketError {
    BucketError(
      code: .unknown, object: "gs://\(client.bucket)/\(name)", detail: "short read: \(count) of \(range.count) bytes at \(range.lowerBound)")
  }

  /// Bytes as one GET delivers them: touched by its transfer callbacks, then by the task that
  /// awaited it.
  private final class Gathered: @unchecked Sendable {
    var data: Data
    init(capacity: Int) { data = Data(capacity: capacity) }
    func append(_ chunk: UnsafeRawBufferPointer) { data.append(contentsOf: chunk) }
  }
}
