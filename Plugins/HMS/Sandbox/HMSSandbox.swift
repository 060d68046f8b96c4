import Foundation
import PushCore
import PushSandbox
import Synchronization

/// Behaves like Huawei's OAuth 2.0 token endpoint and Push Kit's v1 send API (docs/providers/hms.md).
///
/// `POST /oauth2/v3/token`: a form `grant_type=client_credentials&client_id=…&client_secret=…`; answers
/// `{access_token, expires_in: 3600, token_type: "Bearer"}`, or HTTP 400 with Huawei's numeric
/// `{"error": 1101, "sub_error": …}` (12304 wrong secret, 20002 client id not digits, 20003 unknown client,
/// 20182 another grant type).
/// `POST /v1/{appId}/messages:send`: checks the bearer token (issued here for that app: else 401 80200001;
/// expired or revoked: 401 80200003) and the body as Huawei documents it: `message.token` 1…1000 strings
/// (else 80300010), `message.data` a string, `android.ttl` like `"86400s"` up to 1296000 s, `urgency` HIGH or
/// NORMAL, `category` VOIP or PLAY_VOICE only on a HIGH data message (80100001), `collapse_key` -1…100
/// (80100013), a notification message's title, body and `click_action` (80100001), the body without its tokens at
/// most 4096 bytes (80300008). Answers
/// `{"code": "80000000", "msg": "Success", "requestId": …}`. Scripted by the first token's prefix:
/// `invalid` 80300007 (all tokens invalid), `partial` 80100000 listing the token in `illegal_tokens`,
/// `reasoned` 80100000 listing it in `illegalTokens.noRight`, `nopermission` 80300002, `busy` HTTP 503 flow
/// control (Retry-After 1, no JSON), `internal` HTTP 500 81000001. Which HTTP status Huawei sends with a
/// business code is not documented; the sandbox uses 400 for refusals.
public final class HMSSandbox: Sendable {
    public struct App: Sendable {
        public let appId: String
        public let clientId: String
        public let clientSecret: String

        public init(appId: String, clientId: String? = nil, clientSecret: String) {
            self.appId = appId
            self.clientId = clientId ?? appId
            self.clientSecret = clientSecret
        }
    }

    public static let tokenPath = "/oauth2/v3/token"
    /// The values of `android.category`: Huawei's message classification standard (the service-and-communication
    /// categories, SYSTEM_REMINDER among them, and MARKETING) and PLAY_VOICE for data messages. Huawei documents no
    /// refusal of a notification message's category by an app without the self-classification right (it is then
    /// classed as marketing), so the sandbox refuses only a value outside the list.
    static let categories: Set<String> = [
        "IM", "VOIP", "SUBSCRIPTION", "TRAVEL", "HEALTH", "WORK", "ACCOUNT", "EXPRESS",
        "FINANCE", "DEVICE_REMINDER", "SYSTEM_REMINDER", "MAIL", "PLAY_VOICE", "MARKETING",
    ]
    static let highPriorityDataCategories: Set<String> = ["VOIP", "PLAY_VOICE"]

    private struct Issued {
        let appId: String
        var expiresAt: Int64
    }

    private let appsByClient: [String: App]
    private let tokenLifetime: Int64
    private let clock: @Sendable () -> Int64
    private let issued = Mutex<[String: Issued]>([:])
    private let tokenRequests = Atomic<Int>(0)
    private let sent = Atomic<Int>(0)

    public init(apps: [App], tokenLifetimeSeconds: Int64 = 3600, clock: @escaping @Sendable () -> Int64 = currentTimeMilliseconds) {
        appsByClient = Dictionary(apps.map { ($0.clientId, $0) }) { first, _ in first }
        tokenLifetime = tokenLifetimeSeconds
        self.clock = clock
    }

    public var tokenRequestCount: Int { tokenRequests.load(ordering: .relaxed) }

    /// Expires every access token issued so far: the next sends get 401 80200003.
    public func revokeAccessTokens() {
        issued.withLock { tokens in
            for token in tokens.keys { tokens[token]?.expiresAt = 0 }
        }
    }

