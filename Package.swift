// swift-tools-version:6.0
import PackageDescription

let package = Package(
  name: "bucketfs",
  platforms: [.macOS(.v15)],
  products: [
    .executable(name: "bucketfs", targets: ["bucketfs"]),
  ],
  targets: [
    .target(name: "CCurl", linkerSettings: [.linkedLibrary("curl")]),
    .target(
      name: "CFuse",
      cSettings: [.define("FUSE_USE_VERSION", to: "35")],
      linkerSettings: [.linkedLibrary("fuse3")]),
    .target(name: "CCrypto", linkerSettings: [.linkedLibrary("crypto")]),
    .target(name: "CZlib", linkerSettings: [.linkedLibrary("z")]),
    .target(name: "StorageCore", dependencies: ["CCurl", "CCrypto", "CZlib"]),
    .target(name: "StorageEmulator", dependencies: ["CCrypto", "CZlib"]),
    .target(name: "BucketFS", dependencies: ["StorageCore", "CCrypto"]),
    .target(name: "FuseBridge", dependencies: ["BucketFS", "CFuse"]),
    .target(
      name: "BucketFSCommand",
      dependencies: ["StorageCore", "StorageEmulator", "BucketFS", "FuseBridge"]),
    .executableTarget(name: "bucketfs", dependencies: ["BucketFSCommand"]),
    .testTarget(name: "StorageCoreTests", dependencies: ["StorageCore", "StorageEmulator"]),
    .testTarget(name: "StorageEmulatorTests", dependencies: ["StorageEmulator"]),
    .testTarget(name: "BucketFSTests", dependencies: ["BucketFS", "StorageCore"]),
    .testTarget(
      name: "MountTests", dependencies: ["BucketFSCommand", "StorageCore", "StorageEmulator"]),
    .testTarget(name: "CommandTests", dependencies: ["StorageEmulator"]),
    // The Firebase pages' Swift examples, unedited, in the Swift 5 mode the pages are written
    // for: building the tests proves they compile, and the suite runs them on the emulator.
    .testTarget(
      name: "ExamplesTests", dependencies: ["StorageCore", "StorageEmulator"],
      swiftSettings: [.swiftLanguageMode(.v5)]),
  ],
  swiftLanguageModes: [.v6]
)
