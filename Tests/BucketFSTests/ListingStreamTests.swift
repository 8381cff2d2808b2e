import Testing

@testable import BucketFS

/// A listing whose later page failed goes on from the folder's last listing past the names its
/// pages reached (`ListingStream.endFromLast`): each name once, fresh up to that point.
struct ListingStreamTests {
  func entry(_ name: String, folder: Bool = false) -> DirectoryEntry { DirectoryEntry(name: name, isDirectory: folder, objectName: folder ? nil : name) }

  @Test func theLastListingTakesOverPastTheNamesReached() {
    let stream = ListingStream()
    stream.append([entry("a"), entry("b"), entry("c")])
    // "b2" went since the last listing (the pages say so); "d" is held back by the builder;
    // "c" is both; "sub/" sorts after "sub.txt" as the server sorts them.
    let last = [entry("a"), entry("b2"), entry("c"), entry("d"), entry("e"), entry("sub.txt"), entry("sub", folder: true)]
    stream.endFromLast([entry("d")], last)
    let (entries, count, phase) = stream.entries(from: 0, limit: 100)
    #expect(entries.map(\.name) == ["a", "b", "c", "d", "e", "sub.txt", "sub"] && count == 7)
    if case .complete = phase {} else { Issue.record("the listing is not complete: \(phase)") }
  }
}
