import Foundation

/// One page of a list call, with object names exactly as the server sent them.
public struct ListPage: Sendable {
  public var prefixes: [String]
  public var items: [String]
  /// Full metadata per item when the protocol carries it (GCS JSON); empty for v0.
  public var metadata: [String: StorageMetadata]
  public var nextPageToken: String?
  /// Whether the items hold each prefix's own object when there is one (GCS's
  /// `includeTrailingDelimiter`): then a prefix without one among the items has none.
  public var holdsFolderObjects = false

  public init(prefixes: [String], items: [String], metadata: [String: StorageMetadata] = [:], nextPageToken: String?) {
    self.prefixes = prefixes
    self.items = items
    self.metadata = metadata
    self.nextPageToken = nextPageToken
  }

  /// A page as either API sends it: items with their attributes (the GCS JSON API) carry
  /// metadata; a v0 page has names only. One pass over the bytes (`JSONValue`): a page of 1,000
  /// objects is read in about a millisecond.
  static func decode(_ data: Data) -> ListPage? {
    guard let json = JSONValue.read(data), json.members != nil else { return nil }
    let prefixes = json["prefixes"]?.array?.compactMap(\.string) ?? []
    var items: [String] = []
    var metadata: [String: StorageMetadata] = [:]
    let given = json["items"]?.array ?? []
    items.reserveCapacity(given.count)
    for item in given {
      guard let name = item["name"]?.string else { continue }
      items.append(name)
      if item["size"] != nil { metadata[name] = StorageMetadata(json: item) }
    }
    let token = json["nextPageToken"]?.string
    return ListPage(
      prefixes: prefixes, items: items, metadata: metadata,
      nextPageToken: (token?.isEmpty ?? true) ? nil : token)
  }
}

extension ListPage {
  /// Every page `fetch` gives, following page tokens from the first (nil) on, as one page:
  /// prefixes once each in the order first seen, items in order, metadata merged.
  package static func all<E: Error>(_ fetch: (String?) async throws(E) -> ListPage) async throws(E) -> ListPage {
    var all = ListPage(prefixes: [], items: [], nextPageToken: nil)
    all.holdsFolderObjects = true
    var seen = Set<String>()
    var token: String? = nil
    repeat {
      let page = try await fetch(token)
      all.holdsFolderObjects = all.holdsFolderObjects && page.holdsFolderObjects
      for prefix in page.prefixes where seen.insert(prefix).inserted { all.prefixes.append(prefix) }
      all.items += page.items
      all.metadata.merge(page.metadata) { first, _ in first }
      token = page.nextPageToken
    } while token != nil
    return all
  }
}
