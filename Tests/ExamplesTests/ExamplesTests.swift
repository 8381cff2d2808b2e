import Foundation
import TestSupport
import StorageCore
import StorageEmulator
import Testing

/// An emulator, a storage pointed at it, and a scratch folder that is the working directory while
/// the pages' examples run (they write `path/to/image` relative to it).
final class PageFixture: @unchecked Sendable {
  let root: URL
  let emulator: StorageEmulator
  let storage: Storage
  static let cwdLock = NSLock()

  init() throws {
    root = FileManager.default.temporaryDirectory.appendingPathComponent("bucketfs-examples-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
    var config = StorageEmulator.Configuration(root: root.appendingPathComponent("server"))
    config.port = 0
    emulator = try StorageEmulator(config)
    storage = Storage(bucket: "examples-bucket")
    storage.useEmulator(withHost: "127.0.0.1", port: emulator.port)
    storage.retryInitialDelay = 0.05
  }

  var storageRef: StorageReference { storage.reference() }

  func put(_ path: String, _ data: Data) async throws {
    _ = try await storage.reference(withPath: path).putDataAsync(data)
  }

  /// Waits until `condition` holds (the examples start work and return at once).
  func eventually(_ what: String, _ condition: @escaping () async -> Bool) async {
    for _ in 0..<200 {
      if await condition() { return }
      try? await Task.sleep(for: .milliseconds(50))
    }
    Issue.record("never happened: \(what)")
  }

  func metadata(_ path: String) async -> StorageMetadata? {
    try? await storage.reference(withPath: path).getMetadata()
  }

  deinit {
    emulator.stop()
    try? FileManager.default.removeItem(at: root)
  }
}

/// The pages' examples, run as written against the emulator, with their effects checked.
@Suite(.serialized) struct PageExampleRuns {
  @Test func uploadPageExamplesDoWhatThePageSays() async throws {
    let fx = try PageFixture()
    let scratch = fx.root.appendingPathComponent("cwd")
    try FileManager.default.createDirectory(at: scratch.appendingPathComponent("path/to"), withIntermediateDirectories: true)
    let photo = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
    try photo.write(to: scratch.appendingPathComponent("path/to/image"))
    PageFixture.cwdLock.lock()
    let previous = FileManager.default.currentDirectoryPath
    FileManager.default.changeCurrentDirectoryPath(scratch.path)
    defer {
      FileManager.default.changeCurrentDirectoryPath(previous)
      PageFixture.cwdLock.unlock()
    }
    uploadReferences(storage: fx.storage)
    uploadFromMemory(storageRef: fx.storageRef)
    await fx.eventually("images/rivers.jpg uploaded from memory") { await fx.metadata("images/rivers.jpg") != nil }
    uploadFromLocalFile(storageRef: fx.storageRef)
    await fx.eventually("images/rivers.jpg uploaded from path/to/image") {
      await fx.metadata("images/rivers.jpg")?.size == Int64(photo.count)
    }
    addFileMetadata(storageRef: fx.storageRef, data: Data("jpeg".utf8), localFile: URL(string: "path/to/image")!)
    await fx.eventually("images/mountains.jpg uploaded as image/jpeg") {
      await fx.metadata("images/mountains.jpg")?.contentType == "image/jpeg"
    }
    // The page's full example uploads to `storageRef`: give it an object's reference.
    fullUploadExample(storageRef: fx.storage.reference(withPath: "images/full.jpg"))
    await fx.eventually("images/full.jpg uploaded with its metadata") {
      let m = await fx.metadata("images/full.jpg")
      return m?.contentType == "image/jpeg" && m?.size == Int64(photo.count)
    }
    // Started and cancelled at once: nothing may be left half-made.
    manageUploads(storageRef: fx.storage.reference(withPath: "images/cancelled.jpg"), localFile: URL(string: "path/to/image")!)
    let task = fx.storage.reference(withPath: "images/watched.jpg").putData(photo)
    monitorUploadProgress(uploadTask: task)
    removeUploadObservers(uploadTask: task)
    try await task.result()
    // Once no transfer of this instance runs, nothing can make the cancelled object any more.
    await fx.eventually("every upload has stopped") { fx.storage.transfersRunning.load(ordering: .relaxed) == 0 }
    #expect(await fx.metadata("images/cancelled.jpg") == nil)
  }

