import Foundation

/// Serves the requests of one keep-alive connection in order.
struct HTTPConnection {
  let fd: Int32
  let server: HTTPServer
  static let maxHeaderBytes = 64 * 1024

  func serve() {
    let reader = SocketReader(fd: fd)
    let limits = server.limits
    reader.stallTimeout = limits.stallTimeout
    while !server.isStopped {
      // Waiting for the next request: the connection is idle, and may be closed to make room.
      server.connections.setIdle(fd, true)
      reader.deadline = .now + limits.idleTimeout
      let first = reader.line(limit: 16 * 1024)
      server.connections.setIdle(fd, false)
      let requestLine: String
      switch first {
      case .success(let line): requestLine = line
      case .failure(.tooLong):
        send(.error(400, "malformed request line"), close: true)
        return
      case .failure(.ended):
        // Bytes that never became a request line get an answer before the close.
        if reader.buffered > 0 { send(.error(400, "malformed request"), close: true) }
        return
      }
      if requestLine.isEmpty { continue }
      reader.deadline = .now + limits.headerTimeout
      let parts = requestLine.split(separator: " ", omittingEmptySubsequences: false)
      guard parts.count == 3, parts[2].hasPrefix("HTTP/1."), !parts[0].isEmpty,
        parts[0].allSatisfy({ $0.isUppercase }), parts[1].hasPrefix("/")
      else {
        send(.error(400, "malformed request line"), close: true)
        return
      }
      var headers: [String: String] = [:]
      var headerBytes = 0
      while true {
        let line: String
        switch reader.line(limit: Self.maxHeaderBytes) {
        case .success(let l): line = l
        case .failure(.tooLong):
          send(.error(431, "request headers too large"), close: true)
          return
        case .failure(.ended):
          // The peer stopped before the end of the headers (or took too long): answer, then close.
          send(reader.timedOut ? .error(408, "the request headers did not arrive in time") : .error(400, "incomplete request headers"), close: true)
          return
        }
        if line.isEmpty { break }
        headerBytes += line.utf8.count
        if headerBytes > Self.maxHeaderBytes {
          send(.error(431, "request headers too large"), close: true)
          return
        }
        guard let colon = line.firstIndex(of: ":") else {
          send(.error(400, "malformed header line"), close: true)
          return
        }
        let name = line[..<colon].trimmingCharacters(in: .whitespaces).lowercased()
        let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        headers[name] = headers[name].map { $0 + ", " + value } ?? value
      }
      reader.deadline = nil
      let target = String(parts[1])
      let keepAlive = parts[2] == "HTTP/1.1" ? headers["connection"]?.lowercased() != "close"
        : headers["connection"]?.lowercased() == "keep-alive"
      let chunked = headers["transfer-encoding"]?.lowercased().contains("chunked") ?? false
      var contentLength: Int64? = nil
      if let text = headers["content-length"] {
        guard let n = Int64(text), n >= 0, n <= RequestBody.largestBody else {
          send(.error(400, "bad Content-Length"), close: true)
          return
        }
        contentLength = n
      }
      let (path, queryText) = splitTarget(target)
      guard let query = parseQuery(queryText) else {
        send(.error(400, "bad percent-encoding in the query"), close: true)
        return
      }
      let body = RequestBody(reader: reader, contentLength: contentLength, chunked: chunked)
      let faultChanges = server.faultChanges
      let plan = server.faultPlan(path: target)
      if let plan, plan.hold { server.hold(since: faultChanges) }
      if let plan, plan.latency > .zero { Thread.sleep(forTimeInterval: plan.latency.seconds) }
      if let plan, plan.errorFraction > 0 {
        try? body.discard()
        var response = ServerResponse.error(plan.errorStatus, "injected fault")
        if let retry = plan.retryAfter { response.headers.append(("Retry-After", String(retry))) }
        if !send(response, close: !keepAlive) || !keepAlive { return }
        continue
      }
      var uploadCut = false
      if let plan, let cut = plan.resetAfterBytes, contentLength ?? (chunked ? 1 : 0) > 0 {
        body.onBytes = { consumed in
          if consumed >= cut { uploadCut = true }
          return consumed < cut
        }
      }
      if server.ignoresRange { headers.removeValue(forKey: "range") }
      var request = ServerRequest(method: String(parts[0]), rawPath: path, query: query, headers: headers, body: body)
      let response = server.handle(&request)
      server.bodyBytesReceived.add(Int(body.consumed), ordering: .relaxed)
      if server.losesAnswer(target: target) {
        try? body.discard()
        reset()
        return
      }
      if uploadCut {
        server.noteInjected()
        reset()
        return
      }
      // A refused request's unread body is not waited for (it may never come: a chunk of an
      // absurd size, a length the bytes sent fall short of): the answer goes at once and the
      // connection closes, as Google's does.
      let refusedUnread = !body.isComplete && response.status >= 400
      let bodyOK: Bool
      if refusedUnread {
        bodyOK = false
      } else {
        do {
          try body.discard()
          bodyOK = true
        } catch {
          bodyOK = false
        }
      }
      let isDownload = path.contains("/o") && query["alt"] == "media"
      let ok = send(response, close: !keepAlive || !bodyOK, plan: isDownload ? plan : nil)
      if ok && refusedUnread { linger(reader) }
      if !ok || !keepAlive || !bodyOK { return }
    }
  }

