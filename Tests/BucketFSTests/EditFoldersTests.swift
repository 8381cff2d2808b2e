@testable import BucketFS
import Foundation
import Testing

/// New edit files go in folders of their own, a new folder every `filesPerFolder` files; a
/// folder whose files are gone is removed, and the folders an ended mount left are too.
@Suite struct EditFoldersTests {
  @Test func foldersTurnOverAndWhatAnEndedMountLeftGoes() throws {
    let parent = FileManager.default.temporaryDirectory.appendingPathComponent("edit-folders-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: parent, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: parent) }
    // Left by an ended mount: an edit file, and a folder with one in it.
    let leftFolder = parent.appendingPathComponent("edits-1-0")
    try FileManager.default.createDirectory(at: leftFolder, withIntermediateDirectories: true)
    try Data("x".utf8).write(to: leftFolder.appendingPathComponent("edit-1-1"))
    try Data("y".utf8).write(to: parent.appendingPathComponent("edit-1-2"))
    try Data("kept".utf8).write(to: parent.appendingPathComponent("000000000001.data"))

    let folders = EditFolders(in: parent, disk: SystemDisk())
    let names = Set(try FileManager.default.contentsOfDirectory(atPath: parent.path))
    #expect(!names.contains("edits-1-0") && !names.contains("edit-1-2") && names.contains("000000000001.data"), "\(names)")
    let first = folders.next()
    #expect(first.hasPrefix(parent.path + "/edits-"))
    var made: [String] = []
    for _ in 1..<EditFolders.filesPerFolder {
      #expect(folders.next() == first)
      let (file, path) = try LocalEdits.newFile(in: first, disk: SystemDisk())
      made.append(path)
      _ = file
    }
    let second = folders.next()
    #expect(second != first && second.hasPrefix(parent.path + "/edits-"))
    // The first folder still holds files: it stays until they are gone.
    #expect(FileManager.default.fileExists(atPath: first))
    for path in made { unlink(path) }
    for _ in 0..<EditFolders.filesPerFolder { _ = folders.next() }
    #expect(!FileManager.default.fileExists(atPath: first), "an empty earlier folder was left")
    #expect(FileManager.default.fileExists(atPath: folders.next()))
  }
}