  @Test func downloadPageExamplesDoWhatThePageSays() async throws {
    let fx = try PageFixture()
    let island = Data((0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 13) })
    let stars = Data("stars".utf8)
    try await fx.put("images/island.jpg", island)
    try await fx.put("images/stars.jpg", stars)
    try await fx.put("images/mountains.jpg", Data(repeating: 1, count: 4 << 20))
    let scratch = fx.root.appendingPathComponent("cwd")
    try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
    PageFixture.cwdLock.lock()
    let previous = FileManager.default.currentDirectoryPath
    FileManager.default.changeCurrentDirectoryPath(scratch.path)
    defer {
      FileManager.default.changeCurrentDirectoryPath(previous)
      PageFixture.cwdLock.unlock()
    }
    downloadInMemory(storageRef: fx.storageRef)
    generateDownloadURL(storageRef: fx.storageRef)
    downloadToLocalFile(storageRef: fx.storageRef)
    let local = scratch.appendingPathComponent("path/to/image")
    await fx.eventually("path/to/image holds images/island.jpg") { (try? Data(contentsOf: local)) == island }
    let controller = ImageViewController()
    controller.loadWithFirebaseUI(storageRef: fx.storageRef)
    await fx.eventually("the image view shows images/stars.jpg") { controller.imageView.image?.data == stars }
    let copy = scratch.appendingPathComponent("copy.bin")
    manageDownloads(storageRef: fx.storageRef, localFile: copy)
    // The page's full example downloads `storageRef`: give it an object's reference.
    let starsCopy = scratch.appendingPathComponent("stars-copy.jpg")
    fullDownloadExample(storageRef: fx.storage.reference(withPath: "images/stars.jpg"), localURL: starsCopy)
    await fx.eventually("the full example's download") { (try? Data(contentsOf: starsCopy)) == stars }
    let task = fx.storage.reference(withPath: "images/mountains.jpg").write(toFile: scratch.appendingPathComponent("m.bin"))
    monitorDownloadProgress(downloadTask: task)
    removeDownloadObservers(downloadTask: task)
    try await task.result()
    // manageDownloads cancelled its download: no file, no partial file, once no download runs.
    await fx.eventually("every download has stopped") { fx.storage.transfersRunning.load(ordering: .relaxed) == 0 }
    let leftovers = try FileManager.default.contentsOfDirectory(atPath: scratch.path).filter { $0.contains("copy.bin") }
    #expect(leftovers.isEmpty, "\(leftovers)")
  }
}

/// The flows the pages describe, in their words, with every outcome checked.
@Suite struct DocumentedFlows {
  @Test func uploadWithMetadataKeepsTheCallersObject() async throws {
    let fx = try PageFixture()
    let metadata = StorageMetadata()
    metadata.contentType = "image/jpeg"
    metadata.customMetadata = ["location": "Yosemite, CA, USA", "activity": "Hiking"]
    let ref = fx.storage.reference(withPath: "images/mountains.jpg")
    let uploaded = try await ref.putDataAsync(Data("jpeg bytes".utf8), metadata: metadata)
    #expect(uploaded.contentType == "image/jpeg")
    #expect(uploaded.customMetadata == ["location": "Yosemite, CA, USA", "activity": "Hiking"])
    #expect(uploaded.isFile && !uploaded.isFolder)
    #expect(uploaded.name == "mountains.jpg" && uploaded.path == "images/mountains.jpg")
    #expect(uploaded.storageReference == ref)
    #expect(uploaded !== metadata)
    // The caller's object is untouched by the upload (nothing filled in, nothing shared).
    #expect(metadata.size == 0 && metadata.path == nil)
    let untyped = StorageMetadata()
    _ = try await fx.storage.reference(withPath: "notes.txt").putDataAsync(Data("x".utf8), metadata: untyped)
    #expect(untyped.contentType == nil)
    let again = StorageMetadata(dictionary: uploaded.dictionaryRepresentation())
    #expect(again == uploaded)
  }