    public func respond(to request: SandboxRequest) -> SandboxResponse {
        guard request.method == "POST" else { return SandboxResponse(status: 405, json: #"{"error":"method not allowed"}"#) }
        if request.path == Self.tokenPath { return token(request) }
        let parts = request.path.split(separator: "/")
        guard parts.count == 3, parts[0] == "v1", parts[2] == "messages:send" else {
            return SandboxResponse(status: 404, json: #"{"error":"unknown path"}"#)
        }
        return send(request, appId: String(parts[1]))
    }

    // MARK: OAuth 2.0 client credentials

    private func token(_ request: SandboxRequest) -> SandboxResponse {
        tokenRequests.add(1, ordering: .relaxed)
        func refusal(_ subError: Int, _ description: String) -> SandboxResponse {
            SandboxResponse(status: 400, json: #"{"sub_error":\#(subError),"error_description":"\#(description)","error":1101}"#)
        }
        guard request.header("content-type")?.hasPrefix("application/x-www-form-urlencoded") == true else {
            return refusal(20152, "invalid request")
        }
        let form = Self.formFields(request.body)
        guard form["grant_type"] == "client_credentials" else { return refusal(20182, "invalid grant_type") }
        guard let clientId = form["client_id"], !clientId.isEmpty, clientId.utf8.count <= 64,
            clientId.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) })
        else { return refusal(20002, "invalid client_id") }
        guard let app = appsByClient[clientId] else { return refusal(20003, "client_id not found") }
        guard form["client_secret"] == app.clientSecret else { return refusal(12304, "invalid client_secret") }
        let token = "CgB6e3x9sandbox" + UUID().uuidString.replacingOccurrences(of: "-", with: "")
        issued.withLock {
            $0[token] = Issued(appId: app.appId, expiresAt: clock().adding(saturating: tokenLifetime.multiplied(saturating: 1000)))
        }
        return SandboxResponse(status: 200, json: #"{"access_token":"\#(token)","expires_in":\#(tokenLifetime),"token_type":"Bearer"}"#)
    }

    /// `application/x-www-form-urlencoded`: `+` is a space, then percent-decoding.
    public static func formFields(_ body: [UInt8]) -> [String: String] {
        func decode(_ text: Substring) -> String {
            let spaced = text.replacingOccurrences(of: "+", with: " ")
            return spaced.removingPercentEncoding ?? spaced
        }
        return Dictionary(
            String(decoding: body, as: UTF8.self).split(separator: "&").compactMap { pair -> (String, String)? in
                let pieces = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                guard pieces.count == 2 else { return nil }
                return (decode(pieces[0]), decode(pieces[1]))
            }
        ) { first, _ in first }
    }

    // MARK: messages:send

    private func answer(_ status: Int, _ code: String, _ message: String, requestId: String = "") -> SandboxResponse {
        var writer = JSONWriter()
        writer.beginObject()
        writer.member("code", code)
        writer.member("msg", message)
        writer.member("requestId", requestId)
        writer.endObject()
        return SandboxResponse(status: status, json: writer.string)
    }

    private func send(_ request: SandboxRequest, appId: String) -> SandboxResponse {
        guard let authorization = request.header("authorization"), authorization.hasPrefix("Bearer "),
            let grant = issued.withLock({ $0[String(authorization.dropFirst(7))] }), grant.appId == appId
        else { return answer(401, "80200001", "Oauth authentication error") }
        guard grant.expiresAt > clock() else { return answer(401, "80200003", "Oauth Token expired.") }
        if let problem = problem(in: request.body) { return problem }
        guard let document = try? JSONParser.parse(request.body), case .array(let tokens)? = document["message"]?["token"],
            case .string(let token)? = tokens.first
        else { return answer(400, "80100003", "Illegal payload") }
        let requestId = "\(clock())\(sent.add(1, ordering: .relaxed).newValue)"
        if token.hasPrefix("invalid") { return answer(400, "80300007", "All the tokens are invalid", requestId: requestId) }
        if token.hasPrefix("partial") || token.hasPrefix("reasoned") {
            var detail = JSONWriter()
            detail.beginObject()
            detail.member("success", Int64(0))
            detail.member("failure", Int64(1))
            if token.hasPrefix("partial") {
                detail.key("illegal_tokens")
                detail.beginArray()
                detail.value(token)
                detail.endArray()
            } else {
                detail.key("illegalTokens")
                detail.beginObject()
                detail.key("noRight")
                detail.beginArray()
                detail.value(token)
                detail.endArray()
                detail.endObject()
            }
            detail.endObject()
            return answer(200, "80100000", detail.string, requestId: requestId)
        }
        if token.hasPrefix("nopermission") {
            return answer(400, "80300002", "The current app does not have the permission to send messages", requestId: requestId)
        }
        if token.hasPrefix("busy") {
            return SandboxResponse(status: 503, headers: [("retry-after", "1")], body: Array("flow control".utf8))
        }
        if token.hasPrefix("internal") { return answer(500, "81000001", "System inner error", requestId: requestId) }
        return answer(200, "80000000", "Success", requestId: requestId)
    }

    /// Huawei's checks of the request body, in the order the send API documents them.
    private func problem(in body: [UInt8]) -> SandboxResponse? {
        guard let document = try? JSONParser.parse(body), case .object = document, let message = document["message"],
            case .object(let members) = message
        else { return answer(400, "80100003", "Illegal payload") }
        if let validateOnly = document["validate_only"], validateOnly != .bool(true), validateOnly != .bool(false) {
            return answer(400, "80100003", "validate_only must be a boolean")
        }
        let addressed = ["token", "topic", "condition"].filter { name in members.contains { $0.key == name } }
        guard addressed == ["token"] else { return answer(400, "80100003", "Exactly one of token, topic or condition must be specified") }
        guard case .array(let tokens)? = message["token"], (1...1000).contains(tokens.count),
            tokens.allSatisfy({ if case .string(let token) = $0 { !token.isEmpty } else { false } })
        else { return answer(400, "80300010", "the number of tokens must be 1 to 1000") }
        if let data = message["data"], !data.isString { return answer(400, "80100003", "message.data must be a string") }
        let notification = message["notification"] != nil || message["android"]?["notification"] != nil
        if let android = message["android"] {
            guard case .object = android else { return answer(400, "80100003", "message.android must be an object") }
            if let ttl = android["ttl"] {
                guard case .string(let text) = ttl, let seconds = Self.ttlSeconds(text), seconds <= 1_296_000 else {
                    return answer(400, "80100001", "ttl must be a duration in seconds up to 1296000s")
                }
            }
            let urgency = android["urgency"] ?? .string("NORMAL")
            guard urgency == .string("HIGH") || urgency == .string("NORMAL") else {
                return answer(400, "80100001", "urgency must be HIGH or NORMAL")
            }
            if let category = android["category"] {
                guard case .string(let name) = category, Self.categories.contains(name) else {
                    return answer(400, "80100001", "unknown category")
                }
                if !notification, !(Self.highPriorityDataCategories.contains(name) && urgency == .string("HIGH")) {
                    return answer(400, "80100001", "a data message's category must be VOIP or PLAY_VOICE with urgency HIGH")
                }
            }
            if let collapseKey = android["collapse_key"] {
                guard case .integer(let group) = collapseKey, (-1...100).contains(group) else {
                    return answer(400, "80100013", "collapse_key is invalid")
                }
            }
        }
        if let shown = message["android"]?["notification"], let problem = Self.notificationProblem(shown, message: message["notification"])
        {
            return answer(400, "80100001", problem)
        }
        if Self.bytesWithoutTokens(body, tokens: tokens) > 4096 {
            return answer(400, "80300008", "The message body size exceeds the default value set by the system (4K)")
        }
        return nil
    }

    /// A notification message's checks ("Sending Downlink Messages", `AndroidNotification`): `title` and `body` are
    /// mandatory unless `message.notification` gives them; `click_action` is mandatory, its `type` 1 (the app's page:
    /// `intent` or `action` required), 2 (`url` required), 3 (the app's home page) or 4 (rich media).
    static func notificationProblem(_ notification: JSONValue, message shared: JSONValue?) -> String? {
        for name in ["title", "body"] where !(notification[name]?.isString ?? false) && !(shared?[name]?.isString ?? false) {
            return "android.notification.\(name) is mandatory"
        }
        guard let action = notification["click_action"], case .integer(let type)? = action["type"], (1...4).contains(type) else {
            return "android.notification.click_action.type must be 1 to 4"
        }
        if type == 1, action["intent"] == nil, action["action"] == nil { return "click_action type 1 needs intent or action" }
        if type == 2, !(action["url"]?.isString ?? false) { return "click_action type 2 needs url" }
        return nil
    }

    /// `"86400s"`, `"86400"` or `"1.5s"` (Huawei's server SDK pattern) as whole seconds.
    static func ttlSeconds(_ text: String) -> Int64? {
        let number = text.hasSuffix("s") || text.hasSuffix("S") ? text.dropLast() : Substring(text)
        guard !number.isEmpty, number.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }),
            number.filter({ $0 == "." }).count <= 1, let seconds = Double(number)
        else { return nil }
        return Int64(clamping: seconds)
    }

