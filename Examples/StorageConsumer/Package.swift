// swift-tools-version:6.0
// Another package using bucketfs's Firebase Storage API as a library: it depends on this
// repository by path and imports StorageCore, as any package on Linux would.
import PackageDescription

let package = Package(
  name: "StorageConsumer",
  dependencies: [.package(name: "bucketfs", path: "../..")],
  targets: [
    .executableTarget(
      name: "StorageConsumer",
      dependencies: [.product(name: "StorageCore", package: "bucketfs")],
      // The Firebase pages write Swift 5.
      swiftSettings: [.swiftLanguageMode(.v5)])
  ]
)
