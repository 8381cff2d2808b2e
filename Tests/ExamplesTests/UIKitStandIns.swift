// The pages' UIKit and FirebaseUI lines (`UIImage`, `UIImageView`, SDWebImage's
// `sd_setImage(with:placeholderImage:)`) have no Linux counterpart; these stand-ins let those
// lines compile unedited, and do the nearest thing: the image view loads the object's bytes.
import Foundation
import StorageCore

struct UIImage: Sendable {
  let data: Data
  init?(data: Data) {
    guard !data.isEmpty else { return nil }
    self.data = data
  }
  init?(named: String) { return nil }
}

final class UIImageView: @unchecked Sendable {
  private let lock = NSLock()
  private var loaded: UIImage?
  var image: UIImage? { lock.withLock { loaded } }

  /// FirebaseUI's loader: fetches the object (up to 10 MiB) and shows it.
  func sd_setImage(with reference: StorageReference, placeholderImage: UIImage?) {
    lock.withLock { loaded = placeholderImage }
    reference.getData(maxSize: 10 << 20) { data, _ in
      if let data, let image = UIImage(data: data) { self.lock.withLock { self.loaded = image } }
    }
  }
}
