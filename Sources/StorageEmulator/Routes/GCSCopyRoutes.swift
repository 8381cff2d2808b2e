// Server-side copies: `copyTo` in one call; `rewriteTo` in as many calls as
// `maxBytesRewrittenPerCall` asks for, each answering a `rewriteToken` that the next call
// presents (GCS may split any rewrite so, and clients must loop until `done`); and `compose`.
import Foundation

extension GCSRoutes {
  /// What a rewrite in progress has done, carried by its token (GCS's is opaque too).
  private struct RewriteProgress: Codable {
    var bucket: String
    var source: String
    var generation: Int64
    var target: String
    var targetBucket: String
    var rewritten: Int64

    var token: String { (try? JSONEncoder().encode(self))?.base64EncodedString() ?? "" }

    init?(token: String) {
      guard let data = Data(base64Encoded: token), let me = try? JSONDecoder().decode(Self.self, from: data) else { return nil }
      self = me
    }

    init(_ route: GCSRoute.Copy, generation: Int64, rewritten: Int64) {
      (bucket, source, targetBucket, target, self.generation, self.rewritten) =
        (route.bucket, route.source, route.targetBucket, route.target, generation, rewritten)
    }
  }

  /// `sourceGeneration` names the version to copy (only the live one is kept here),
  /// `ifSource*` are checked against it, the other preconditions against the target; the JSON
  /// body overrides the copied metadata.
  func copy(_ route: GCSRoute.Copy, request: inout ServerRequest) -> ServerResponse {
    guard let source = store.get(route.bucket, route.source), request.query["sourceGeneration"].map({ Int64($0) == source.generation }) ?? true
    else { return Self.error(404, "notFound", "No such object: \(route.bucket)/\(route.source)") }
    var sourceQuery: [String: String] = [:]
    for (key, value) in request.query where key.hasPrefix("ifSource") {
      sourceQuery["if" + key.dropFirst("ifSource".count)] = value
    }
    if let failed = preconditionFailure(source, sourceQuery) { return failed }
    if let failed = preconditionFailure(store.get(route.targetBucket, route.target), request.query) { return failed }
    if let problem = ObjectStore.nameProblem(route.target) { return Self.error(400, "invalid", problem) }
    guard let json = request.jsonObjectBody() else { return Self.error(400, "invalid", "the body must be a JSON object") }
    if route.rewrite, let step = request.query["maxBytesRewrittenPerCall"] {
      guard let perCall = Int64(step), perCall > 0, perCall % (1 << 20) == 0 else {
        return Self.error(400, "invalid", "maxBytesRewrittenPerCall must be a positive multiple of 1048576")
      }
      var progress = RewriteProgress(route, generation: source.generation, rewritten: 0)
      if let token = request.query["rewriteToken"] {
        guard let earlier = RewriteProgress(token: token), earlier.bucket == route.bucket, earlier.source == route.source,
          earlier.targetBucket == route.targetBucket, earlier.target == route.target
        else { return Self.error(400, "invalid", "The rewrite token is not valid for this rewrite") }
        // The source changed since the rewrite began: GCS gives up on it the same way.
        guard earlier.generation == source.generation else {
          return Self.error(404, "notFound", "No such object: \(route.bucket)/\(route.source)#\(earlier.generation)")
        }
        progress = earlier
      }
      progress.rewritten = min(source.size, progress.rewritten + perCall)
      if progress.rewritten < source.size {
        return .json(200, [
          "kind": "storage#rewriteResponse", "totalBytesRewritten": String(progress.rewritten), "objectSize": String(source.size),
          "done": false, "rewriteToken": progress.token,
        ])
      }
    }
    let record: ObjectRecord
    do {
      record = try store.copy(source, bucket: route.targetBucket, name: route.target, metadata: json)
    } catch ObjectStore.Refusal.invalidName(let why) {
      return Self.error(400, "invalid", why)
    } catch {
      return Self.error(500, "internalError", "cannot store the copy")
    }
    let resource = record.gcsResource(base: request.publicBase)
    guard route.rewrite else { return .json(200, resource) }
    return .json(200, [
      "kind": "storage#rewriteResponse", "totalBytesRewritten": String(record.size), "objectSize": String(record.size), "done": true,
      "resource": resource,
    ])
  }

