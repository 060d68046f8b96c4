import Foundation
import PushCore
import PushSandbox
import PushCrypto
import Synchronization

/// Behaves like Google's OAuth2 token endpoint and FCM's HTTP v1 send API.
///
/// `POST /token`: a JWT-bearer grant whose RS256 assertion must verify with the service
/// account's public key, with `aud` = this endpoint, the firebase.messaging scope and an
/// unexpired `exp` at most an hour after `iat`; answers `{access_token, expires_in}`.
/// `POST /v1/projects/{id}/messages:send`: checks the bearer token (issued here, for that
/// project, not expired), the message shape (token present, data values strings, `android.ttl`
/// like `"30s"`, priority normal/high), and answers `{name}` or Google's error JSON.
/// Scripted by registration-token prefix: `unregistered` 404 UNREGISTERED, `badtoken` 400
/// INVALID_ARGUMENT about message.token, `mismatch` 403 SENDER_ID_MISMATCH, `quota` 429
/// QUOTA_EXCEEDED with Retry-After 1, `unavailable` 503 UNAVAILABLE, `internal` 500 INTERNAL,
/// `thirdparty` 401 THIRD_PARTY_AUTH_ERROR, `apnsauth` 401 APNS_AUTH_ERROR (its older name), `notfound`
/// 404 NOT_FOUND without an FcmError detail, `ratelimited` 429 RESOURCE_EXHAUSTED without a detail or Retry-After.
/// `exhaustQuota(of:retryAfterSeconds:)` runs a project over its quota: every send of it is answered 429
/// RESOURCE_EXHAUSTED with an FcmError QUOTA_EXCEEDED detail (Firebase, "Throttling and quotas": the system "serves
/// HTTP status code 429 RESOURCE_EXHAUSTED ("QUOTA_EXCEEDED") until the quota is refilled"), until `refillQuota(of:)`.
/// As Firebase's Message.data reference requires, data keys `from`, `message_type`, `google…` and `gcm…` and a
/// data-only `apns` block at apns-priority 10 are refused with INVALID_ARGUMENT; so are a payload over 4096 bytes
/// and an `apns-collapse-id` over 64 bytes (`FCMMessageRules`). A path no API serves gets Google's HTML 404 page.
public final class FCMSandbox: Sendable {
    public struct Account: Sendable {
        public let projectId: String
        public let clientEmail: String
        public let publicKey: PublicKey
    }

    private struct Issued {
        let projectId: String
        let expiresAt: Int64
    }

    private let accounts: [String: Account]
    private let tokenURL: String
    private let tokenLifetime: Int64
    private let clock: @Sendable () -> Int64
    private let issued = Mutex<[String: Issued]>([:])
    private let tokenRequests = Atomic<Int>(0)
    private let tokenEndpointDown = Atomic<Bool>(false)
    private let sent = Atomic<Int>(0)
    /// Projects over their quota, with the Retry-After (seconds) their 429 carries, if any.
    private let exhausted = Mutex<[String: Int?]>([:])

    /// - Parameter tokenURL: the URL clients post grants to; assertions must name it as `aud`.
    public init(
        accounts: [Account], tokenURL: String, tokenLifetimeSeconds: Int64 = 3599,
        clock: @escaping @Sendable () -> Int64 = currentTimeMilliseconds
    ) {
        self.accounts = Dictionary(accounts.map { ($0.clientEmail, $0) }) { first, _ in first }
        self.tokenURL = tokenURL
        tokenLifetime = tokenLifetimeSeconds
        self.clock = clock
    }

    public var tokenRequestCount: Int { tokenRequests.load(ordering: .relaxed) }

    /// Forgets every access token issued so far: the next sends get 401 UNAUTHENTICATED.
    public func revokeAccessTokens() { issued.withLock { $0.removeAll() } }

    /// Runs `projectId` over its quota: its sends are answered 429 QUOTA_EXCEEDED (with `Retry-After` when given)
    /// until `refillQuota(of:)`.
    public func exhaustQuota(of projectId: String, retryAfterSeconds: Int? = nil) {
        exhausted.withLock { $0[projectId] = .some(retryAfterSeconds) }
    }

