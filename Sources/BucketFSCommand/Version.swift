import FuseBridge
import Foundation
import StorageCore

/// The version, kept here only, and the versions of the libraries the binary runs with.
public enum Version {
  public static let bucketfs = "0.5.0"

  static var report: String {
    """
    bucketfs \(bucketfs)
    libcurl \(HTTPClient.libraryVersion)
    libfuse \(FuseSession.libraryVersion)
    """
  }
}
