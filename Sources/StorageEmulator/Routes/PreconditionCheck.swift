/// ifGenerationMatch / ifGenerationNotMatch / ifMetagenerationMatch / ifMetagenerationNotMatch,
/// checked against the current object (a missing object has generation 0) on both APIs.
enum PreconditionCheck {
  /// Checks ifGenerationMatch / ifGenerationNotMatch / ifMetagenerationMatch / ifMetagenerationNotMatch
  /// against the current object (nil when it does not exist: generation 0). `named`: how the
  /// answer names a parameter (a move's source conditions are `ifSource…`).
  static func failure(_ record: ObjectRecord?, _ query: [String: String], named: (String) -> String = { $0 }) -> ServerResponse? {
    let generation = record?.generation ?? 0
    let metageneration = record?.metageneration ?? 0
    if let v = query["ifGenerationMatch"] {
      guard let g = Int64(v) else { return GCSRoutes.error(400, "invalid", "bad ifGenerationMatch") }
      if g != generation { return failed(named("ifGenerationMatch")) }
    }
    if let v = query["ifGenerationNotMatch"], Int64(v) == generation { return failed(named("ifGenerationNotMatch")) }
    if let v = query["ifMetagenerationMatch"] {
      guard let m = Int64(v) else { return GCSRoutes.error(400, "invalid", "bad ifMetagenerationMatch") }
      if m != metageneration { return failed(named("ifMetagenerationMatch")) }
    }
    if let v = query["ifMetagenerationNotMatch"], Int64(v) == metageneration { return failed(named("ifMetagenerationNotMatch")) }
    return nil
  }

  static func failed(_ what: String) -> ServerResponse {
    GCSRoutes.error(412, "conditionNotMet", "At least one of the pre-conditions you specified did not hold (\(what)).")
  }

  /// Whether `query`'s preconditions fail against `record`: for the store to check again as it
  /// makes the new generation, under its lock.
  static func refuses(_ query: [String: String]) -> ((ObjectRecord?) -> Bool)? {
    guard query.keys.contains(where: { $0.hasPrefix("if") }) else { return nil }
    return { failure($0, query) != nil }
  }

}