  @Test func getDataUnderAndOverTheLimit() async throws {
    let fx = try PageFixture()
    try await fx.put("images/island.jpg", Data(repeating: 7, count: 2 << 20))
    let islandRef = fx.storageRef.child("images/island.jpg")
    let under: (Data?, Error?) = await withCheckedContinuation { cont in
      islandRef.getData(maxSize: 4 * 1024 * 1024) { data, error in cont.resume(returning: (data, error)) }
    }
    #expect(under.0?.count == 2 << 20 && under.1 == nil)
    let over: (Data?, Error?) = await withCheckedContinuation { cont in
      islandRef.getData(maxSize: 1 * 1024 * 1024) { data, error in cont.resume(returning: (data, error)) }
    }
    #expect(over.0 == nil)
    #expect((over.1 as? NSError)?.code == StorageErrorCode.downloadSizeExceeded.rawValue)
    #expect((over.1 as? NSError)?.domain == StorageErrorDomain)
    // The async form.
    let data = try await islandRef.data(maxSize: 4 << 20)
    #expect(data.count == 2 << 20)
    do {
      _ = try await islandRef.data(maxSize: 1000)
      Issue.record("data(maxSize:) returned an object over the limit")
    } catch let error as StorageError {
      guard case .downloadSizeExceeded(_, let maxSize) = error else {
        Issue.record("wrong case: \(error)")
        return
      }
      #expect(maxSize == 1000)
    }
  }

  /// The download page's error handling, as written: a missing object reaches `.objectNotFound`.
  @Test func missingObjectReachesObjectNotFoundThroughTheFailureObserver() async throws {
    let fx = try PageFixture()
    let starsRef = fx.storageRef.child("images/missing.jpg")
    let localURL = fx.root.appendingPathComponent("missing.jpg")
    let downloadTask = starsRef.write(toFile: localURL)
    let reached: StorageErrorCode? = await withCheckedContinuation { cont in
      downloadTask.observe(.failure) { snapshot in
        guard let errorCode = (snapshot.error as? NSError)?.code else {
          cont.resume(returning: nil)
          return
        }
        guard let error = StorageErrorCode(rawValue: errorCode) else {
          cont.resume(returning: nil)
          return
        }
        cont.resume(returning: error)
      }
    }
    #expect(reached == .objectNotFound)
    #expect(!FileManager.default.fileExists(atPath: localURL.path))
    // Also as the enum, and through the completion form.
    let result: Result<URL, Error> = await withCheckedContinuation { cont in
      starsRef.write(toFile: localURL) { (result: Result<URL, Error>) in cont.resume(returning: result) }
    }
    guard case .failure(let error) = result, case .objectNotFound(let object, _)? = error.asStorageError else {
      Issue.record("expected objectNotFound, got \(result)")
      return
    }
    #expect(object == "images/missing.jpg")
  }

  @Test func downloadURLListUpdateAndDelete() async throws {
    let fx = try PageFixture()
    for i in 0..<5 { try await fx.put("list/f\(i).txt", Data("\(i)".utf8)) }
    try await fx.put("list/sub/x.txt", Data("x".utf8))
    let starsRef = fx.storageRef.child("list/f1.txt")
    let url: URL? = await withCheckedContinuation { cont in starsRef.downloadURL { url, _ in cont.resume(returning: url) } }
    let link = try #require(url)
    #expect(link.absoluteString.contains("alt=media&token="))
    let fetched = try await HTTPClient.shared.send(HTTPRequest(method: "GET", url: link.absoluteString))
    #expect(fetched.status == 200 && fetched.body == Data("1".utf8))

    // Pages of two, then everything.
    let folder = fx.storageRef.child("list")
    let first = try await folder.list(maxResults: 2)
    // Only items count toward maxResults; prefixes come on every page (the official emulator's
    // paging, firebase-tools `src/emulator/storage/files.ts`).
    #expect(first.items.count == 2)
    let token = try #require(first.pageToken)
    let second: StorageListResult? = await withCheckedContinuation { cont in
      folder.list(maxResults: 2, pageToken: token) { result, _ in cont.resume(returning: result) }
    }
    #expect(second?.items.count == 2)
    let all: Result<StorageListResult, Error> = await withCheckedContinuation { cont in
      folder.listAll { (result: Result<StorageListResult, Error>) in cont.resume(returning: result) }
    }
    let everything = try all.get()
    #expect(everything.items.map(\.name).sorted() == ["f0.txt", "f1.txt", "f2.txt", "f3.txt", "f4.txt"])
    #expect(everything.prefixes.map(\.fullPath) == ["list/sub"])

    // Update: change one custom key, remove another, clear a field.
    let ref = fx.storageRef.child("list/f2.txt")
    let start = StorageMetadata()
    start.customMetadata = ["keep": "1", "drop": "2"]
    start.contentLanguage = "en"
    _ = try await ref.putDataAsync(Data("2".utf8), metadata: start)
    let current = try await ref.getMetadata()
    current.customMetadata?["drop"] = nil
    current.customMetadata?["keep"] = "one"
    current.contentLanguage = nil
    let updated: StorageMetadata? = await withCheckedContinuation { cont in
      ref.updateMetadata(current) { metadata, _ in cont.resume(returning: metadata) }
    }
    #expect(updated?.customMetadata == ["keep": "one"])
    #expect(updated?.contentLanguage == nil)
    #expect(try await ref.getMetadata().customMetadata == ["keep": "one"])

    // Delete, then the object is gone.
    let deleted: Error?? = await withCheckedContinuation { cont in ref.delete { error in cont.resume(returning: error) } }
    #expect(deleted! == nil)
    let gone: (StorageMetadata?, Error?) = await withCheckedContinuation { cont in
      ref.getMetadata { m, e in cont.resume(returning: (m, e)) }
    }
    #expect((gone.1 as? NSError)?.code == StorageErrorCode.objectNotFound.rawValue)
  }

