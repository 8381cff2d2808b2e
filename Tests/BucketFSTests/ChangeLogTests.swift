@testable import BucketFS
import Foundation
import Testing

/// The queue's journal: the last record of each change wins, a removal drops it, a frame cut
/// short or damaged ends what is read (and is handed back to be kept aside), and the file is
/// rewritten with the live records only.
@Suite struct ChangeLogTests {
  /// A loaded, empty journal in a folder of its own (removed afterwards), and its path.
  func withLog(_ body: (ChangeLog, String) throws -> Void) throws {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("changelog-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: dir) }
    let path = dir.appendingPathComponent("changes.log").path
    let log = ChangeLog(path: path, disk: SystemDisk())
    _ = try log.load()
    try body(log, path)
  }

  func change(_ sequence: UInt64, _ name: String) -> PendingChange {
    PendingChange(sequence: sequence, kind: .upload, name: name, base: .generation(0), contentType: "text/plain")
  }

  func names(_ loaded: ChangeLog.Loaded) -> [UInt64: String] {
    loaded.records.compactMapValues { try? JSONDecoder().decode(PendingChange.self, from: $0).name }
  }

  /// A record written by hand reads back as the change it was made of, with JSONDecoder, and
  /// is the same JSON JSONEncoder writes (so that a mount of an earlier version reads it):
  /// names with quotes, backslashes, control characters and other scripts; every base, life
  /// and optional part.
  @Test func aRecordIsWhatJSONEncoderWrites() throws {
    let names = ["plain.txt", "quote\"and\\back", "tab\tnew\nline\r", "nul\u{0}bell\u{7}esc\u{1b}del\u{7f}", "café/日本語/😀", "a/b/c"]
    let source = PendingChange.Source(name: "from/\"x\"", generation: 42, size: 9, crc32c: "AAAAAA==", md5Hash: nil)
    var overlay = EditOverlay(base: source)
    overlay.wrote(2..<5)
    let lives: [PendingChange.Life] = [
      .pending, .started, .replaced(by: 9), .done(.generation(77)), .done(.unknown), .done(.conflict("x.conflict-1", generation: 5)),
      .done(.conflict("old", generation: nil)), .failed("refused: \"403\"\n"),
    ]
    let bases: [PendingChange.Base] = [.generation(0), .generation(1_700_000_000_123_456), .any, .previous]
    var checked = 0
    for (i, name) in names.enumerated() {
      for (j, life) in lives.enumerated() {
        var c = PendingChange(sequence: UInt64(i * 100 + j), kind: [.upload, .delete, .metadata, .copy][j % 4], name: name, base: bases[(i + j) % 4])
        c.life = life
        if j % 2 == 0 {
          c.contentType = "text/plain; charset=\"utf-8\""
          c.mtime = Timestamp(seconds: -5 + Int64(i), nanoseconds: Int64(999_999_999 - j))
          c.custom = ["goog-reserved-posix-mode": "644", "k\"ey": name, "": "empty key"]
          c.sessionURL = "http://127.0.0.1:1/upload?upload_id=\(i)&x=\"y\""
          c.dataSize = Int64(i) << 40
          c.dataCRC32C = UInt32.max - UInt32(j)
        }
        if j % 3 == 0 { c.source = source }
        if j % 4 == 1 { c.overlay = overlay }
        if j % 4 == 2 { c.renamedInto = UInt64(i * 100 + j) - 1 }
        if j % 4 == 3 { c.grows = PendingChange.ConflictCopy(name: name + ".conflict-\"1\"", generation: Int64(j)) }
        let written = try c.record()
        let decoded = try JSONDecoder().decode(PendingChange.self, from: written)
        // A replaced change says which one replaced it: a load drops it while that one stands.
        #expect(decoded == c, "\(String(decoding: written, as: UTF8.self))")
        let theirs = try JSONSerialization.jsonObject(with: JSONEncoder().encode(c)) as! NSDictionary
        let ours = try JSONSerialization.jsonObject(with: written) as! NSDictionary
        #expect(ours == theirs, "\(String(decoding: written, as: UTF8.self))")
        checked += 1
      }
    }
    #expect(checked == names.count * lives.count)
  }

  @Test func theLastRecordOfAChangeWinsAndARemovalDropsIt() throws {
    try withLog { log, path in
      try log.append([change(1, "a"), change(2, "b")], sync: false)
      try log.append([change(1, "a, again")], removed: [2], sync: true)
      try log.append([change(3, "c")], sync: false)
      let again = try ChangeLog(path: path, disk: SystemDisk()).load()
      #expect(names(again) == [1: "a, again", 3: "c"])
      #expect(again.damage == nil)
    }
  }

  /// Cut after every byte: what a power loss may leave of the file's end. The records whose
  /// frames are whole are read; a cut inside a frame is reported, never read as a record.
  @Test func aFileCutAnywhereGivesTheWholeFramesBeforeTheCut() throws {
    try withLog { log, path in
      var ends: [Int] = []
      for i in 1...4 {
        try log.append([change(UInt64(i), "file \(i)")], sync: false)
        ends.append(Int((try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0))
      }
      let whole = try Data(contentsOf: URL(fileURLWithPath: path))
      for cut in 0...whole.count {
        let loaded = ChangeLog.parse(whole.prefix(cut))
        let complete = ends.filter { $0 <= cut }.count
        #expect(loaded.records.count == complete, "cut at \(cut)")
        #expect((loaded.damage != nil) == !(ends.contains(cut) || cut == 0), "cut at \(cut)")
        if let damage = loaded.damage { #expect(damage.bytes.count == cut - (ends.last { $0 <= cut } ?? 0)) }
      }
    }
  }

  /// Records appended together (a folder rename's moves, a rename's upload and delete) are one
  /// frame: a file cut anywhere in that append holds all of them or none, never a prefix.
  @Test func recordsAppendedTogetherAreReadAllOrNone() throws {
    try withLog { log, path in
      try log.append([change(1, "before")], sync: false)
      let start = Int((try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0)
      var delete = change(12, "old/name")
      delete.kind = .delete
      delete.renamedInto = 11
      try log.append((2...11).map { change(UInt64($0), "moved/\($0)") } + [delete], sync: false)
      let whole = try Data(contentsOf: URL(fileURLWithPath: path))
      for cut in start..<whole.count {
        #expect(names(ChangeLog.parse(whole.prefix(cut))) == [1: "before"], "cut at \(cut)")
      }
      let loaded = try ChangeLog(path: path, disk: SystemDisk()).load()
      #expect(loaded.records.count == 12 && loaded.damage == nil)
      let read = try JSONDecoder().decode(PendingChange.self, from: try #require(loaded.records[12]))
      #expect(read == delete)
    }
  }

  /// A changed byte in the middle: the records before it are read, it and the rest are not.
  @Test func aDamagedFrameEndsWhatIsRead() throws {
    try withLog { log, path in
      for i in 1...3 { try log.append([change(UInt64(i), "file \(i)")], sync: false) }
      var data = try Data(contentsOf: URL(fileURLWithPath: path))
      let second = try #require(data.range(of: Data("file 2".utf8)))
      data[second.lowerBound] ^= 1
      let loaded = ChangeLog.parse(data)
      #expect(names(loaded) == [1: "file 1"])
      #expect(loaded.damage?.reason.contains("checksum") == true)
      // A load rewrites the file with what was read: the next load finds no damage.
      try data.write(to: URL(fileURLWithPath: path))
      #expect(try ChangeLog(path: path, disk: SystemDisk()).load().damage != nil)
      let next = try ChangeLog(path: path, disk: SystemDisk()).load()
      #expect(next.damage == nil && names(next) == [1: "file 1"])
    }
  }

  /// A change rewritten many times (a long upload's sessions, amends): the file is rewritten
  /// with the live records once the dead ones outweigh them, and reads the same.
  @Test func deadRecordsAreDroppedWhenTheyOutweighTheLiveOnes() throws {
    try withLog { log, path in
      var big = change(1, "big")
      big.custom = ["note": String(repeating: "x", count: 4000)]
      var largest = 0
      for i in 0..<3000 {
        big.mtime = Timestamp(seconds: Int64(i))
        try log.append([big, change(UInt64(2 + i % 5), "small \(i % 5)")], sync: false)
        largest = max(largest, (try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0)
      }
      #expect(largest < 6 << 20, "the file grew to \(largest) bytes")
      let loaded = try ChangeLog(path: path, disk: SystemDisk()).load()
      #expect(loaded.damage == nil)
      #expect(names(loaded) == [1: "big", 2: "small 0", 3: "small 1", 4: "small 2", 5: "small 3", 6: "small 4"])
      let last = try JSONDecoder().decode(PendingChange.self, from: try #require(loaded.records[1]))
      #expect(last.mtime == Timestamp(seconds: 2999))
    }
  }
}