  private func splitTarget(_ target: String) -> (String, String) {
    guard let q = target.firstIndex(of: "?") else { return (target, "") }
    return (String(target[..<q]), String(target[target.index(after: q)...]))
  }

  /// Form-decoded query (`+` is a space); nil on bad percent-encoding.
  private func parseQuery(_ text: String) -> [String: String]? {
    var out: [String: String] = [:]
    for pair in text.split(separator: "&") {
      let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
      let rawKey = String(kv[0]).replacingOccurrences(of: "+", with: " ")
      let rawValue = kv.count > 1 ? String(kv[1]).replacingOccurrences(of: "+", with: " ") : ""
      guard let key = rawKey.exactPercentDecoded, let value = rawValue.exactPercentDecoded else {
        return nil
      }
      out[key] = value
    }
    return out
  }

  /// After a refusal sent before the request's body was read: the answer ends (FIN), and what
  /// the client still sends is read and dropped for a moment, so that the close does not reset
  /// the connection under an answer the client has not read yet (as nginx's lingering close).
  private func linger(_ reader: SocketReader) {
    shutdown(fd, Int32(SHUT_WR))
    reader.deadline = .now + Self.lingerTime
    while !reader.read(max: 1 << 20).isEmpty {}
  }

  static let lingerTime: Duration = .seconds(2)

  /// Closes with a TCP reset rather than a clean FIN.
  private func reset() {
    var linger = Foundation.linger(l_onoff: 1, l_linger: 0)
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Foundation.linger>.size))
    shutdown(fd, Int32(SHUT_RDWR))
  }

  /// Writes the response; false when the connection must end.
  @discardableResult
  private func send(_ response: ServerResponse, close: Bool, plan: Faults? = nil) -> Bool {
    var head = "HTTP/1.1 \(response.status) \(ServerResponse.reason(response.status))\r\n"
    var length: Int64 = 0
    switch response.body {
    case .none: length = 0
    case .data(let d): length = Int64(d.count)
    case .file(_, _, let n): length = n
    case .chunked: length = -1
    }
    for (name, value) in response.headers { head += "\(name): \(value)\r\n" }
    head += length < 0 ? "Transfer-Encoding: chunked\r\n" : "Content-Length: \(length)\r\n"
    if close { head += "Connection: close\r\n" }
    head += "\r\n"
    guard writeAll(Data(head.utf8)) else {
      if case .file(let fd, _, _) = response.body { Foundation.close(fd) }
      return false
    }
    let limit = plan?.resetAfterBytes ?? plan?.stallAfterBytes
    switch response.body {
    case .none:
      break
    case .chunked(let d):
      var framed = Data()
      if !d.isEmpty { framed += Data((String(d.count, radix: 16) + "\r\n").utf8) + d + Data("\r\n".utf8) }
      framed += Data("0\r\n\r\n".utf8)
      if let limit, limit < d.count {
        _ = writeAll(framed.prefix(Int(limit)))
        return cut(plan!)
      }
      guard writeAll(framed) else { return false }
      server.bodyBytesSent.add(d.count, ordering: .relaxed)
    case .data(let d):
      if let limit, limit < d.count {
        _ = writeAll(d.prefix(Int(limit)))
        return cut(plan!)
      }
      guard writeAll(d) else { return false }
      server.bodyBytesSent.add(d.count, ordering: .relaxed)
    case .file(let file, let offset, let n):
      defer { Foundation.close(file) }
      var sent: Int64 = 0
      var position = off_t(offset)
      let toSend = limit.map { min($0, n) } ?? n
      while sent < toSend {
        let chunk = Int(min(toSend - sent, 4 << 20))
        let w = sendfile(fd, file, &position, chunk)
        if w < 0 {
          if errno == EINTR { continue }
          // EAGAIN: the send timeout passed without the client taking any bytes.
          return false
        }
        if w == 0 { return false }
        sent += Int64(w)
        server.bodyBytesSent.add(w, ordering: .relaxed)
      }
      if limit != nil && toSend < n { return cut(plan!) }
    }
    return !close
  }

  private func cut(_ plan: Faults) -> Bool {
    server.noteInjected()
    if plan.stallAfterBytes != nil {
      // Hold the connection without sending until the client gives up or the server stops.
      while !server.isStopped {
        var byte: UInt8 = 0
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        if poll(&pfd, 1, 200) > 0 {
          if recv(fd, &byte, 1, Int32(MSG_PEEK)) <= 0 { break }
          Thread.sleep(forTimeInterval: 0.2)
        }
      }
    } else {
      reset()
    }
    return false
  }

  private func writeAll(_ data: Data) -> Bool {
    data.withUnsafeBytes { raw in
      var done = 0
      while done < raw.count {
        let n = Foundation.send(fd, raw.baseAddress! + done, raw.count - done, Int32(MSG_NOSIGNAL))
        if n < 0 {
          if errno == EINTR { continue }
          return false
        }
        done += n
      }
      return true
    }
  }
}

extension Duration {
  var seconds: Double {
    let (s, atto) = components
    return Double(s) + Double(atto) / 1e18
  }
}