  /// Progress is reported while the bytes move: a 12 MiB upload and download each give several
  /// events strictly between 0 and 100 %.
  @Test func progressWhileBytesMove() async throws {
    let fx = try PageFixture()
    let ref = fx.storageRef.child("big/twelve.bin")
    let uploadEvents = Fractions()
    _ = try await ref.putDataAsync(Data(repeating: 3, count: 12 << 20)) { progress in
      if let progress { uploadEvents.add(progress.fractionCompleted) }
    }
    #expect(uploadEvents.between0And1 >= 2, "upload progress: \(uploadEvents.all)")
    let downloadEvents = Fractions()
    _ = try await ref.writeAsync(toFile: fx.root.appendingPathComponent("twelve.bin")) { progress in
      if let progress { downloadEvents.add(progress.fractionCompleted) }
    }
    #expect(downloadEvents.between0And1 >= 2, "download progress: \(downloadEvents.all)")
  }

  /// `.resume` fires when a task starts, as the pages say.
  @Test func resumeFiresWhenATaskStarts() async throws {
    let fx = try PageFixture()
    let task = fx.storageRef.child("started.bin").putData(Data(repeating: 1, count: 1 << 20))
    let resumed: Bool = await withCheckedContinuation { cont in task.observe(.resume) { _ in cont.resume(returning: true) } }
    #expect(resumed)
    try await task.result()
  }

  /// Setting up as the pages do.
  @Test func setUpAsThePagesDo() throws {
    let storage = Storage.storage(url: "gs://set-up-bucket")
    #expect(storage.bucket == "set-up-bucket")
    storage.useEmulator(withHost: "127.0.0.1", port: 9199)
    storage.callbackQueue = DispatchQueue(label: "app.callbacks")
    storage.uploadChunkSizeBytes = 1 << 20
    #expect(storage.uploadChunkSizeBytes == 1 << 20)
    #expect(storage.maxOperationRetryTime == 120)
    #expect(storage.maxDownloadRetryTime == 600)
    #expect(storage.maxUploadRetryTime == 600)
    let ref = storage.reference(forURL: "gs://set-up-bucket/images/stars.jpg")
    #expect(ref.fullPath == "images/stars.jpg" && ref.name == "stars.jpg" && ref.bucket == "set-up-bucket")
    let https = storage.reference(forURL: "https://firebasestorage.googleapis.com/v0/b/set-up-bucket/o/images%20stars.jpg")
    #expect(https.fullPath == "images stars.jpg")
    #expect(throws: StorageError.self) { try storage.reference(for: URL(string: "gs://another-bucket/x")!) }
  }
}

/// `StorageError` as the SDK defines it, and as Linux bridges it.
@Suite struct ErrorBridging {
  static let cases: [(StorageError, StorageErrorCode)] = [
    (.unknown(message: "m", serverError: [:]), .unknown),
    (.objectNotFound(object: "a/b", serverError: [:]), .objectNotFound),
    (.bucketNotFound(bucket: "b"), .bucketNotFound),
    (.projectNotFound(project: "p"), .projectNotFound),
    (.quotaExceeded(bucket: "b", serverError: [:]), .quotaExceeded),
    (.unauthenticated(serverError: [:]), .unauthenticated),
    (.unauthorized(bucket: "b", object: "o", serverError: [:]), .unauthorized),
    (.retryLimitExceeded(serverError: [:]), .retryLimitExceeded),
    (.nonMatchingChecksum(serverError: [:]), .nonMatchingChecksum),
    (.downloadSizeExceeded(total: 10, maxSize: 5), .downloadSizeExceeded),
    (.cancelled, .cancelled),
    (.invalidArgument(message: "m"), .invalidArgument),
    (.internalError(message: "m"), .internalError),
    (.bucketMismatch(message: "m"), .bucketMismatch),
    (.pathError(message: "m"), .pathError),
  ]

