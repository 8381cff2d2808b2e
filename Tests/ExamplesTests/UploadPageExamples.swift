// The Swift examples of the Firebase page "Upload files" (Apple platforms), pasted unedited: the build
// proves they compile against StorageCore in Swift 5 mode, and ExamplesTests runs them against
// the emulator. Each is wrapped in a function whose parameters are the names the page takes
// from its surroundings (`storage`, `storageRef`, `localFile`, …). The UIKit and FirebaseUI
// names come from UIKitStandIns.swift. Do not reformat the bodies: they are the specification.
import Foundation
import StorageCore

/// "Create a reference"
func uploadReferences(storage: Storage) {
  // Create a root reference
  let storageRef = storage.reference()

  // Create a reference to "mountains.jpg"
  let mountainsRef = storageRef.child("mountains.jpg")

  // Create a reference to 'images/mountains.jpg'
  let mountainImagesRef = storageRef.child("images/mountains.jpg")

  // While the file names are the same, the references point to different files
  mountainsRef.name == mountainImagesRef.name            // true
  mountainsRef.fullPath == mountainImagesRef.fullPath    // false
}

/// "Upload from data in memory"
func uploadFromMemory(storageRef: StorageReference) {
  // Data in memory
  let data = Data()

  // Create a reference to the file you want to upload
  let riversRef = storageRef.child("images/rivers.jpg")

  // Upload the file to the path "images/rivers.jpg"
  let uploadTask = riversRef.putData(data, metadata: nil) { (metadata, error) in
    guard let metadata = metadata else {
      // Uh-oh, an error occurred!
      return
    }
    // Metadata contains file metadata such as size, content-type.
    let size = metadata.size
    // You can also access to download URL after upload.
    riversRef.downloadURL { (url, error) in
      guard let downloadURL = url else {
        // Uh-oh, an error occurred!
        return
      }
    }
  }
}

/// "Upload from a local file"
func uploadFromLocalFile(storageRef: StorageReference) {
  // File located on disk
  let localFile = URL(string: "path/to/image")!

  // Create a reference to the file you want to upload
  let riversRef = storageRef.child("images/rivers.jpg")

  // Upload the file to the path "images/rivers.jpg"
  let uploadTask = riversRef.putFile(from: localFile, metadata: nil) { metadata, error in
    guard let metadata = metadata else {
      // Uh-oh, an error occurred!
      return
    }
    // Metadata contains file metadata such as size, content-type.
    let size = metadata.size
    // You can also access to download URL after upload.
    riversRef.downloadURL { (url, error) in
      guard let downloadURL = url else {
        // Uh-oh, an error occurred!
        return
      }
    }
  }
}

/// "Add file metadata"
func addFileMetadata(storageRef: StorageReference, data: Data, localFile: URL) {
  // Create storage reference
  let mountainsRef = storageRef.child("images/mountains.jpg")

  // Create file metadata including the content type
  let metadata = StorageMetadata()
  metadata.contentType = "image/jpeg"

  // Upload data and metadata
  mountainsRef.putData(data, metadata: metadata)

  // Upload file and metadata
  mountainsRef.putFile(from: localFile, metadata: metadata)
}

/// "Manage uploads"
func manageUploads(storageRef: StorageReference, localFile: URL) {
  // Start uploading a file
  let uploadTask = storageRef.putFile(from: localFile)

  // Pause the upload
  uploadTask.pause()

  // Resume the upload
  uploadTask.resume()

  // Cancel the upload
  uploadTask.cancel()
}

/// "Monitor upload progress"
func monitorUploadProgress(uploadTask: StorageUploadTask) {
  // Add a progress observer to an upload task
  let observer = uploadTask.observe(.progress) { snapshot in
    // A progress event occured
  }
}

/// "Remove observers"
func removeUploadObservers(uploadTask: StorageUploadTask) {
  // Create a task listener handle
  let observer = uploadTask.observe(.progress) { snapshot in
    // A progress event occurred
  }

  // Remove an individual observer
  uploadTask.removeObserver(withHandle: observer)

  // Remove all observers of a particular status
  uploadTask.removeAllObservers(for: .progress)

  // Remove all observers
  uploadTask.removeAllObservers()
}

/// "Full example"
func fullUploadExample(storageRef: StorageReference) {
  // Local file you want to upload
  let localFile = URL(string: "path/to/image")!

  // Create the file metadata
  let metadata = StorageMetadata()
  metadata.contentType = "image/jpeg"

  // Upload file and metadata to the object 'images/mountains.jpg'
  let uploadTask = storageRef.putFile(from: localFile, metadata: metadata)

  // Listen for state changes, errors, and completion of the upload.
  uploadTask.observe(.resume) { snapshot in
    // Upload resumed, also fires when the upload starts
  }

  uploadTask.observe(.pause) { snapshot in
    // Upload paused
  }

  uploadTask.observe(.progress) { snapshot in
    // Upload reported progress
    let percentComplete = 100.0 * Double(snapshot.progress!.completedUnitCount)
      / Double(snapshot.progress!.totalUnitCount)
  }

  uploadTask.observe(.success) { snapshot in
    // Upload completed successfully
  }

  uploadTask.observe(.failure) { snapshot in
    if let error = snapshot.error as? NSError {
      switch (StorageErrorCode(rawValue: error.code)!) {
      case .objectNotFound:
        // File doesn't exist
        break
      case .unauthorized:
        // User doesn't have permission to access file
        break
      case .cancelled:
        // User canceled the upload
        break

      /* ... */

      case .unknown:
        // Unknown error occurred, inspect the server response
        break
      default:
        // A separate error occurred. This is a good place to retry the upload.
        break
      }
    }
  }
}
