// The Swift examples of the Firebase page "Download files" (Apple platforms), pasted unedited: the build
// proves they compile against StorageCore in Swift 5 mode, and ExamplesTests runs them against
// the emulator. Each is wrapped in a function whose parameters are the names the page takes
// from its surroundings (`storage`, `storageRef`, `localFile`, …). The UIKit and FirebaseUI
// names come from UIKitStandIns.swift. Do not reformat the bodies: they are the specification.
import Foundation
import StorageCore

/// "Create a reference"
func createReferences(storage: Storage) {
  // Create a reference with an initial file path and name
  let pathReference = storage.reference(withPath: "images/stars.jpg")

  // Create a reference from a Google Cloud Storage URI
  let gsReference = storage.reference(forURL: "gs://<your-firebase-storage-bucket>/images/stars.jpg")

  // Create a reference from an HTTPS URL
  // Note that in the URL, characters are URL escaped!
  let httpsReference = storage.reference(forURL: "https://firebasestorage.googleapis.com/b/bucket/o/images%20stars.jpg")
}

/// "Download in memory"
func downloadInMemory(storageRef: StorageReference) {
  // Create a reference to the file you want to download
  let islandRef = storageRef.child("images/island.jpg")

  // Download in memory with a maximum allowed size of 1MB (1 * 1024 * 1024 bytes)
  islandRef.getData(maxSize: 1 * 1024 * 1024) { data, error in
    if let error = error {
      // Uh-oh, an error occurred!
    } else {
      // Data for "images/island.jpg" is returned
      let image = UIImage(data: data!)
    }
  }
}

/// "Download to a local file"
func downloadToLocalFile(storageRef: StorageReference) {
  // Create a reference to the file you want to download
  let islandRef = storageRef.child("images/island.jpg")

  // Create local filesystem URL
  let localURL = URL(string: "path/to/image")!

  // Download to the local filesystem
  let downloadTask = islandRef.write(toFile: localURL) { url, error in
    if let error = error {
      // Uh-oh, an error occurred!
    } else {
      // Local file URL for "images/island.jpg" is returned
    }
  }
}

/// "Generate a download URL"
func generateDownloadURL(storageRef: StorageReference) {
  // Create a reference to the file you want to download
  let starsRef = storageRef.child("images/stars.jpg")

  // Fetch the download URL
  starsRef.downloadURL { url, error in
    if let error = error {
      // Handle any errors
    } else {
      // Get the download URL for 'images/stars.jpg'
    }
  }
}

/// "Download images with FirebaseUI": inside a view controller, as the page assumes.
final class ImageViewController {
  var imageView = UIImageView()

  func loadWithFirebaseUI(storageRef: StorageReference) {
    // Reference to an image file in Firebase Storage
    let reference = storageRef.child("images/stars.jpg")

    // UIImageView in your ViewController
    let imageView: UIImageView = self.imageView

    // Placeholder image
    let placeholderImage = UIImage(named: "placeholder.jpg")

    // Load the image using SDWebImage
    imageView.sd_setImage(with: reference, placeholderImage: placeholderImage)
  }
}

/// "Manage downloads"
func manageDownloads(storageRef: StorageReference, localFile: URL) {
  // Start downloading a file
  let downloadTask = storageRef.child("images/mountains.jpg").write(toFile: localFile)

  // Pause the download
  downloadTask.pause()

  // Resume the download
  downloadTask.resume()

  // Cancel the download
  downloadTask.cancel()
}

/// "Monitor download progress"
func monitorDownloadProgress(downloadTask: StorageDownloadTask) {
  // Add a progress observer to a download task
  let observer = downloadTask.observe(.progress) { snapshot in
    // A progress event occurred
  }
}

/// "Remove observers"
func removeDownloadObservers(downloadTask: StorageDownloadTask) {
  // Create a task listener handle
  let observer = downloadTask.observe(.progress) { snapshot in
  // A progress event occurred
  }

  // Remove an individual observer
  downloadTask.removeObserver(withHandle: observer)

  // Remove all observers of a particular status
  downloadTask.removeAllObservers(for: .progress)

  // Remove all observers
  downloadTask.removeAllObservers()
}

/// "Full example"
func fullDownloadExample(storageRef: StorageReference, localURL: URL) {
  // Create a reference to the file we want to download
  let starsRef = storageRef.child("images/stars.jpg")

  // Start the download (in this case writing to a file)
  let downloadTask = storageRef.write(toFile: localURL)

  // Observe changes in status
  downloadTask.observe(.resume) { snapshot in
    // Download resumed, also fires when the download starts
  }

  downloadTask.observe(.pause) { snapshot in
    // Download paused
  }

  downloadTask.observe(.progress) { snapshot in
    // Download reported progress
    let percentComplete = 100.0 * Double(snapshot.progress!.completedUnitCount)
      / Double(snapshot.progress!.totalUnitCount)
  }

  downloadTask.observe(.success) { snapshot in
    // Download completed successfully
  }

  // Errors only occur in the "Failure" case
  downloadTask.observe(.failure) { snapshot in
    guard let errorCode = (snapshot.error as? NSError)?.code else {
      return
    }
    guard let error = StorageErrorCode(rawValue: errorCode) else {
      return
    }
    switch (error) {
    case .objectNotFound:
      // File doesn't exist
      break
    case .unauthorized:
      // User doesn't have permission to access file
      break
    case .cancelled:
      // User cancelled the download
      break

    /* ... */

    case .unknown:
      // Unknown error occurred, inspect the server response
      break
    default:
      // Another error occurred. This is a good place to retry the download.
      break
    }
  }
}
