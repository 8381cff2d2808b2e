// After a burst of work that allocates much and keeps little (a pin pass that staged thousands
// of files: their downloads, records and listing pages), glibc keeps the freed heap as the
// daemon's resident memory: a pin of 10,000 small objects left ~115 MiB resident, of which ~24
// MiB was live. The mount gives the rest back after such a burst, so an idle pin costs what it
// keeps. Installed by the mount command (this module does not link malloc's interface).
package enum HeapRelease {
  package static let afterBurst = Hook<@Sendable () -> Void>()

  /// Gives freed heap back to the system, where the mount installed how.
  static func now() { afterBurst.value?() }
}