  @Test func everyCaseHasTheSDKsCodeDomainAndADescription() {
    for (error, code) in Self.cases {
      #expect(error.errorCode == code.rawValue, "\(error)")
      #expect(StorageError.errorDomain == "FIRStorageErrorDomain")
      let bridged = error as NSError
      #expect(bridged.code == code.rawValue && bridged.domain == StorageErrorDomain, "\(error)")
      #expect(!bridged.localizedDescription.isEmpty)
      let optional: Error? = error.asNSError
      #expect((optional as? NSError)?.code == code.rawValue, "\(error)")
      #expect(StorageErrorCode(rawValue: (optional as? NSError)!.code) == code)
      #expect((optional as? NSError)?.storageError?.errorCode == code.rawValue)
    }
    #expect((StorageError.objectNotFound(object: "a/b", serverError: [:]) as NSError).localizedDescription
      == "Object a/b does not exist.")
  }

  /// The Linux additions keep the SDK's code where the SDK's switch looks, and their own code
  /// where a caller who wants it looks.
  @Test func linuxCodesStayReachableWithoutBreakingTheSwitch() {
    let error = StorageError(code: .timedOut, object: "gs://b/o", detail: "the server stopped answering")
    #expect(error.code == .timedOut)
    #expect(error.errorCode == StorageErrorCode.unknown.rawValue)
    let bridged = error.asNSError
    #expect(bridged.code == StorageErrorCode.unknown.rawValue)
    #expect(bridged.userInfo[StorageError.specificCodeKey] as? Int == StorageErrorCode.timedOut.rawValue)
    #expect(bridged.storageError?.code == .timedOut)
    guard case .unknown(let message, _) = error else {
      Issue.record("a timeout is the SDK's unknown")
      return
    }
    #expect(message.contains("stopped answering"))
  }
}

/// Fractions reported by progress handlers (from the callback queue).
final class Fractions: @unchecked Sendable {
  private let lock = NSLock()
  private var values: [Double] = []
  func add(_ value: Double) { lock.withLock { values.append(value) } }
  var all: [Double] { lock.withLock { values } }
  var between0And1: Int { all.filter { $0 > 0 && $0 < 1 }.count }
}

/// The SDK asks Firebase Auth for a fresh ID token, and App Check for its token, before each
/// request; here both are closures.
@Suite struct AuthHooks {
  final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var n = 0
    func token() -> String {
      lock.withLock { n += 1 }
      return "id-token-of-the-user"
    }
    var value: Int { lock.withLock { n } }
  }

  @Test func tokenProviderIsAskedBeforeEachRequestAndAppCheckIsSent() async throws {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("bucketfs-hooks-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: root) }
    var config = StorageEmulator.Configuration(root: root)
    config.port = 0
    config.requiredToken = "id-token-of-the-user"
    config.requiredAppCheckToken = "app-check-token"
    let emulator = try StorageEmulator(config)
    defer { emulator.stop() }
    let storage = Storage(bucket: "hooks")
    storage.useEmulator(withHost: "127.0.0.1", port: emulator.port)
    let asked = Counter()
    storage.authTokenProvider = { asked.token() }
    let ref = storage.reference(withPath: "private/doc.txt")
    // Without App Check, the enforcing server refuses.
    do {
      _ = try await ref.putDataAsync(Data("secret".utf8))
      Issue.record("an upload without App Check went through")
    } catch {
      #expect(error.code == .unauthenticated)
    }
    storage.appCheckTokenProvider = { "app-check-token" }
    _ = try await ref.putDataAsync(Data("secret".utf8))
    let before = asked.value
    _ = try await ref.getMetadata()
    _ = try await ref.data(maxSize: 100)
    #expect(asked.value >= before + 2, "the provider must be asked before each request")
    // A provider that fails: the request is not sent, and its error text is not echoed.
    storage.authTokenProvider = { throw RevokedCredential(secret: "refresh-token-xyz") }
    do {
      _ = try await ref.getMetadata()
      Issue.record("a failing provider still sent the request")
    } catch {
      #expect(error.code == .unauthenticated)
      #expect(!error.description.contains("refresh-token-xyz"))
    }
  }
}

/// A provider's failure whose text must never reach an error message.
struct RevokedCredential: Error {
  let secret: String
}
