// The names a folder shows. A bucket can hold an object `a` and objects under `a/` at once; a
// folder cannot hold a file and a folder of the same name, so the folder keeps `a` and the object
// gets an alias. The alias must never shadow a real name: `a.object` when that is free, else
// `a.object.1`, `a.object.2`, … Every shown name is unique and maps to exactly one object or folder.
import StorageCore

enum FolderNames {
  static let aliasSuffix = ".object"

  /// Shown names for `files` (name in this folder, payload) beside the folder names `folders`.
  /// Files whose name no folder takes keep it; the others get the first free alias, in name
  /// order so that the same listing gives the same aliases. `leftOut` hears of a file that got
  /// no name (no alias fits in 255 bytes).
  static func assign<T>(folders: Set<ObjectName>, files: [(name: String, payload: T)], leftOut: (String) -> Void)
    -> [(shown: String, payload: T)]
  {
    var taken = folders
    for f in files where !folders.contains(ObjectName(f.name)) { taken.insert(ObjectName(f.name)) }
    var aliases: [ObjectName: String] = [:]
    for name in Set(files.map { ObjectName($0.name) }).intersection(folders).sorted() {
      guard let alias = freeAlias(for: name.string, taken: taken) else {
        leftOut(name.string)
        continue
      }
      taken.insert(ObjectName(alias))
      aliases[name] = alias
    }
    return files.compactMap { f in
      guard folders.contains(ObjectName(f.name)) else { return (f.name, f.payload) }
      return aliases[ObjectName(f.name)].map { ($0, f.payload) }
    }
  }

  private static func freeAlias(for name: String, taken: Set<ObjectName>) -> String? {
    freeAlias(for: name) { taken.contains(ObjectName($0)) }
  }

  /// The first alias of `name` that `isTaken` does not claim; nil when none fits in 255 bytes.
  /// Every alias sorts between `name` and `name/` in byte order ("." comes before "/"), so a
  /// listing in name order has seen every name an alias could collide with by then.
  static func freeAlias(for name: String, isTaken: (String) -> Bool) -> String? {
    var n = 0
    while n < 1000 {
      let candidate = alias(name, n)
      if candidate.utf8.count > 255 { return nil }
      if !isTaken(candidate) { return candidate }
      n += 1
    }
    return nil
  }

  /// The `n`th alias a file `name` may get beside a folder of that name.
  static func alias(_ name: String, _ n: Int) -> String { name + aliasSuffix + (n == 0 ? "" : ".\(n)") }

  /// True when `name` may be an alias (only those need the folder's whole listing to resolve).
  static func mayBeAlias(_ name: String) -> Bool { name.contains(aliasSuffix) }
}
