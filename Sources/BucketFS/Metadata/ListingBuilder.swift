import StorageCore

/// Turns a folder's list pages into its entries while they arrive, so that a reader can be shown
/// the first entries before the last page is fetched.
///
/// An entry leaves the builder once its shown name is final. A folder's is at once. A file's is
/// once the listing has passed where a folder of the same name would be (`name/`): such a folder
/// keeps the name and the file gets an alias (`FolderNames`), and every alias it could take sorts
/// between `name` and `name/`, so by then every name it could collide with has been seen. That
/// needs the server to list in byte order (`ListPage.inNameOrder`); a listing that does not, or
/// that is found out of order, gives its files at the end. Either way the names are the same:
/// files are named in byte order against the same names.
struct ListingBuilder {
  /// The listed folder's prefix ("" for the root, else "dir/").
  let listPrefix: String
  /// What a page says of a folder's own object: `name` ("" is the listed folder itself) has
  /// this placeholder, none (`.absent`), or the listing cannot tell (nil: ask when needed).
  private let folderObject: (_ name: String, FolderObject?) -> Void
  /// A name the folder cannot show, and why.
  private let leftOut: (_ objectName: String, _ reason: String) -> Void
  /// A file's attributes when the listing has none (v0 lists names only).
  private let knownSummary: (_ objectName: String) -> ObjectSummary?

  private var folderNames = Set<ObjectName>()
  /// Files whose shown name is not final yet, in the order listed (byte order when in order).
  private var pending: [(name: String, objectName: String, summary: ObjectSummary?)] = []
  private var aliases = Set<ObjectName>()
  /// The greatest name listed so far (full, as the server spells it), while pages are in order.
  private var greatest: String?
  private var inOrder = true

  init(
    listPrefix: String, folderObject: @escaping (String, FolderObject?) -> Void,
    leftOut: @escaping (String, String) -> Void, knownSummary: @escaping (String) -> ObjectSummary?
  ) {
    self.listPrefix = listPrefix
    self.folderObject = folderObject
    self.leftOut = leftOut
    self.knownSummary = knownSummary
  }

  /// The entries of `page` whose names are final, and those of earlier pages that became so.
  mutating func add(_ page: ListPage) -> [DirectoryEntry] {
    noteOrder(page)
    var out: [DirectoryEntry] = []
    // Placeholders first: a prefix's own object may come among this page's items.
    var placeholders: [ObjectName: ObjectSummary] = [:]
    for (item, m) in zip(page.items, page.itemMetadata) where item.endsWithSlash {
      if let m { placeholders[ObjectName(item)] = ObjectSummary(m) }
    }
    if let own = placeholders[ObjectName(listPrefix)] { folderObject("", .object(own.metadata)) }
    // By bytes: "/" and a combining mark after it are one `Character`, so a count of
    // characters cuts such a name one mark short, and "g" U+0600 "/" does not end in "/".
    for prefix in page.prefixes {
      addFolder((prefix.afterBytePrefix(listPrefix) ?? prefix).withoutTrailingSlash, full: prefix, page, placeholders, &out)
    }
    for (item, metadata) in zip(page.items, page.itemMetadata) {
      let name = item.afterBytePrefix(listPrefix) ?? item
      if name.isEmpty { continue }  // the folder's own placeholder
      if name.endsWithSlash, Namespace.isValidName(name.withoutTrailingSlash) {
        // A sub-folder's placeholder the list returned as an item.
        addFolder(name.withoutTrailingSlash, full: item, page, placeholders, &out)
        continue
      }
      guard Namespace.isValidName(name) else {
        leftOut(item, "not a valid file name")
        continue
      }
      pending.append((name, item, metadata.map { ObjectSummary($0) }))
    }
    releaseFiles(upTo: inOrder ? greatest : nil, &out)
    return out
  }

  /// The entries still held: the listing is complete.
  mutating func finish() -> [DirectoryEntry] {
    var out: [DirectoryEntry] = []
    if !inOrder {
      pending.sort { Self.bytesBefore($0.objectName, $1.objectName) }
    }
    releaseFiles(upTo: nil, complete: true, &out)
    return out
  }

