import StorageCore
import Synchronization

/// Folders the server said were there (a lookup's probe found objects under them), by path
/// relative to the mount prefix, however long ago, bounded (the oldest go first): when the
/// server stops answering, a folder the mount looked up a moment ago is still a folder, not
/// "no such file" (an append into it failed ENOENT, and a script would take it for gone).
final class AnsweredFolders: Sendable {
  private struct State {
    var paths: Set<ObjectName> = []
    var order: [ObjectName] = []
    var start = 0
  }

  private let state = Mutex(State())
  private let capacity: Int

  init(capacity: Int) { self.capacity = capacity }

  func add(_ path: String) {
    let name = ObjectName(path)
    state.withLock { s in
      guard s.paths.insert(name).inserted else { return }
      s.order.append(name)
      guard s.paths.count > capacity else { return }
      s.paths.remove(s.order[s.start])
      s.start += 1
      // The dropped half of the order goes at once, not one name at a time.
      if s.start * 2 > s.order.count {
        s.order.removeFirst(s.start)
        s.start = 0
      }
    }
  }

  func contains(_ path: String) -> Bool { state.withLock { $0.paths.contains(ObjectName(path)) } }
}