    /// The project's quota is refilled: its sends are answered on their merits again.
    public func refillQuota(of projectId: String) { _ = exhausted.withLock { $0.removeValue(forKey: projectId) } }

    /// While down, the token endpoint answers 503.
    public func setTokenEndpointDown(_ down: Bool) { tokenEndpointDown.store(down, ordering: .relaxed) }

    public func respond(to request: SandboxRequest) -> SandboxResponse {
        guard request.method == "POST" else { return googleError(405, "METHOD_NOT_ALLOWED", "POST only") }
        if request.path == "/token" { return token(request) }
        let parts = request.path.split(separator: "/")
        guard parts.count == 4, parts[0] == "v1", parts[1] == "projects", parts[3] == "messages:send" else {
            // Google's front end answers a URL no API serves with its HTML error page, not the JSON error format.
            return SandboxResponse(
                status: 404, headers: [("content-type", "text/html; charset=UTF-8")],
                body: Array("<!DOCTYPE html><title>Error 404 (Not Found)!!1</title><p>The requested URL was not found on this server.".utf8)
            )
        }
        return send(request, projectId: String(parts[2]))
    }

    private func token(_ request: SandboxRequest) -> SandboxResponse {
        tokenRequests.add(1, ordering: .relaxed)
        if tokenEndpointDown.load(ordering: .relaxed) { return SandboxResponse(status: 503, json: #"{"error":"backend_error"}"#) }
        func invalidGrant(_ description: String) -> SandboxResponse {
            SandboxResponse(status: 400, json: #"{"error":"invalid_grant","error_description":"\#(description)"}"#)
        }
        let form = Dictionary(
            String(decoding: request.body, as: UTF8.self).split(separator: "&").compactMap { pair -> (String, String)? in
                let pieces = pair.split(separator: "=", maxSplits: 1)
                guard pieces.count == 2 else { return nil }
                return (String(pieces[0]), String(pieces[1]).removingPercentEncoding ?? String(pieces[1]))
            }
        ) { first, _ in first }
        guard request.header("content-type")?.hasPrefix("application/x-www-form-urlencoded") == true,
            form["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer", let assertion = form["assertion"]
        else { return SandboxResponse(status: 400, json: #"{"error":"unsupported_grant_type"}"#) }
        guard let jwt = JSONWebToken.parse(assertion), jwt.header["alg"] == .string("RS256"),
            case .string(let issuer)? = jwt.claims["iss"], let account = accounts[issuer]
        else { return invalidGrant("Invalid JWT") }
        guard jwt.verifies(with: account.publicKey) else { return invalidGrant("Invalid JWT Signature.") }
        guard jwt.claims["aud"] == .string(tokenURL) else { return invalidGrant("Invalid JWT: aud") }
        guard case .string(let scope)? = jwt.claims["scope"],
            scope.split(separator: " ").contains("https://www.googleapis.com/auth/firebase.messaging")
        else { return invalidGrant("Invalid scope") }
        let now = clock() / 1000
        guard case .integer(let issuedAt)? = jwt.claims["iat"], case .integer(let expires)? = jwt.claims["exp"],
            expires > now, expires - issuedAt <= 3600, issuedAt <= now + 60
        else { return invalidGrant("Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe.") }
        let token = "ya29.sandbox-\(UUID().uuidString.lowercased())"
        issued.withLock { $0[token] = Issued(projectId: account.projectId, expiresAt: clock() + tokenLifetime * 1000) }
        return SandboxResponse(status: 200, json: #"{"access_token":"\#(token)","expires_in":\#(tokenLifetime),"token_type":"Bearer"}"#)
    }

    private func send(_ request: SandboxRequest, projectId: String) -> SandboxResponse {
        guard let authorization = request.header("authorization"), authorization.hasPrefix("Bearer "),
            let grant = issued.withLock({ $0[String(authorization.dropFirst(7))] }), grant.expiresAt > clock()
        else { return googleError(401, "UNAUTHENTICATED", "Request had invalid authentication credentials.") }
        guard grant.projectId == projectId else {
            return googleError(403, "PERMISSION_DENIED", "Permission denied on project \(projectId)")
        }
        if let retryAfter = exhausted.withLock({ $0[projectId] }) {
            var response = googleError(429, "RESOURCE_EXHAUSTED", "Quota exceeded.", fcmCode: "QUOTA_EXCEEDED")
            if let retryAfter { response.headers.append(("retry-after", String(retryAfter))) }
            return response
        }
        guard let document = try? JSONParser.parse(request.body), let message = document["message"], case .object = message else {
            return googleError(400, "INVALID_ARGUMENT", "Invalid JSON payload received.")
        }
        guard case .string(let token)? = message["token"], !token.isEmpty else {
            return googleError(400, "INVALID_ARGUMENT", "Recipient of the message is not set.", fcmCode: "INVALID_ARGUMENT")
        }
        if case .object(let data)? = message["data"], let bad = data.first(where: { if case .string = $0.value { false } else { true } }) {
            return googleError(
                400, "INVALID_ARGUMENT", "Invalid value at 'message.data[\(bad.key)].value' (TYPE_STRING)", fcmCode: "INVALID_ARGUMENT")
        }
        if case .object(let data)? = message["data"],
            let reserved = data.map(\.key).first(where: {
                $0 == "from" || $0 == "message_type" || $0.hasPrefix("google") || $0.hasPrefix("gcm")
            })
        {
            return googleError(400, "INVALID_ARGUMENT", "Invalid data key: \(reserved) is reserved", fcmCode: "INVALID_ARGUMENT")
        }
        if message["notification"] == nil, let apns = message["apns"], apns["headers"]?["apns-priority"] == .string("10"),
            case .object(let aps)? = apns["payload"]?["aps"], !aps.contains(where: { ["alert", "sound", "badge"].contains($0.key) })
        {
            return googleError(400, "INVALID_ARGUMENT", "Data-only messages to iOS allow apns-priority 5 only", fcmCode: "INVALID_ARGUMENT")
        }
        if let problem = FCMMessageRules.problem(in: message) {
            return googleError(400, "INVALID_ARGUMENT", problem, fcmCode: "INVALID_ARGUMENT")
        }
        if FCMMessageRules.payloadBytes(of: message) > FCMMessageRules.largestPayloadBytes {
            return googleError(400, "INVALID_ARGUMENT", "Message is too big", fcmCode: "INVALID_ARGUMENT")
        }
        if case .string(let collapseId)? = message["apns"]?["headers"]?["apns-collapse-id"], collapseId.utf8.count > 64 {
            return googleError(
                400, "INVALID_ARGUMENT", "Invalid value at 'message.apns.headers[apns-collapse-id]'", fcmCode: "INVALID_ARGUMENT")
        }
        if let android = message["android"] {
            if let ttl = android["ttl"] {
                guard case .string(let text) = ttl, text.hasSuffix("s"), Double(text.dropLast()).map({ $0 >= 0 }) == true else {
                    return googleError(
                        400, "INVALID_ARGUMENT", "Invalid value at 'message.android.ttl' (type.googleapis.com/google.protobuf.Duration)",
                        fcmCode: "INVALID_ARGUMENT")
                }
            }
            // AndroidConfig.priority is the enum AndroidMessagePriority (`NORMAL`, `HIGH`); Firebase's guides write it lower-case.
            if let priority = android["priority"], !FCMMessageRules.androidPriorities.contains(priority) {
                return googleError(400, "INVALID_ARGUMENT", "Invalid value at 'message.android.priority'", fcmCode: "INVALID_ARGUMENT")
            }
        }
        if token.hasPrefix("unregistered") {
            return googleError(404, "NOT_FOUND", "Requested entity was not found.", fcmCode: "UNREGISTERED")
        }
        if token.hasPrefix("badtoken") {
            return googleError(
                400, "INVALID_ARGUMENT", "The registration token is not a valid FCM registration token",
                fcmCode: "INVALID_ARGUMENT", tokenViolation: true)
        }
        if token.hasPrefix("mismatch") { return googleError(403, "PERMISSION_DENIED", "SenderId mismatch", fcmCode: "SENDER_ID_MISMATCH") }
        if token.hasPrefix("quota") {
            var response = googleError(429, "RESOURCE_EXHAUSTED", "Quota exceeded.", fcmCode: "QUOTA_EXCEEDED")
            response.headers.append(("retry-after", "1"))
            return response
        }
        if token.hasPrefix("unavailable") {
            return googleError(503, "UNAVAILABLE", "The service is currently unavailable.", fcmCode: "UNAVAILABLE")
        }
        if token.hasPrefix("internal") { return googleError(500, "INTERNAL", "Internal error encountered.", fcmCode: "INTERNAL") }
        if token.hasPrefix("thirdparty") {
            return googleError(401, "UNAUTHENTICATED", "Auth error from APNS or Web Push Service", fcmCode: "THIRD_PARTY_AUTH_ERROR")
        }
        if token.hasPrefix("apnsauth") {
            return googleError(401, "UNAUTHENTICATED", "Auth error from APNS or Web Push Service", fcmCode: "APNS_AUTH_ERROR")
        }
        if token.hasPrefix("notfound") { return googleError(404, "NOT_FOUND", "Requested entity was not found.") }
        if token.hasPrefix("ratelimited") { return googleError(429, "RESOURCE_EXHAUSTED", "Quota exceeded.") }
        let number = sent.add(1, ordering: .relaxed).newValue
        return SandboxResponse(status: 200, json: #"{"name":"projects/\#(projectId)/messages/0:\#(number)%sandbox"}"#)
    }

    private func googleError(
        _ status: Int, _ grpcStatus: String, _ message: String, fcmCode: String? = nil,
        tokenViolation: Bool = false
    ) -> SandboxResponse {
        var details: [String] = []
        if let fcmCode { details.append(#"{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"\#(fcmCode)"}"#) }
        if tokenViolation {
            details.append(
                #"{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"field":"message.token","description":"Invalid registration token"}]}"#
            )
        }
        let detailsJSON = details.isEmpty ? "" : #","details":[\#(details.joined(separator: ","))]"#
        return SandboxResponse(
            status: status, json: #"{"error":{"code":\#(status),"message":"\#(message)","status":"\#(grpcStatus)"\#(detailsJSON)}}"#)
    }
}

/// A running FCM sandbox with a freshly generated service account written to a JSON file.
public struct FCMSandboxInstance: Sendable {
    public static let projectId = "example-project"
    public static let clientEmail = "push-worker@example-project.iam.gserviceaccount.com"

    public let server: SandboxServer
    public let sandbox: FCMSandbox
    /// A service-account JSON file whose `token_uri` points at this sandbox.
    public let credentialsFile: String

    public static func start(
        tls: SandboxTLS, tokenLifetimeSeconds: Int64 = 3599, port: Int = 0,
        clock: @escaping @Sendable () -> Int64 = currentTimeMilliseconds
    ) async throws -> FCMSandboxInstance {
        let key = try PrivateKey.generateRSA()
        let holder = LateResponder()
        let server = try await SandboxServer.start(tls: tls, port: port) { holder.respond($0) }
        let tokenURL = server.baseURL + "/token"
        let sandbox = FCMSandbox(
            accounts: [
                FCMSandbox.Account(
                    projectId: projectId, clientEmail: clientEmail,
                    publicKey: try PublicKey(pem: key.publicKeyPEM()))
            ],
            tokenURL: tokenURL, tokenLifetimeSeconds: tokenLifetimeSeconds, clock: clock)
        holder.set(sandbox.respond)
        var account = JSONWriter()
        account.beginObject()
        account.member("type", "service_account")
        account.member("project_id", projectId)
        account.member("private_key_id", "sandbox-key-1")
        account.member("private_key", try key.pem())
        account.member("client_email", clientEmail)
        account.member("token_uri", tokenURL)
        account.endObject()
        let credentialsFile = tls.directory.appendingPathComponent("service-account.json").path
        try account.string.write(toFile: credentialsFile, atomically: true, encoding: .utf8)
        return FCMSandboxInstance(server: server, sandbox: sandbox, credentialsFile: credentialsFile)
    }
}

extension FCMSandboxInstance {
    /// The `PUSH_FCM_*` settings that point a worker at this sandbox and its token endpoint.
    public var workerEnvironment: [String: String] {
        ["PUSH_FCM_CREDENTIALS_FILE": credentialsFile, "PUSH_FCM_ENDPOINT": server.baseURL]
    }
}