  /// Each page's names must all come after the greatest of the pages before it.
  private mutating func noteOrder(_ page: ListPage) {
    guard inOrder else { return }
    guard page.inNameOrder else {
      inOrder = false
      return
    }
    var least: String?
    var most = greatest
    for list in [page.prefixes, page.items] {
      for name in list {
      if least == nil || Self.bytesBefore(name, least!) { least = name }
      if most == nil || Self.bytesBefore(most!, name) { most = name }
      }
    }
    if let least, let before = greatest, !Self.bytesBefore(before, least) {
      inOrder = false
      return
    }
    greatest = most
  }

  private mutating func addFolder(
    _ name: String, full: String, _ page: ListPage, _ placeholders: [ObjectName: ObjectSummary], _ out: inout [DirectoryEntry]
  ) {
    guard Namespace.isValidName(name) else {
      leftOut(full, "not a valid file name")
      return
    }
    let placeholder = placeholders[ObjectName(listPrefix + name + "/")]
    if folderNames.insert(ObjectName(name)).inserted {
      out.append(DirectoryEntry(name: name, isDirectory: true))
      // A listing that holds placeholders says which folders have none; one that does not (v0)
      // has them asked for again, as its files' attributes are.
      folderObject(name, page.holdsFolderObjects ? placeholder.map { .object($0.metadata) } ?? .absent : nil)
    } else if let placeholder {
      folderObject(name, .object(placeholder.metadata))
    }
  }

  /// Names the held files whose folder twin, if any, has been listed: all of them when
  /// `complete`, else those whose `name/` sorts no later than `greatest`.
  private mutating func releaseFiles(upTo greatest: String?, complete: Bool = false, _ out: inout [DirectoryEntry]) {
    guard complete || greatest != nil else { return }
    var end = 0
    while end < pending.count, complete || !Self.bytes(greatest!, before: pending[end].objectName, slash: ()) { end += 1 }
    guard end > 0 else { return }
    var heldNames: Set<ObjectName>? = nil
    for i in 0..<end {
      let file = pending[i]
      var shown = file.name
      if folderNames.contains(ObjectName(file.name)) {
        // Real names an alias could collide with are among the files held (they sort after this
        // one), folders, or aliases given before.
        if heldNames == nil { heldNames = Set(pending[i...].map { ObjectName($0.name) }) }
        let taken = heldNames!
        guard
          let alias = FolderNames.freeAlias(for: file.name, isTaken: { [folderNames, aliases] in
            let a = ObjectName($0)
            return folderNames.contains(a) || taken.contains(a) || aliases.contains(a)
          })
        else {
          leftOut(file.objectName, "no free alias beside the folder of the same name")
          continue
        }
        aliases.insert(ObjectName(alias))
        shown = alias
      }
      var summary = file.summary ?? knownSummary(file.objectName)
      // The object's name in the bucket equals the entry's object name when the mount has no
      // prefix: one string for both.
      if let p = summary?.path, Namespace.sameBytes(p, file.objectName) { summary?.path = file.objectName }
      out.append(DirectoryEntry(name: shown, isDirectory: false, objectName: file.objectName, summary: summary))
    }
    // What stays held is a page's last few names at most.
    pending.removeSubrange(0..<end)
  }

  /// Byte order (the order GCS lists in), not Swift's canonical String order.
  static func bytesBefore(_ a: String, _ b: String) -> Bool { a.utf8.lexicographicallyPrecedes(b.utf8) }

  /// Whether `a` comes before `b + "/"` in byte order, without making that string.
  static func bytes(_ a: String, before b: String, slash: Void) -> Bool {
    var x = a.utf8.makeIterator()
    var y = b.utf8.makeIterator()
    var slashGiven = false
    while true {
      let right: UInt8?
      if let next = y.next() {
        right = next
      } else if !slashGiven {
        slashGiven = true
        right = UInt8(ascii: "/")
      } else {
        right = nil
      }
      guard let r = right else { return false }  // b/ is a prefix of a, or equal
      guard let l = x.next() else { return true }  // a is a prefix of b/
      if l != r { return l < r }
    }
  }
}
