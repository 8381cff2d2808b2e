// swift-tools-version:6.0
import PackageDescription

let package = Package(
  name: "bucketfs",
  platforms: [.macOS(.v15)],
  products: [
    .executable(name: "bucketfs", targets: ["bucketfs"]),
    // The Firebase Storage API for other packages (Examples/StorageConsumer uses it).
    .library(name: "StorageCore", targets: ["StorageCore"]),
  ],
  targets: [
    .target(name: "CCurl", linkerSettings: [.linkedLibrary("curl")]),
    .target(
      name: "CFuse",
      cSettings: [.define("FUSE_USE_VERSION", to: "35")],
      linkerSettings: [.linkedLibrary("fuse3")]),
    .target(name: "CCrypto", linkerSettings: [.linkedLibrary("crypto")]),
    .target(name: "CZlib", linkerSettings: [.linkedLibrary("z")]),
    .target(name: "CSpawn"),
    .target(name: "CMalloc"),
    // The one way a program is started (Foundation's Process crashes on Linux with this toolchain).
    .target(name: "ChildProcess", dependencies: ["CSpawn"]),
    .target(name: "StorageCore", dependencies: ["CCurl", "CCrypto", "CZlib", "ChildProcess"]),
    .target(name: "ListeningSocket"),
    .target(name: "StorageEmulator", dependencies: ["CCrypto", "CZlib", "ListeningSocket"]),
    .target(name: "BucketFS", dependencies: ["StorageCore", "CCrypto"]),
    .target(name: "FuseBridge", dependencies: ["BucketFS", "CFuse"]),
    .target(
      name: "BucketFSCommand",
      dependencies: [
        "StorageCore", "StorageEmulator", "BucketFS", "FuseBridge", "ListeningSocket", "ChildProcess", "CMalloc",
      ]),
    .executableTarget(name: "bucketfs", dependencies: ["BucketFSCommand"]),
    // What every test target shares: seeded random data, waiting for a condition, running a tool.
    .target(name: "TestSupport", dependencies: ["ChildProcess"], path: "Tests/TestSupport"),
    .testTarget(name: "StorageCoreTests", dependencies: ["StorageCore", "StorageEmulator", "TestSupport", "ChildProcess"]),
    .testTarget(name: "ChildProcessTests", dependencies: ["ChildProcess"]),
    .testTarget(name: "StorageEmulatorTests", dependencies: ["StorageEmulator", "TestSupport"]),
    .testTarget(name: "BucketFSTests", dependencies: ["BucketFS", "StorageCore", "StorageEmulator", "TestSupport", "ChildProcess"]),
    .testTarget(
      name: "MountTests", dependencies: ["BucketFSCommand", "StorageCore", "StorageEmulator", "TestSupport", "ChildProcess"]),
    .testTarget(name: "CommandTests", dependencies: ["StorageEmulator", "TestSupport", "ChildProcess"]),
    // The Firebase pages' Swift examples, unedited, in the Swift 5 mode the pages are written
    // for: building the tests proves they compile, and the suite runs them on the emulator.
    .testTarget(
      name: "ExamplesTests", dependencies: ["StorageCore", "StorageEmulator", "TestSupport"],
      swiftSettings: [.swiftLanguageMode(.v5)]),
  ],
  swiftLanguageModes: [.v6]
)
