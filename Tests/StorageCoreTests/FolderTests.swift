import Foundation
import StorageCore
import StorageEmulator
import TestSupport
import Testing

/// The folders of a bucket with a hierarchical namespace through StorageCore, against the
/// emulator: the layout question, insert (with parents), get, delete (refused while not
/// empty), a rename awaited through its long-running operation, and empty folders listed as
/// prefixes only when asked.
@Suite struct FolderTests {
  func hnsScope(_ body: (EmulatorFixture) async throws -> Void) async throws {
    try await EmulatorFixture.scope(bucket: "hns", configure: { $0.hierarchicalBuckets = ["hns"] }) { fx in
      fx.storage.api = .gcs
      try await body(fx)
    }
  }

  @Test func aFlatBucketOrTheFirebaseAPIHasNoFolders() async throws {
    try await EmulatorFixture.scope { fx in
      fx.storage.api = .gcs
      let overGCS = try await fx.storage.reference().bucketIsHierarchical()
      fx.storage.api = .firebase
      let overFirebase = try await fx.storage.reference().bucketIsHierarchical()
      #expect(!overGCS && !overFirebase)
      await #expect(throws: StorageError.self) { try await fx.storage.reference(withPath: "a").createFolder() }
    }
  }

  @Test func foldersAreMadeListedDeletedAndRenamed() async throws {
    try await hnsScope { fx in
      let root = fx.storage.reference()
      #expect(try await root.bucketIsHierarchical())
      #expect(try await root.child("a/b/empty").createFolder())
      #expect(try await root.child("a/b/empty").createFolder() == false)
      #expect(try await root.child("a").folderExists())
      #expect(try await root.child("nope").folderExists() == false)
      _ = try await root.child("a/b/file.txt").putDataAsync(Data("x".utf8))
      // Empty folders are prefixes only when asked for.
      let plain = try await root.child("a/b").listPage(delimiter: "/", pageToken: nil, maxResults: nil, matchGlob: nil)
      #expect(plain.prefixes.isEmpty && plain.items == ["a/b/file.txt"])
      let asked = try await root.child("a/b").listPage(
        delimiter: "/", pageToken: nil, maxResults: nil, matchGlob: nil, foldersAsPrefixes: true)
      #expect(asked.prefixes == ["a/b/empty/"])
      // Not empty: refused with 409, and kept.
      do {
        try await root.child("a/b").deleteFolder()
        Issue.record("a folder that holds a file was deleted")
      } catch let error as StorageError {
        #expect(error.httpStatus == 409)
      }
      try await root.child("a/b/empty").deleteFolder()
      #expect(try await root.child("a/b/empty").folderExists() == false)
      let progress = ProgressLog()
      try await root.child("a").renameFolder(to: root.child("z")) { progress.add($0) }
      #expect(progress.all.last == 100)
      let (moved, left) = (try await root.child("z/b").folderExists(), try await root.child("a").folderExists())
      #expect(moved && !left)
      #expect(try await root.child("z/b/file.txt").data(maxSize: 10) == Data("x".utf8))
      // The source is gone now: a second rename fails as not found, the target being there.
      await #expect(throws: StorageError.self) { try await root.child("a").renameFolder(to: root.child("y")) }
    }
  }
}

private final class ProgressLog: @unchecked Sendable {
  private let lock = NSLock()
  private var values: [Int] = []
  func add(_ v: Int) { lock.lock(); values.append(v); lock.unlock() }
  var all: [Int] { lock.lock(); defer { lock.unlock() }; return values }
}
