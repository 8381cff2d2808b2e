/// Content types inferred from a file name's extension when an upload does not give one.
package enum ContentType {
  package static let fallback = "application/octet-stream"

  static let byExtension: [String: String] = [
    "txt": "text/plain", "text": "text/plain", "md": "text/markdown", "csv": "text/csv",
    "tsv": "text/tab-separated-values", "html": "text/html", "htm": "text/html", "css": "text/css",
    "js": "text/javascript", "mjs": "text/javascript", "json": "application/json",
    "xml": "application/xml", "yaml": "application/yaml", "yml": "application/yaml",
    "png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif",
    "webp": "image/webp", "svg": "image/svg+xml", "ico": "image/vnd.microsoft.icon",
    "bmp": "image/bmp", "tif": "image/tiff", "tiff": "image/tiff", "heic": "image/heic",
    "avif": "image/avif", "pdf": "application/pdf", "zip": "application/zip",
    "gz": "application/gzip", "tgz": "application/gzip", "tar": "application/x-tar",
    "bz2": "application/x-bzip2", "xz": "application/x-xz", "7z": "application/x-7z-compressed",
    "mp3": "audio/mpeg", "wav": "audio/wav", "ogg": "audio/ogg", "flac": "audio/flac",
    "m4a": "audio/mp4", "mp4": "video/mp4", "m4v": "video/mp4", "mov": "video/quicktime",
    "webm": "video/webm", "mkv": "video/x-matroska", "avi": "video/x-msvideo",
    "wasm": "application/wasm", "sqlite": "application/vnd.sqlite3", "db": "application/vnd.sqlite3",
    "woff": "font/woff", "woff2": "font/woff2", "ttf": "font/ttf", "otf": "font/otf",
    "doc": "application/msword",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "sh": "application/x-sh", "py": "text/x-python", "swift": "text/x-swift", "c": "text/x-c",
    "h": "text/x-c", "log": "text/plain", "ics": "text/calendar", "rtf": "application/rtf",
    "epub": "application/epub+zip", "apk": "application/vnd.android.package-archive",
  ]

  /// The type for `name`'s extension (case-insensitive), or `application/octet-stream`.
  package static func infer(fromName name: String) -> String {
    let last = name.slashSegments(omittingEmpty: true).last ?? name
    guard let dot = last.lastIndex(of: "."), dot != last.startIndex else { return fallback }
    let ext = last[last.index(after: dot)...].lowercased()
    return byExtension[ext] ?? fallback
  }
}
