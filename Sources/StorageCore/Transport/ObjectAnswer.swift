import Foundation

/// What every download's sink (a download task's file, a ranged read, a stream) knows of an
/// attempt's answer before its bytes count as the object's: the status, the generation it serves
/// (another than the one the bytes so far came from stops the transfer), and, for an error
/// answer, the start of its body: up to 4 KiB, enough for the server's message.
struct ObjectAnswer {
  static let errorBodyLimit = 4096

  private(set) var status = 0
  /// The generation served when none was expected.
  private(set) var served: Int64?
  /// Set when the answer served another generation than expected.
  private(set) var changedTo: Int64?
  private(set) var errorBody = Data()

  var isSuccess: Bool { (200..<300).contains(status) }

  /// A new attempt's head; false (stop the transfer) when it serves another generation than
  /// `expected`.
  mutating func begin(_ head: HTTPResponseHead, expected: Int64?) -> Bool {
    status = head.status
    errorBody = Data()
    guard isSuccess else { return true }
    if let expected, let generation = head.generation, generation != expected {
      changedTo = generation
      return false
    }
    served = head.generation
    return true
  }

  /// Takes `bytes` of an error answer (kept up to the limit): true when the answer is one, and
  /// the bytes are not the object's.
  mutating func keepIfError(_ bytes: UnsafeRawBufferPointer) -> Bool {
    guard !isSuccess else { return false }
    errorBody.append(contentsOf: bytes.prefix(Self.errorBodyLimit - min(Self.errorBodyLimit, errorBody.count)))
    return true
  }
}
