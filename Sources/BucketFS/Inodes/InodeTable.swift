import Synchronization

/// Inode numbers for paths. A path keeps its number while the kernel holds a reference to it
/// (lookup count above zero), so the same file keeps the same inode across lookups.
package final class InodeTable: Sendable {
  package static let rootIno: UInt64 = 1

  package struct Node: Sendable, Equatable {
    /// The path shown in the mount, relative to its root ("" for the root).
    package var path: String
    package var isDirectory: Bool
    /// The object behind a file, relative to the mount prefix (differs from `path` for the
    /// `name.object` alias of an object shadowed by a folder of the same name).
    package var objectName: String?

    package init(path: String, isDirectory: Bool, objectName: String? = nil) {
      // The same bytes in one string, not two: a walk keeps a node per name the kernel holds.
      if let objectName, Namespace.sameBytes(objectName, path) { self.path = objectName } else { self.path = path }
      self.isDirectory = isDirectory
      self.objectName = objectName
    }
  }

  private struct Key: Hashable {
    var path: String
    var isDirectory: Bool
  }

  private struct State {
    var nodes: [UInt64: (node: Node, lookups: UInt64)] = [InodeTable.rootIno: (Node(path: "", isDirectory: true), 1)]
    var byKey: [Key: UInt64] = [Key(path: "", isDirectory: true): InodeTable.rootIno]
    var next: UInt64 = 2
  }

  private let state = Mutex(State())

  package init() {}

  /// The inode for `node`, made if needed; `lookup` counts a reference handed to the kernel.
  package func ino(for node: Node, lookup: Bool) -> UInt64 {
    register(node, lookup: lookup).ino
  }

  /// The inode for `node`, and whether it was made just now.
  package func inoCreating(_ node: Node) -> (ino: UInt64, created: Bool) {
    register(node, lookup: false)
  }

  private func register(_ node: Node, lookup: Bool) -> (ino: UInt64, created: Bool) {
    state.withLock { s in
      let key = Key(path: node.path, isDirectory: node.isDirectory)
      if let ino = s.byKey[key] {
        s.nodes[ino]!.node = node
        if lookup { s.nodes[ino]!.lookups += 1 }
        return (ino, false)
      }
      let ino = s.next
      s.next += 1
      s.byKey[key] = ino
      s.nodes[ino] = (node, lookup ? 1 : 0)
      return (ino, true)
    }
  }

  /// A file renamed through the mount keeps its inode under the new path.
  package func move(path: String, to newPath: String) {
    state.withLock { s in
      let key = Key(path: path, isDirectory: false)
      guard let ino = s.byKey.removeValue(forKey: key) else { return }
      let newKey = Key(path: newPath, isDirectory: false)
      if let replaced = s.byKey[newKey], replaced != ino, s.nodes[replaced]?.lookups == 0 { s.nodes.removeValue(forKey: replaced) }
      s.byKey[newKey] = ino
      s.nodes[ino]?.node.path = newPath
      s.nodes[ino]?.node.objectName = newPath
    }
  }

  /// A folder renamed through the mount: it and everything under it keep their inodes under
  /// the new path.
  package func move(prefix: String, to newPrefix: String) {
    state.withLock { s in
      for (key, ino) in s.byKey where key.path == prefix || key.path.hasPrefix(prefix + "/") {
        let newPath = newPrefix + key.path.dropFirst(prefix.count)
        s.byKey.removeValue(forKey: key)
        s.byKey[Key(path: newPath, isDirectory: key.isDirectory)] = ino
        s.nodes[ino]?.node.path = newPath
        if let object = s.nodes[ino]?.node.objectName, object == key.path || object.hasPrefix(prefix + "/") {
          s.nodes[ino]?.node.objectName = newPrefix + object.dropFirst(prefix.count)
        }
      }
    }
  }

  /// The inode of `node` when it has one; never makes one.
  package func existing(_ node: Node) -> UInt64? {
    state.withLock { $0.byKey[Key(path: node.path, isDirectory: node.isDirectory)] }
  }

  /// Forgets `ino` if the kernel holds no reference to it (one made for a reply that did not fit).
  package func dropIfUnreferenced(_ ino: UInt64) {
    guard ino != Self.rootIno else { return }
    state.withLock { s in
      guard let entry = s.nodes[ino], entry.lookups == 0 else { return }
      s.nodes.removeValue(forKey: ino)
      s.byKey.removeValue(forKey: Key(path: entry.node.path, isDirectory: entry.node.isDirectory))
    }
  }

  /// A number for entry `index` of folder `dir`'s listing, listed but not looked up: apart from
  /// the numbers handed out (those count up from 2), so that no table entry is made for it, and
  /// increasing in listing order. Tools that read a folder in d_ino order (GNU cp, tar and du
  /// sort by it to read a disk in order) then open its files in listing order, which is what
  /// the read-ahead across files follows.
  package static func listedIno(dir: String, index: Int) -> UInt64 {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in dir.utf8 {
      hash ^= UInt64(byte)
      hash = hash &* 0x100_0000_01b3
    }
    return (1 << 62) | (hash & 0xFFFF_FFFF) << 24 | UInt64(index & 0xFF_FFFF)
  }

  /// Counts one more kernel reference to an existing inode (readdirplus hands them out).
  package func addLookup(_ ino: UInt64) {
    state.withLock { s in s.nodes[ino]?.lookups += 1 }
  }

  /// Every inode the table holds, with its node.
  package func known() -> [(ino: UInt64, node: Node)] {
    state.withLock { s in s.nodes.map { ($0.key, $0.value.node) } }
  }

  package func node(_ ino: UInt64) -> Node? {
    state.withLock { $0.nodes[ino]?.node }
  }

  /// Drops `count` kernel references; the number is freed at zero.
  package func forget(_ ino: UInt64, count: UInt64) {
    guard ino != Self.rootIno else { return }
    state.withLock { s in
      guard var entry = s.nodes[ino] else { return }
      entry.lookups = entry.lookups > count ? entry.lookups - count : 0
      if entry.lookups == 0 {
        s.nodes.removeValue(forKey: ino)
        s.byKey.removeValue(forKey: Key(path: entry.node.path, isDirectory: entry.node.isDirectory))
      } else {
        s.nodes[ino] = entry
      }
    }
  }

  package var count: Int { state.withLock { $0.nodes.count } }
}
