// Bucket methods: list by project, insert, get, patch and delete. Every bucket a client names
// exists (see `BucketRegistry`), so get answers any name; list shows the buckets made with
// insert for that project and every bucket that holds objects.
import Foundation

extension GCSRoutes {
  func buckets(_ request: inout ServerRequest) -> ServerResponse {
    switch request.method {
    case "GET":
      guard let project = request.query["project"], !project.isEmpty else {
        return Self.error(400, "required", "Required parameter: project")
      }
      let prefix = request.query["prefix"] ?? ""
      var names = Set(store.bucketsWithObjects())
      for name in registry.names() where registry.info(name).project == project { names.insert(name) }
      var sorted = names.filter { $0.hasPrefix(prefix) }.sorted()
      if let token = request.query["pageToken"] { sorted = sorted.filter { $0 > token } }
      let pageSize = min(Int(request.query["maxResults"] ?? "") ?? 1000, 1000)
      var body: [String: Any] = ["kind": "storage#buckets"]
      let page = sorted.prefix(max(pageSize, 1))
      if !page.isEmpty { body["items"] = page.map { resource(registry.info($0)) } }
      if page.count < sorted.count, let last = page.last { body["nextPageToken"] = last }
      return .json(200, body)
    case "POST":
      let body = (try? request.body.readAll(limit: 1 << 20)) ?? Data()
      let json = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any]
      guard let name = json?["name"] as? String else { return Self.error(400, "required", "Required field name is missing") }
      if let problem = BucketRegistry.nameProblem(name) { return Self.error(400, "invalid", problem) }
      let hierarchical = ((json?["hierarchicalNamespace"] as? [String: Any])?["enabled"] as? Bool) ?? false
      guard !store.holdsObjects(name), registry.create(name, project: request.query["project"] ?? "", hierarchical: hierarchical) else {
        return Self.error(
          409, "conflict", "The requested bucket name is not available. The bucket namespace is shared by all users of the system.")
      }
      return .json(200, resource(registry.info(name)))
    default:
      return Self.error(405, "invalid", "method not allowed")
    }
  }

  func bucket(_ name: String, request: inout ServerRequest) -> ServerResponse {
    switch request.method {
    case "GET":
      return .json(200, resource(registry.info(name)))
    case "PATCH", "PUT":
      // Labels, versioning and the like are not kept: the bucket answers as it is.
      _ = try? request.body.readAll(limit: 1 << 20)
      return .json(200, resource(registry.info(name)))
    case "DELETE":
      guard !store.holdsObjects(name) else {
        return Self.error(409, "conflict", "The bucket you tried to delete is not empty.")
      }
      guard registry.isCreated(name) else { return Self.error(404, "notFound", "The specified bucket does not exist.") }
      registry.remove(name)
      folders.removeBucket(name)
      return ServerResponse(status: 204)
    default:
      return Self.error(405, "invalid", "method not allowed")
    }
  }

  private func resource(_ bucket: BucketRegistry.Bucket) -> [String: Any] {
    let created = ObjectRecord.formatTime(bucket.timeCreated)
    var resource: [String: Any] = [
      "kind": "storage#bucket", "id": bucket.name, "name": bucket.name, "projectNumber": "0", "metageneration": "1",
      "location": "US", "locationType": "multi-region", "storageClass": "STANDARD", "etag": "CAE=",
      "timeCreated": created, "updated": created, "rpo": "DEFAULT",
      "iamConfiguration": [
        "bucketPolicyOnly": ["enabled": true], "uniformBucketLevelAccess": ["enabled": true], "publicAccessPrevention": "inherited",
      ],
    ]
    // As GCS answers: the field only on a bucket that has it.
    if bucket.hierarchical == true { resource["hierarchicalNamespace"] = ["enabled": true] }
    return resource
  }
}
