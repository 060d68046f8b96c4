import PushCore
import PushSandbox

/// Behaves like a customer push proxy (BlackBerry Spark protocol 0.2): validates the
/// request entity as the spec defines it and answers 400 when it is wrong. Answers are
/// scripted by the `userId` prefix:
///
/// | prefix     | answer                          |
/// |------------|---------------------------------|
/// | `unknown-` | 403 (user unknown)              |
/// | `gone-`    | 404 (proxy not operational)     |
/// | `flaky-`   | 500                             |
/// | `busy-`    | 503 with `Retry-After: 1`       |
/// | `ringing-` | calls (`isStatus` false) 503 with `Retry-After: 1`; status pushes (cancels) 200 |
/// | `slow-`    | 200 after 2 s                   |
/// | `hang-`    | 200 after 60 s (a stalled endpoint) |
/// | otherwise  | 200                             |
public enum ProxySandbox {
    public static let path = "/push"

    public static func respond(to request: SandboxRequest) -> SandboxResponse {
        guard request.method == "POST", request.path == path else { return SandboxResponse(status: 404) }
        guard request.header("content-type")?.hasPrefix("application/json") == true else {
            return SandboxResponse(status: 400, body: Array("content-type must be application/json".utf8))
        }
        let userId: String
        switch validate(request.body) {
        case .success(let user): userId = user
        case .failure(let problem): return SandboxResponse(status: 400, body: Array(problem.message.utf8))
        }
        if userId.hasPrefix("unknown-") { return SandboxResponse(status: 403) }
        if userId.hasPrefix("gone-") { return SandboxResponse(status: 404) }
        if userId.hasPrefix("flaky-") { return SandboxResponse(status: 500) }
        if userId.hasPrefix("busy-") { return SandboxResponse(status: 503, headers: [("retry-after", "1")]) }
        if userId.hasPrefix("ringing-"), (try? JSONParser.parse(request.body))?["isStatus"] != .bool(true) {
            return SandboxResponse(status: 503, headers: [("retry-after", "1")])
        }
        if userId.hasPrefix("slow-") { return SandboxResponse(status: 200, delay: .seconds(2)) }
        if userId.hasPrefix("hang-") { return SandboxResponse(status: 200, delay: .seconds(60)) }
        return SandboxResponse(status: 200)
    }

    public struct Problem: Error { public let message: String }

    /// Checks the entity against the spec; returns its userId.
    public static func validate(_ body: [UInt8]) -> Result<String, Problem> {
        func problem(_ message: String) -> Result<String, Problem> { .failure(Problem(message: message)) }
        guard let document = try? JSONParser.parse(body), case .object(let members) = document else {
            return problem("body is not a JSON object")
        }
        let allowed: Set<String> = ["version", "expiry", "userId", "isStatus", "body", "endpointData"]
        if let unknown = members.first(where: { !allowed.contains($0.key) }) { return problem("unknown field \(unknown.key)") }
        guard document["version"] == .string("0.2") else { return problem("version must be \"0.2\"") }
        guard case .integer(let expiry)? = document["expiry"], expiry >= 0 else { return problem("expiry must be a number ≥ 0") }
        guard case .string(let userId)? = document["userId"], !userId.isEmpty else { return problem("userId is required") }
        if let isStatus = document["isStatus"], case .bool = isStatus {
        } else if document["isStatus"] != nil {
            return problem("isStatus must be a boolean")
        }
        guard case .string? = document["body"] else { return problem("body is required and must be a string") }
        guard case .array(let endpoints)? = document["endpointData"], !endpoints.isEmpty else {
            return problem("endpointData must be a non-empty array")
        }
        for endpoint in endpoints {
            guard case .string(let endpointId)? = endpoint["endpointId"], !endpointId.isEmpty else {
                return problem("endpointId is required")
            }
            if let platform = endpoint["platform"], !isString(platform, in: ["android", "ios", "web", "node"]) {
                return problem("platform must be android, ios, web or node")
            }
            if let tokenType = endpoint["tokenType"] {
                guard isString(tokenType, in: ["fcm", "apns", "apnsVoip", "cookie"]) else {
                    return problem("tokenType must be fcm, apns, apnsVoip or cookie")
                }
                guard case .string(let token)? = endpoint["token"], token.utf8.count <= 4096 else {
                    return problem("token is required with tokenType and at most 4096 bytes")
                }
            }
            if let pushType = endpoint["pushType"], !isString(pushType, in: ["im", "voip"]) {
                return problem("pushType must be im or voip")
            }
        }
        return .success(userId)
    }

    private static func isString(_ value: JSONValue, in allowed: Set<String>) -> Bool {
        if case .string(let string) = value { return allowed.contains(string) }
        return false
    }
}

extension ProxySandbox {
    /// The fault key of a push-proxy request: its first endpointId (the job's bindingId).
    public static func endpointId(of request: SandboxRequest) -> String? {
        guard let document = try? JSONParser.parse(request.body), case .array(let endpoints)? = document["endpointData"],
            case .string(let id)? = endpoints.first?["endpointId"]
        else { return nil }
        return id
    }
}
