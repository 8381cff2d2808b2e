// The HTTP transport: one thread owns a libcurl multi handle and every easy handle on it. Other
// threads hand it work through a locked queue and `curl_multi_wakeup`, so connections are reused
// across requests and many transfers run at once without a thread each.
internal import CCurl
import Foundation
import Synchronization

package final class HTTPClient: @unchecked Sendable {
  package static let shared = HTTPClient()

  /// The libcurl this process runs with (e.g. "8.14.1").
  package static var libraryVersion: String {
    // curl_version() is "libcurl/8.14.1 OpenSSL/3.0 …": its first word, without the prefix.
    guard let text = curl_version() else { return "unknown" }
    let first = String(cString: text).split(separator: " ").first ?? "unknown"
    return first.hasPrefix("libcurl/") ? String(first.dropFirst(8)) : String(first)
  }

  private let pending = Mutex<[HTTPTransfer]>([])
  // Owned by the transfer thread.
  private var multi: UnsafeMutableRawPointer?
  private var active: [UnsafeMutableRawPointer: (HTTPTransfer, UnsafeMutableRawPointer?)] = [:]
  private var idleEasy: [UnsafeMutableRawPointer] = []
  private let multiReady = DispatchSemaphore(value: 0)
  /// When the transfer loop last began a turn (DispatchTime nanoseconds): the loop turns at
  /// least every `idleTurn` even with nothing to do, so an older turn means it is stuck.
  private let lastTurn = Atomic<UInt64>(DispatchTime.now().uptimeNanoseconds)
  static let idleTurn = 250

  /// Seconds since the transfer loop last began a turn; above `idleTurn` it is held up.
  package var secondsSinceLastTurn: Double {
    let now = DispatchTime.now().uptimeNanoseconds
    let last = lastTurn.load(ordering: .relaxed)
    return now > last ? Double(now - last) / 1e9 : 0
  }

  package init() {
    curl_global_init(Int(CURL_GLOBAL_ALL))
    let thread = Thread { [unowned self] in self.run() }
    thread.name = "bucketfs-transfer"
    thread.stackSize = 1 << 20
    thread.start()
    multiReady.wait()
  }

  /// Starts a request whose response streams through `onHead` and `onData`.
  @discardableResult
  package func start(
    _ request: HTTPRequest, timeouts: TransportTimeouts = TransportTimeouts(),
    onHead: @escaping HTTPTransfer.HeadHandler = { _ in true },
    onData: @escaping HTTPTransfer.DataHandler,
    onComplete: @escaping HTTPTransfer.CompletionHandler
  ) -> HTTPTransfer {
    start(request, timeouts: timeouts, onHead: onHead, onFlow: { onData($0) ? .accept : .stop }, onComplete: onComplete)
  }

  /// Starts a request whose body goes to `onFlow`, which may pause the transfer.
  @discardableResult
  package func start(
    _ request: HTTPRequest, timeouts: TransportTimeouts = TransportTimeouts(),
    onHead: @escaping HTTPTransfer.HeadHandler = { _ in true },
    onFlow: @escaping HTTPTransfer.FlowHandler,
    onComplete: @escaping HTTPTransfer.CompletionHandler
  ) -> HTTPTransfer {
    let transfer = makeTransfer(request, timeouts: timeouts, onHead: onHead, onFlow: onFlow, onComplete: onComplete)
    enqueue(transfer)
    return transfer
  }

  private func makeTransfer(
    _ request: HTTPRequest, timeouts: TransportTimeouts, onHead: @escaping HTTPTransfer.HeadHandler,
    onFlow: @escaping HTTPTransfer.FlowHandler, onComplete: @escaping HTTPTransfer.CompletionHandler
  ) -> HTTPTransfer {
    let transfer = HTTPTransfer(
      request: request, timeouts: timeouts, onHead: onHead, onData: onFlow, onComplete: onComplete)
    transfer.client = self
    return transfer
  }

  private func enqueue(_ transfer: HTTPTransfer) {
    pending.withLock { $0.append(transfer) }
    wake()
  }

  /// Runs a request to completion, streaming the body through `onData`; cancelling the calling
  /// Swift task cancels the transfer.
  package func stream(
    _ request: HTTPRequest, timeouts: TransportTimeouts = TransportTimeouts(),
    onHead: @escaping HTTPTransfer.HeadHandler = { _ in true },
    onData: @escaping HTTPTransfer.DataHandler
  ) async throws(TransportError) -> HTTPResponseHead {
    try await stream(request, timeouts: timeouts, onHead: onHead, onFlow: { onData($0) ? .accept : .stop })
  }

  /// Runs a request to completion with a body handler that may pause the transfer; `started`
  /// gets the transfer, to resume it.
  package func stream(
    _ request: HTTPRequest, timeouts: TransportTimeouts = TransportTimeouts(),
    onHead: @escaping HTTPTransfer.HeadHandler = { _ in true },
    onFlow: @escaping HTTPTransfer.FlowHandler,
    started: @escaping @Sendable (HTTPTransfer) -> Void = { _ in }
  ) async throws(TransportError) -> HTTPResponseHead {
    let box = TransferBox()
    let result: Result<HTTPResponseHead, TransportError> = await withTaskCancellationHandler {
      await withCheckedContinuation { cont in
        let transfer = makeTransfer(
          request, timeouts: timeouts, onHead: onHead, onFlow: onFlow,
          onComplete: { cont.resume(returning: $0) })
        // Before the transfer can run: a handler that pauses it must find it attached wherever
        // it is resumed from (a resume before the attach would be lost, and the transfer
        // would wait for good).
        started(transfer)
        if box.set(transfer) { transfer.cancel() }
        enqueue(transfer)
      }
    } onCancel: {
      box.cancel()
    }
    return try result.get()
  }

  /// Sends a request and collects the body in memory, failing once it exceeds `maxBody` bytes.
  package func send(
    _ request: HTTPRequest, timeouts: TransportTimeouts = TransportTimeouts(), maxBody: Int = 64 << 20
  ) async throws(TransportError) -> HTTPResponse {
    let body = BodyCollector(limit: maxBody)
    let head: HTTPResponseHead
    do {
      head = try await stream(
        request, timeouts: timeouts,
        onHead: { head in
          // Refuse early when the server announces more than the caller will take.
          if (200..<300).contains(head.status), let length = head["content-length"].flatMap({ Int($0) }), length >= 0 {
            if length > maxBody {
              body.overflowed = true
              return false
            }
            // One allocation of the right size instead of doubling as chunks arrive.
            body.data.reserveCapacity(length)
          }
          return true
        },
        onData: { bytes in body.append(bytes) })
    } catch {
      if body.overflowed {
        throw TransportError(kind: .bodyTooLarge, message: "the response is larger than \(maxBody) bytes")
      }
      throw error
    }
    return HTTPResponse(head: head, body: body.data)
  }

  func wake() {
    if let multi { curl_multi_wakeup(multi) }
  }

  // MARK: the transfer thread

  private func run() {
    multi = curl_multi_init()
    _ = CCurlShims_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, 64)
    multiReady.signal()
    var running: Int32 = 0
    while true {
      lastTurn.store(DispatchTime.now().uptimeNanoseconds, ordering: .relaxed)
      let newTransfers = pending.withLock { queue -> [HTTPTransfer] in
        let taken = queue
        queue.removeAll()
        return taken
      }
      for transfer in newTransfers { add(transfer) }
      for (easy, entry) in active where entry.0.cancelled.load(ordering: .acquiring) {
        finish(easy: easy, code: CURLE_ABORTED_BY_CALLBACK)
      }
      // Stalls are timed here, to the poll interval, rather than by libcurl's low-speed check,
      // whose speed is averaged over several seconds: a burst followed by silence would keep a
      // caller waiting seconds past its stall timeout.
      let now = ContinuousClock.now
      for (easy, entry) in active {
        guard case .paused(let since) = entry.0.pause else { continue }
        // Paused for a slow consumer: not a stall.
        entry.0.lastProgress = now
        let pausedAt = since ?? now
        entry.0.pause = .paused(since: pausedAt)
        // A resume is asked for by whoever made room; one that was lost would leave the
        // transfer paused for good, so a pause also ends by itself after a second (the handler
        // is asked again, and pauses again if it still has no room).
        if entry.0.resumeRequested.exchange(false, ordering: .acquiringAndReleasing) || now - pausedAt > .seconds(1) {
          // Running first: unpausing may hand the kept bytes over at once, and pause again.
          entry.0.pause = .running
          curl_easy_pause(easy, CURLPAUSE_CONT)
        }
      }
      for (easy, entry) in active where now - entry.0.lastProgress > entry.0.timeouts.stall {
        entry.0.end(.stalled)
        finish(easy: easy, code: CURLE_OPERATION_TIMEDOUT)
      }
      curl_multi_perform(multi, &running)
      var remaining: Int32 = 0
      while let message = curl_multi_info_read(multi, &remaining) {
        if message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle {
          finish(easy: UnsafeMutableRawPointer(easy), code: message.pointee.data.result)
        }
      }
      var numfds: Int32 = 0
      curl_multi_poll(multi, nil, 0, Int32(active.isEmpty ? Self.idleTurn : 100), &numfds)
    }
  }

  private func add(_ transfer: HTTPTransfer) {
    if transfer.cancelled.load(ordering: .acquiring) {
      transfer.onComplete(.failure(TransportError(kind: .cancelled, message: "cancelled")))
      return
    }
    let easy = idleEasy.popLast() ?? curl_easy_init()!
    // Every option is checked: a refused one fails the request rather than sending it half set.
    var refused: (CURLcode, Int)? = nil
    func check(_ code: CURLcode, _ line: Int = #line) {
      if code != CURLE_OK && refused == nil { refused = (code, line) }
    }
    let request = transfer.request
    let userdata = Unmanaged.passUnretained(transfer).toOpaque()
    check(CCurlShims_setopt_string(easy, CURLOPT_URL, request.url))
    check(CCurlShims_setopt_long(easy, CURLOPT_NOSIGNAL, 1))
    check(CCurlShims_setopt_long(easy, CURLOPT_TCP_NODELAY, 1))
    check(CCurlShims_setopt_long(easy, CURLOPT_BUFFERSIZE, 256 * 1024))
    check(CCurlShims_setopt_long(
      easy, CURLOPT_CONNECTTIMEOUT_MS, Int(transfer.timeouts.connect.milliseconds)))
    transfer.lastProgress = .now
    if let caFile = request.caFile { check(CCurlShims_setopt_string(easy, CURLOPT_CAINFO, caFile)) }
    check(CCurlShims_setopt_ptr(easy, CURLOPT_HEADERDATA, userdata))
    check(CCurlShims_setopt_callback(easy, CURLOPT_HEADERFUNCTION, headerCallback))
    check(CCurlShims_setopt_ptr(easy, CURLOPT_WRITEDATA, userdata))
    check(CCurlShims_setopt_callback(easy, CURLOPT_WRITEFUNCTION, writeCallback))
    check(CCurlShims_setopt_ptr(easy, CURLOPT_PRIVATE, userdata))

    // A CR or LF in a header (a token, custom metadata) would end it early and start headers of
    // someone else's choosing: such a request is not sent. The value is not quoted: it may be a
    // credential.
    if let bad = request.headers.first(where: { !Self.isHeaderSafe($0.0, name: true) || !Self.isHeaderSafe($0.1, name: false) }) {
      transfer.bodyFile?.close()
      transfer.bodyFile = nil
      curl_easy_reset(easy)
      idleEasy.append(easy)
      transfer.onComplete(.failure(TransportError(
        kind: .local, message: "the \(Self.isHeaderSafe(bad.0, name: true) ? bad.0 : "a") header holds a control character (CR, LF or NUL); request not sent")))
      return
    }
    var list: UnsafeMutablePointer<curl_slist>? = nil
    for (name, value) in request.headers { list = curl_slist_append(list, "\(name): \(value)") }
    // A 100-continue round trip costs a full RTT per upload and some servers never answer it.
    list = curl_slist_append(list, "Expect:")

    switch request.method {
    case "GET":
      check(CCurlShims_setopt_long(easy, CURLOPT_HTTPGET, 1))
    case "HEAD":
      check(CCurlShims_setopt_long(easy, CURLOPT_NOBODY, 1))
    default:
      check(CCurlShims_setopt_long(easy, CURLOPT_UPLOAD, 1))
      check(CCurlShims_setopt_off(easy, CURLOPT_INFILESIZE_LARGE, Int(request.body.length)))
      check(CCurlShims_setopt_string(easy, CURLOPT_CUSTOMREQUEST, request.method))
      check(CCurlShims_setopt_ptr(easy, CURLOPT_READDATA, userdata))
      check(CCurlShims_setopt_callback(easy, CURLOPT_READFUNCTION, readCallback))
      if case .file(let path, let offset, let length) = request.body {
        transfer.bodyFile = UploadReader(path: path, offset: offset, length: length, transfer: transfer)
      }
    }
    check(CCurlShims_setopt_ptr(easy, CURLOPT_HTTPHEADER, UnsafeMutableRawPointer(list)))
    if let (code, line) = refused {
      curl_slist_free_all(list)
      transfer.bodyFile?.close()
      transfer.bodyFile = nil
      curl_easy_reset(easy)
      idleEasy.append(easy)
      let text = String(cString: curl_easy_strerror(code))
      transfer.onComplete(
        .failure(TransportError(kind: .local, curlCode: Int(code.rawValue), message: "libcurl refused an option (line \(line)): \(text)")))
      return
    }
    active[easy] = (transfer, UnsafeMutableRawPointer(list))
    _ = Unmanaged.passRetained(transfer)  // balanced in finish
    curl_multi_add_handle(multi, easy)
  }

  private func finish(easy: UnsafeMutableRawPointer, code: CURLcode) {
    guard let (transfer, list) = active.removeValue(forKey: easy) else { return }
    curl_multi_remove_handle(multi, easy)
    var status: Int = 0
    _ = CCurlShims_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
    if let list { curl_slist_free_all(list.assumingMemoryBound(to: curl_slist.self)) }
    transfer.bodyFile?.close()
    transfer.bodyFile = nil
    curl_easy_reset(easy)
    idleEasy.append(easy)
    Unmanaged.passUnretained(transfer).release()

    let result: Result<HTTPResponseHead, TransportError>
    if transfer.cancelled.load(ordering: .acquiring) || transfer.ending == .refusedByHandler {
      result = .failure(TransportError(kind: .cancelled, curlCode: Int(code.rawValue), message: "cancelled"))
    } else if transfer.ending == .stalled {
      let seconds = Double(transfer.timeouts.stall.milliseconds) / 1000
      result = .failure(TransportError(kind: .timedOut, curlCode: Int(code.rawValue), message: "no byte moved for \(seconds) s"))
    } else if case .localFailure(let local)? = transfer.ending {
      result = .failure(TransportError(kind: .local, message: local))
    } else if code == CURLE_OK {
      var head = transfer.head
      if head.status == 0 { head.status = status }
      // A response with an empty body never reached the write callback.
      if !transfer.headDelivered { _ = transfer.onHead(head) }
      result = .success(head)
    } else {
      result = .failure(Self.classify(code: code, url: transfer.request.url))
    }
    transfer.onComplete(result)
  }

  /// True when `text` can go in a header line as it is: no control character but a tab in a
  /// value; a name is a token (no spaces, no colon).
  static func isHeaderSafe(_ text: String, name: Bool) -> Bool {
    for byte in text.utf8 {
      if byte == 0x7F || (byte < 0x20 && (name || byte != 0x09)) { return false }
      if name && (byte == 0x20 || byte == UInt8(ascii: ":")) { return false }
    }
    return !(name && text.isEmpty)
  }

  static func classify(code: CURLcode, url: String) -> TransportError {
    let text = String(cString: curl_easy_strerror(code))
    let kind: TransportError.Kind
    switch code {
    case CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY:
      kind = .unreachable
    case CURLE_OPERATION_TIMEDOUT:
      kind = .timedOut
    case CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CONNECT_ERROR:
      kind = .certificate
    // SEND_FAIL_REWIND: a kept connection died under a request with a body, and libcurl cannot
    // send that body again by itself; the caller's retry sends it anew.
    case CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_PARTIAL_FILE, CURLE_GOT_NOTHING, CURLE_SEND_FAIL_REWIND:
      kind = .connectionLost
    case CURLE_WRITE_ERROR, CURLE_READ_ERROR:
      kind = .local
    default:
      kind = .other
    }
    return TransportError(kind: kind, curlCode: Int(code.rawValue), message: text)
  }
}

