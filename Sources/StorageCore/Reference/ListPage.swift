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

  /// The names of a page, decoded without building a dictionary per item (a v0 page carries
  /// names only, and `ls` of a large folder waits for every page).
  private struct Names: Decodable {
    struct Item: Decodable {
      let name: String?
      let size: String?
    }
    let prefixes: [String]?
    let items: [Item]?
    let nextPageToken: String?
  }

  static func decode(_ data: Data) -> ListPage? {
    if let names = try? JSONDecoder().decode(Names.self, from: data), names.items?.contains(where: { $0.size != nil }) != true {
      let token = names.nextPageToken
      return ListPage(
        prefixes: names.prefixes ?? [], items: names.items?.compactMap(\.name) ?? [],
        nextPageToken: (token?.isEmpty ?? true) ? nil : token)
    }
    // Items with their attributes (the GCS JSON API): each becomes metadata.
    guard let json = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else { return nil }
    let prefixes = json["prefixes"] as? [String] ?? []
    var items: [String] = []
    var metadata: [String: StorageMetadata] = [:]
    for item in json["items"] as? [[String: Any]] ?? [] {
      guard let name = item["name"] as? String else { continue }
      items.append(name)
      if item["size"] != nil { metadata[name] = StorageMetadata(dictionary: item) }
    }
    let token = json["nextPageToken"] as? String
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