    /// The body's size without the token strings, their quotes and the commas between them.
    static func bytesWithoutTokens(_ body: [UInt8], tokens: [JSONValue]) -> Int {
        let tokenBytes = tokens.reduce(0) { sum, token in
            if case .string(let text) = token { sum + text.utf8.count + 2 } else { sum }
        }
        return body.count - tokenBytes - max(tokens.count - 1, 0)
    }
}

extension JSONValue {
    fileprivate var isString: Bool { if case .string = self { true } else { false } }
}

/// A running HMS sandbox with one app whose client secret is written to a file.
public struct HMSSandboxInstance: Sendable {
    public static let appId = "104000001"
    /// Form-special characters on purpose: a client that does not percent-encode the secret is refused.
    public static let clientSecret = "sandbox&secret=+/%"

    public let server: SandboxServer
    public let sandbox: HMSSandbox
    public let clientSecretFile: String

    public static func start(
        tls: SandboxTLS, tokenLifetimeSeconds: Int64 = 3600, port: Int = 0,
        clock: @escaping @Sendable () -> Int64 = currentTimeMilliseconds
    ) async throws -> HMSSandboxInstance {
        let holder = LateResponder()
        let server = try await SandboxServer.start(tls: tls, port: port) { holder.respond($0) }
        let sandbox = HMSSandbox(
            apps: [HMSSandbox.App(appId: appId, clientSecret: clientSecret)],
            tokenLifetimeSeconds: tokenLifetimeSeconds, clock: clock)
        holder.set(sandbox.respond)
        let clientSecretFile = tls.directory.appendingPathComponent("hms-client-secret").path
        try (clientSecret + "\n").write(toFile: clientSecretFile, atomically: true, encoding: .utf8)
        return HMSSandboxInstance(server: server, sandbox: sandbox, clientSecretFile: clientSecretFile)
    }

    public var tokenURL: String { server.baseURL + HMSSandbox.tokenPath }

    /// The requests that reached the send API, oldest first.
    public var sendRequests: [SandboxRequest] { server.requests.filter { $0.path.hasSuffix("/messages:send") } }

    /// The `PUSH_HMS_*` settings that point a worker at this sandbox (trust for its certificate is the caller's
    /// `PUSH_HMS_CA_FILE`).
    public var workerEnvironment: [String: String] {
        [
            "PUSH_HMS_APP_ID": Self.appId, "PUSH_HMS_CLIENT_SECRET_FILE": clientSecretFile,
            "PUSH_HMS_TOKEN_URL": tokenURL, "PUSH_HMS_ENDPOINT": server.baseURL,
        ]
    }
}