extension Duration {
  var milliseconds: Int64 {
    let (seconds, attoseconds) = components
    return seconds * 1000 + attoseconds / 1_000_000_000_000_000
  }
}

/// Hands a transfer to a cancellation handler that may run before the transfer exists.
final class TransferBox: @unchecked Sendable {
  private let lock = Mutex<(HTTPTransfer?, Bool)>((nil, false))
  /// Stores the transfer; returns true when cancellation already happened.
  func set(_ transfer: HTTPTransfer) -> Bool {
    lock.withLock { $0.0 = transfer; return $0.1 }
  }
  func cancel() {
    let transfer = lock.withLock { s -> HTTPTransfer? in s.1 = true; return s.0 }
    transfer?.cancel()
  }
}

/// Collects a response body up to a limit; touched only from the transfer thread until completion.
final class BodyCollector: @unchecked Sendable {
  var data = Data()
  var overflowed = false
  let limit: Int
  init(limit: Int) { self.limit = limit }
  func append(_ bytes: UnsafeRawBufferPointer) -> Bool {
    if data.count + bytes.count > limit {
      overflowed = true
      return false
    }
    data.append(contentsOf: bytes)
    return true
  }
}

// MARK: libcurl callbacks (C function pointers: they capture nothing and find their transfer
// through the userdata pointer, which stays valid while the handle is active because `add`
// retains the transfer until `finish`).

