import StorageCore
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

  /// A path by its bytes: two spellings `String` takes for one are two files.
  private struct Key: Hashable {
    var path: ObjectName
    var isDirectory: Bool

    init(path: String, isDirectory: Bool) {
      self.path = ObjectName(path)
      self.isDirectory = isDirectory
    }
  }

  /// The sizes the kernel was given for an inode since it was last told to forget its
  /// attributes (it may hold any of them: a reply is applied when it arrives, not in the order
  /// the answers were made).
  enum ShownSizes {
    /// None: the kernel asks before it uses a size.
    case none
    case one(Int64)
    case several
  }

  /// An inode: its node, the kernel's references, its number, and the sizes it was shown.
  private struct Slot {
    var node: Node
    var lookups: UInt64
    var ino: UInt64
    var shown = ShownSizes.none
    /// The number stat shows when not `ino`: the one of the inode this one took the path from
    /// (`detach`).
    var statNumber: UInt64?
  }

  /// Inodes in an array, not a hash table keyed by number: a walk holds one per name the kernel
  /// keeps, and a table at its load factor took twice the room. A number is the slot's place
  /// (low 32 bits, from 1: the root's) and how many inodes that slot held before (high bits), so
  /// a slot used again never hands out a number the kernel had.
  private struct State {
    var slots: [Slot?] = [Slot(node: Node(path: "", isDirectory: true), lookups: 1, ino: InodeTable.rootIno)]
    /// How many times each slot was freed.
    var reuses: [UInt32] = [0]
    var free: [Int] = []
    var byKey: [Key: UInt64] = [Key(path: "", isDirectory: true): InodeTable.rootIno]
    var live = 1
    /// Paths detached from their inode and not looked up since: the number stat showed for them.
    var heirs: [Key: UInt64] = [:]

    func index(_ ino: UInt64) -> Int? {
      let low = Int(ino & 0xFFFF_FFFF)
      guard low >= 1, low <= slots.count, let slot = slots[low - 1], slot.ino == ino else { return nil }
      return low - 1
    }

    mutating func add(_ node: Node, lookups: UInt64) -> UInt64 {
      let i: Int
      if let reused = free.popLast() {
        i = reused
      } else {
        i = slots.count
        slots.append(nil)
        reuses.append(0)
      }
      let ino = UInt64(reuses[i]) << 32 | UInt64(i + 1)
      slots[i] = Slot(node: node, lookups: lookups, ino: ino)
      live += 1
      return ino
    }

    mutating func remove(at i: Int) {
      guard let slot = slots[i] else { return }
      slots[i] = nil
      // Only its own entry: a file renamed over it (while the kernel still held it) has the path
      // now, and losing that entry left the file's inode behind at its old name for good (its
      // next rename moved nothing, and an append to it went to the old name).
      let key = Key(path: slot.node.path, isDirectory: slot.node.isDirectory)
      if byKey[key] == slot.ino {
        byKey.removeValue(forKey: key)
        // A newer version's inode the kernel let go of at once (it checks a name it looked up
        // again, drops the new number and asks once more): the next keeps showing the number.
        if let number = slot.statNumber { heirs[key] = number }
      }
      live -= 1
      // Numbers stay below bit 62 (the listed-only numbers' mark): a slot freed that often rests.
      guard reuses[i] < (1 << 29) else { return }
      reuses[i] += 1
      free.append(i)
    }
  }

  private let state = Mutex(State())
  /// Whether any path was ever detached from its inode.
  private let detached = Atomic<Bool>(false)

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
      if let ino = s.byKey[key], let i = s.index(ino) {
        s.slots[i]!.node = node
        if lookup { s.slots[i]!.lookups += 1 }
        return (ino, false)
      }
      let ino = s.add(node, lookups: lookup ? 1 : 0)
      s.byKey[key] = ino
      if let number = s.heirs.removeValue(forKey: key), let i = s.index(ino) { s.slots[i]!.statNumber = number }
      return (ino, true)
    }
  }

  /// A file renamed through the mount keeps its inode under the new path.
  package func move(path: String, to newPath: String) {
    state.withLock { s in
      let key = Key(path: path, isDirectory: false)
      let newKey = Key(path: newPath, isDirectory: false)
      // Another file at either path is another file: it shows its own number.
      s.heirs[key] = nil
      s.heirs[newKey] = nil
      guard let ino = s.byKey.removeValue(forKey: key) else { return }
      if let replaced = s.byKey[newKey], replaced != ino, let r = s.index(replaced), s.slots[r]!.lookups == 0 { s.remove(at: r) }
      s.byKey[newKey] = ino
      guard let i = s.index(ino) else { return }
      s.slots[i]!.node.path = newPath
      s.slots[i]!.node.objectName = newPath
    }
  }

  /// A folder renamed through the mount: it and everything under it keep their inodes under
  /// the new path.
  package func move(prefix: String, to newPrefix: String) {
    state.withLock { s in
      let old = ObjectName(prefix)
      for (key, ino) in s.byKey where key.path == old || key.path.string.hasBytePrefix(prefix + "/") {
        let newPath = newPrefix + key.path.string.droppingBytes(prefix.utf8.count)
        s.byKey.removeValue(forKey: key)
        s.byKey[Key(path: newPath, isDirectory: key.isDirectory)] = ino
        guard let i = s.index(ino) else { continue }
        s.slots[i]!.node.path = newPath
        if let object = s.slots[i]!.node.objectName, ObjectName(object) == key.path || object.hasBytePrefix(prefix + "/") {
          s.slots[i]!.node.objectName = newPrefix + object.droppingBytes(prefix.utf8.count)
        }
      }
    }
  }

  /// `ino` stops standing for its path: the next lookup of the path makes another inode. The
  /// kernel keeps one page cache per inode, so a newer version of a file gets an inode of its
  /// own while opens of an older one read theirs (a file replaced by rename on a local disk).
  /// The number stays valid for the references the kernel holds to it.
  package func detach(_ ino: UInt64) {
    state.withLock { s in
      guard let i = s.index(ino) else { return }
      let key = Key(path: s.slots[i]!.node.path, isDirectory: s.slots[i]!.node.isDirectory)
      guard s.byKey[key] == ino else { return }
      s.byKey.removeValue(forKey: key)
      s.heirs[key] = s.slots[i]!.statNumber ?? ino
    }
    detached.store(true, ordering: .relaxed)
  }

  /// The number stat shows for `ino` when it is not `ino` (nil: it is).
  package func statNumber(_ ino: UInt64) -> UInt64? {
    // No lock on the way of every attributes reply until a path was ever detached.
    guard detached.load(ordering: .relaxed) else { return nil }
    return state.withLock { s in s.index(ino).flatMap { s.slots[$0]!.statNumber } }
  }

  /// Whether `ino` still stands for its path (not detached, not renamed over).
  package func standsForItsPath(_ ino: UInt64) -> Bool {
    state.withLock { s in
      guard let i = s.index(ino) else { return false }
      return s.byKey[Key(path: s.slots[i]!.node.path, isDirectory: s.slots[i]!.node.isDirectory)] == ino
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
      guard let i = s.index(ino), s.slots[i]!.lookups == 0 else { return }
      s.remove(at: i)
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
    state.withLock { s in
      if let i = s.index(ino) { s.slots[i]!.lookups += 1 }
    }
  }

  /// Every inode the table holds, with its node.
  package func known() -> [(ino: UInt64, node: Node)] {
    state.withLock { s in s.slots.compactMap { $0.map { ($0.ino, $0.node) } } }
  }

  package func node(_ ino: UInt64) -> Node? {
    state.withLock { s in s.index(ino).map { s.slots[$0]!.node } }
  }

  /// Drops `count` kernel references; the number is freed at zero.
  package func forget(_ ino: UInt64, count: UInt64) {
    guard ino != Self.rootIno else { return }
    state.withLock { s in
      guard let i = s.index(ino) else { return }
      let lookups = s.slots[i]!.lookups
      if lookups > count {
        s.slots[i]!.lookups = lookups - count
      } else {
        s.remove(at: i)
      }
    }
  }

  package var count: Int { state.withLock { $0.live } }

  /// The kernel is being given `size` as `ino`'s size (an answer to a lookup, a getattr, a
  /// readdirplus).
  func showing(_ ino: UInt64, size: Int64) {
    state.withLock { s in
      guard let i = s.index(ino) else { return }
      switch s.slots[i]!.shown {
      case .none: s.slots[i]!.shown = .one(size)
      case .one(let shown) where shown != size: s.slots[i]!.shown = .several
      default: break
      }
    }
  }

  /// The kernel wrote `ino` (through its pages or with direct I/O): it set the size itself,
  /// to the end of the write at the offset it chose, which the daemon may have put elsewhere
  /// (an append). What it holds is not known here from now on.
  func sizedByKernel(_ ino: UInt64) {
    state.withLock { s in
      if let i = s.index(ino) { s.slots[i]!.shown = .several }
    }
  }

  /// Whether the kernel may hold a size other than `size` for `ino`. If so, the caller tells it
  /// to forget its attributes, and nothing is counted as shown from here on.
  func mayHoldOtherSize(_ ino: UInt64, than size: Int64) -> Bool {
    state.withLock { s in
      guard let i = s.index(ino) else { return true }
      switch s.slots[i]!.shown {
      case .none: return false
      case .one(let shown) where shown == size: return false
      default:
        s.slots[i]!.shown = .none
        return true
      }
    }
  }

  /// The kernel is told to forget `ino`'s attributes: it holds no size it will use unasked.
  func forgetShownSizes(_ ino: UInt64) {
    state.withLock { s in
      if let i = s.index(ino) { s.slots[i]!.shown = .none }
    }
  }
}
