import Foundation

/// Where every download's bytes pass (a download task's file, a ranged read, a stream), across
/// the attempts of one transfer: each attempt's answer is checked (`ObjectAnswer`), the
/// generation the first answer served is pinned, and the wanted bytes are handed on once each
/// with their offset in the object, whatever a server sends around them: a 200 with the whole
/// object to a ranged or resumed request, or bytes past the range's end. Touched by the transfer
/// thread during an attempt and by the caller between attempts.
final class ObjectSink: @unchecked Sendable {
  /// What a whole object (a 200) in answer to a request for later bytes means to the consumer.
  enum WholeAnswer {
    /// The bytes before the ones wanted are skipped.
    case skipToWanted
    /// The consumer takes the object again from its first byte (a download task's file, which
    /// starts over rather than trust bytes an answer without a range may not match); for a
    /// sink of the whole object only.
    case startOver
  }

  private let start: Int64
  private let end: Int64?
  private let onWhole: WholeAnswer
  private let deliver: @Sendable (UnsafeRawBufferPointer, Int64) -> HTTPTransfer.Flow
  private(set) var answer = ObjectAnswer()
  /// The generation the first answer served; later attempts ask for it.
  private(set) var generation: Int64?
  /// Bytes handed on, from `start`.
  private(set) var received: Int64
  /// The object's size, from the answer.
  private(set) var total: Int64?
  /// Set when `deliver` asked to stop.
  private(set) var refused = false
  /// How far past `end` the answer went, when it did (a server that ignored the range, or an
  /// object larger than a limit).
  private(set) var overran: Int64?
  /// Set by an attempt whose answer started the object over (`WholeAnswer.startOver`).
  private(set) var restarted = false
  private var skip: Int64 = 0

  /// Bytes `start..<end` (nil: to the object's end), of which `received` were handed on before.
  init(
    start: Int64 = 0, end: Int64? = nil, received: Int64 = 0, onWhole: WholeAnswer = .skipToWanted,
    deliver: @escaping @Sendable (UnsafeRawBufferPointer, Int64) -> HTTPTransfer.Flow
  ) {
    precondition(onWhole == .skipToWanted || start == 0, "only a whole object starts over")
    self.start = start
    self.end = end
    self.received = received
    self.onWhole = onWhole
    self.deliver = deliver
  }

  /// The first byte the next attempt asks for.
  var next: Int64 { start + received }
  var isComplete: Bool { end.map { next >= $0 } ?? false }

  /// An attempt's head; false stops the transfer (another generation than `expected`, or the
  /// one pinned).
  func begin(_ head: HTTPResponseHead, expected: Int64?) -> Bool {
    guard answer.begin(head, expected: expected ?? generation) else { return false }
    guard answer.isSuccess else { return true }
    if generation == nil { generation = answer.served }
    if head["content-range"] != nil || head.status == 200 { total = head.objectSize }
    restarted = false
    skip = 0
    if head.status == 200 && next > 0 {
      switch onWhole {
      case .skipToWanted:
        skip = next
      case .startOver:
        received = 0
        restarted = true
      }
    }
    return true
  }

  func take(_ bytes: UnsafeRawBufferPointer) -> HTTPTransfer.Flow {
    if answer.keepIfError(bytes) { return .accept }
    // Nothing is counted until the bytes are taken: a paused chunk comes again, whole.
    let skipped = Int(min(skip, Int64(bytes.count)))
    let chunk = UnsafeRawBufferPointer(rebasing: bytes[skipped...])
    let wanted = end.map { min(chunk.count, Int(max(0, $0 - next))) } ?? chunk.count
    if wanted > 0 {
      switch deliver(UnsafeRawBufferPointer(rebasing: chunk[..<wanted]), next) {
      case .accept:
        received += Int64(wanted)
      case .pause:
        return .pause
      case .stop:
        refused = true
        return .stop
      }
    }
    skip -= Int64(skipped)
    // Past the end: the range's own last bytes are taken, and the rest is not read.
    if chunk.count > wanted {
      overran = next + Int64(chunk.count - wanted)
      return .stop
    }
    return .accept
  }
}

/// What every download's sink knows of one attempt's answer before its bytes count as the
/// object's: the status, the generation it serves (another than the one the bytes so far came
/// from stops the transfer), and, for an error answer, the start of its body: up to 4 KiB,
/// enough for the server's message.
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