private let headerCallback: CCurlShims_data_callback = { ptr, size, count, userdata in
  let transfer = Unmanaged<HTTPTransfer>.fromOpaque(userdata!).takeUnretainedValue()
  let length = size * count
  transfer.lastProgress = .now
  // Trim ASCII whitespace by hand: Foundation's trimming is slow on this hot path.
  var raw = UnsafeRawBufferPointer(start: ptr, count: length)[...]
  while let last = raw.last, last == 10 || last == 13 || last == 32 || last == 9 { raw = raw.dropLast() }
  while let first = raw.first, first == 32 || first == 9 { raw = raw.dropFirst() }
  let line = String(decoding: raw, as: UTF8.self)
  if line.hasPrefix("HTTP/") {
    // A new status line (after a 100 Continue or a redirect) starts a new head.
    let parts = line.split(separator: " ", maxSplits: 2)
    transfer.statusLine = parts.count > 1 ? Int(parts[1]) ?? 0 : 0
    transfer.headerLines = [:]
  } else if let colon = line.firstIndex(of: ":") {
    let name = line[..<colon].lowercased()
    var value = line[line.index(after: colon)...]
    while value.first == " " || value.first == "\t" { value = value.dropFirst() }
    // A header sent twice (GCS sends x-goog-hash once for crc32c and once for md5) keeps both
    // values, joined as HTTP joins repeated fields.
    if let existing = transfer.headerLines[name] {
      transfer.headerLines[name] = existing + ", " + value
    } else {
      transfer.headerLines[name] = String(value)
    }
  }
  return length
}

