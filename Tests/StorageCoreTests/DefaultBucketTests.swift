import Foundation
import Testing

@testable import StorageCore

/// `Storage.storage()` finds the default bucket where an app keeps it, in order.
@Suite struct DefaultBucketTests {
  func folder() throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("default-bucket-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
  }

  @Test func environmentThenPlistThenJSON() throws {
    let dir = try folder()
    defer { try? FileManager.default.removeItem(at: dir) }
    // Nothing: a message saying where it looked.
    guard case .failure(let none) = DefaultBucket.find(environment: [:], folder: dir) else {
      Issue.record("found a bucket in an empty folder")
      return
    }
    #expect(none.description.contains("FIREBASE_STORAGE_BUCKET") && none.description.contains("GoogleService-Info.plist"))
    let json = #"{"project_info": {"project_id": "p", "storage_bucket": "from-json.appspot.com"}}"#
    try Data(json.utf8).write(to: dir.appendingPathComponent("google-services.json"))
    #expect(try DefaultBucket.find(environment: [:], folder: dir).get() == "from-json.appspot.com")
    let plist = try PropertyListSerialization.data(
      fromPropertyList: ["STORAGE_BUCKET": "from-plist.appspot.com", "PROJECT_ID": "p"], format: .xml, options: 0)
    try plist.write(to: dir.appendingPathComponent("GoogleService-Info.plist"))
    #expect(try DefaultBucket.find(environment: [:], folder: dir).get() == "from-plist.appspot.com")
    #expect(try DefaultBucket.find(environment: ["FIREBASE_STORAGE_BUCKET": "from-env"], folder: dir).get() == "from-env")
  }
}
