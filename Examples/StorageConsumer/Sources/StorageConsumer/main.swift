// The Firebase page "Upload files" (Apple platforms): "Upload from data in memory", then
// "Download in memory", run against an emulator named by FIREBASE_STORAGE_EMULATOR_HOST.
// Exits 0 only when the bytes read back are the bytes written; prints the download URL, which
// scripts/test.sh fetches with curl.
import Foundation
import StorageCore

func fail(_ why: String) -> Never {
  FileHandle.standardError.write(Data("StorageConsumer: \(why)\n".utf8))
  exit(1)
}

guard let host = ProcessInfo.processInfo.environment["FIREBASE_STORAGE_EMULATOR_HOST"],
  let colon = host.lastIndex(of: ":"), let port = Int(host[host.index(after: colon)...])
else { fail("set FIREBASE_STORAGE_EMULATOR_HOST=127.0.0.1:PORT") }

let storage = Storage.storage(url: "gs://consumer-bucket")
storage.useEmulator(withHost: String(host[..<colon]), port: port)
let storageRef = storage.reference()
let done = DispatchSemaphore(value: 0)
let sent = Data((0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })

// Upload from data in memory
let riversRef = storageRef.child("images/rivers.jpg")
var uploadedSize: Int64 = -1
var downloadURL: URL?
let uploadTask = riversRef.putData(sent, metadata: nil) { (metadata, error) in
  guard let metadata = metadata else {
    fail("upload: \(error.map { "\($0)" } ?? "no metadata")")
  }
  // Metadata contains file metadata such as size, content-type.
  uploadedSize = metadata.size
  // You can also access to download URL after upload.
  riversRef.downloadURL { (url, error) in
    guard let url = url else { fail("downloadURL: \(error.map { "\($0)" } ?? "no URL")") }
    downloadURL = url
    done.signal()
  }
}
done.wait()
guard uploadedSize == Int64(sent.count) else { fail("the upload reported \(uploadedSize) bytes, not \(sent.count)") }

// Download in memory with a maximum allowed size of 1MB (1 * 1024 * 1024 bytes)
var received: Data?
riversRef.getData(maxSize: 1 * 1024 * 1024) { data, error in
  if let error = error { fail("download: \(error)") }
  received = data
  done.signal()
}
done.wait()
guard received == sent else { fail("the bytes read back differ from those written") }
guard let url = downloadURL, url.absoluteString.contains("token=") else { fail("no download URL with a token") }
print(url.absoluteString)