private let writeCallback: CCurlShims_data_callback = { ptr, size, count, userdata in
  let transfer = Unmanaged<HTTPTransfer>.fromOpaque(userdata!).takeUnretainedValue()
  let length = size * count
  transfer.lastProgress = .now
  if transfer.cancelled.load(ordering: .relaxed) { return 0 }
  if !transfer.headDelivered {
    transfer.headDelivered = true
    if !transfer.onHead(transfer.head) {
      transfer.end(.refusedByHandler)
      return 0
    }
  }
  switch transfer.onData(UnsafeRawBufferPointer(start: ptr, count: length)) {
  case .accept:
    return length
  case .stop:
    transfer.end(.refusedByHandler)
    return 0
  case .pause:
    transfer.pause = .paused(since: nil)
    return Int(CURL_WRITEFUNC_PAUSE)
  }
}

private let readCallback: CCurlShims_data_callback = { ptr, size, count, userdata in
  let transfer = Unmanaged<HTTPTransfer>.fromOpaque(userdata!).takeUnretainedValue()
  if transfer.cancelled.load(ordering: .relaxed) { return CCurlShims_readfunc_abort() }
  let capacity = size * count
  transfer.lastProgress = .now
  let body = transfer.request.body
  let remaining = Int(body.length - transfer.bodyOffset)
  let n = min(capacity, remaining)
  if n <= 0 { return 0 }
  switch body {
  case .none:
    return 0
  case .data(let data):
    let start = Int(transfer.bodyOffset)
    data.withUnsafeBytes { raw in
      UnsafeMutableRawPointer(ptr!).copyMemory(from: raw.baseAddress! + start, byteCount: n)
    }
  case .file:
    guard let reader = transfer.bodyFile else { return CCurlShims_readfunc_abort() }
    switch reader.take(into: ptr!, capacity: n, sent: transfer.bodyOffset) {
    case .bytes(let got):
      transfer.bodyOffset += Int64(got)
      transfer.request.onBodySent?(transfer.bodyOffset)
      return got
    case .pause:
      transfer.pause = .paused(since: nil)
      return CCurlShims_readfunc_pause()
    case .failed(let message):
      transfer.end(.localFailure(message))
      return CCurlShims_readfunc_abort()
    }
  }
  transfer.bodyOffset += Int64(n)
  transfer.request.onBodySent?(transfer.bodyOffset)
  return n
}