  /// `{"sourceObjects": [{"name", "generation", "objectPreconditions": {"ifGenerationMatch"}}],
  /// "destination": {…}}`: 1 to 32 objects of the same bucket, in order.
  func compose(bucket: String, name: String, request: inout ServerRequest) -> ServerResponse {
    guard let body = try? request.body.readAll(limit: 1 << 20),
      let json = try? ExactText.jsonObject(with: body) as? [String: Any],
      let list = json["sourceObjects"] as? [[String: Any]]
    else { return Self.error(400, "required", "Required field sourceObjects is missing") }
    guard (1...32).contains(list.count) else {
      return Self.error(400, "invalid", "The number of source components provided (\(list.count)) must be between 1 and 32")
    }
    var sources: [ObjectRecord] = []
    for item in list {
      guard let sourceName = item["name"] as? String else { return Self.error(400, "required", "Required field sourceObjects.name is missing") }
      let wanted = Self.int64(item["generation"])
      guard let source = store.get(bucket, sourceName), wanted.map({ $0 == source.generation }) ?? true else {
        return Self.error(404, "notFound", "No such object: \(bucket)/\(sourceName)")
      }
      if let conditions = item["objectPreconditions"] as? [String: Any], let match = conditions["ifGenerationMatch"] {
        if Self.int64(match) != source.generation {
          return Self.error(412, "conditionNotMet", "At least one of the pre-conditions you specified did not hold (ifGenerationMatch).")
        }
      }
      sources.append(source)
    }
    let components = sources.reduce(0) { $0 + ($1.componentCount ?? 1) }
    guard components <= 1024 else {
      return Self.error(400, "invalid", "The number of components in the composite object (\(components)) would exceed 1024")
    }
    if let failed = preconditionFailure(store.get(bucket, name), request.query) { return failed }
    if let problem = ObjectStore.nameProblem(name) { return Self.error(400, "invalid", problem) }
    var destination = json["destination"] as? [String: Any] ?? [:]
    destination.removeValue(forKey: "name")
    destination.removeValue(forKey: "bucket")
    do {
      let record = try store.compose(sources, componentCount: components, bucket: bucket, name: name, metadata: destination)
      return .json(200, record.gcsResource(base: request.publicBase))
    } catch {
      return Self.error(500, "internalError", "cannot store the composed object")
    }
  }

  /// A JSON int64 as the API writes it (a string) or as a client may (a number).
  private static func int64(_ value: Any?) -> Int64? {
    (value as? String).flatMap { Int64($0) } ?? (value as? NSNumber)?.int64Value
  }
}

extension GCSRoutes {
  /// `objects.move`: the source renamed to the target in one step (no copy of its bytes), with
  /// `ifSource*` checked against the source and the other preconditions against the target
  /// (`ifGenerationMatch=0`: the target must not exist), at the moment of the move. 404 for a
  /// missing source, 412 for a precondition that does not hold; the answer is the moved object.
  func move(bucket: String, source: String, target: String, request: inout ServerRequest) -> ServerResponse {
    guard request.method == "POST" else { return Self.error(405, "invalid", "method not allowed") }
    // Names are bytes: two spellings `String` takes for one (NFC and NFD) are two objects.
    guard Array(source.utf8) != Array(target.utf8) else { return Self.error(400, "invalid", "The source and destination object names must be different.") }
    if let problem = ObjectStore.nameProblem(target) { return Self.error(400, "invalid", problem) }
    var sourceQuery: [String: String] = [:]
    var targetQuery: [String: String] = [:]
    for (key, value) in request.query where key.hasPrefix("if") {
      guard Int64(value) != nil else { return Self.error(400, "invalid", "Invalid value for \(key): \(value)") }
      if key.hasPrefix("ifSource") {
        sourceQuery["if" + key.dropFirst("ifSource".count)] = value
      } else {
        targetQuery[key] = value
      }
    }
    let outcome = store.move(bucket: bucket, source: source, target: target) { from, existing in
      PreconditionCheck.failure(from, sourceQuery) { "ifSource" + $0.dropFirst(2) } ?? preconditionFailure(existing, targetQuery)
    }
    switch outcome {
    case .moved(let record): return .json(200, record.gcsResource(base: request.publicBase))
    case .noSource: return Self.error(404, "notFound", "No such object: \(bucket)/\(source)")
    case .refused(let answer): return answer
    case .failed: return Self.error(500, "internalError", "cannot move the object")
    }
  }
}
