import Foundation

/// Where `Storage.storage()` finds the default bucket, in the order the SDKs' configuration
/// files are read: the environment, then the app's Firebase configuration files in the working
/// directory.
enum DefaultBucket {
  struct NotFound: Error, CustomStringConvertible {
    var description: String
  }

  static func find(
    environment: [String: String] = ProcessInfo.processInfo.environment,
    folder: URL = URL(fileURLWithPath: FileManager.default.currentDirectoryPath)
  ) -> Result<String, NotFound> {
    if let bucket = environment["FIREBASE_STORAGE_BUCKET"], !bucket.isEmpty { return .success(bucket) }
    let plist = folder.appendingPathComponent("GoogleService-Info.plist")
    if let data = FileManager.default.contents(atPath: plist.path),
      let dict = try? PropertyListSerialization.propertyList(from: data, format: nil) as? [String: Any],
      let bucket = dict["STORAGE_BUCKET"] as? String, !bucket.isEmpty
    {
      return .success(bucket)
    }
    let json = folder.appendingPathComponent("google-services.json")
    if let data = FileManager.default.contents(atPath: json.path),
      let dict = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
      let info = dict["project_info"] as? [String: Any], let bucket = info["storage_bucket"] as? String, !bucket.isEmpty
    {
      return .success(bucket)
    }
    return .failure(NotFound(description: """
      Storage.storage(): no default bucket. Set FIREBASE_STORAGE_BUCKET, or put the app's \
      GoogleService-Info.plist (STORAGE_BUCKET) or google-services.json (project_info.storage_bucket) \
      in the working directory (\(folder.path)), or use Storage.storage(url: "gs://BUCKET").
      """))
  }
}
