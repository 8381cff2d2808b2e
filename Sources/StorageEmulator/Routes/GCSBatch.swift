import Foundation

extension GCSRoutes {
  func batch(_ request: inout ServerRequest) -> ServerResponse {
    Self.error(501, "notImplemented", "batch")
  }
}
