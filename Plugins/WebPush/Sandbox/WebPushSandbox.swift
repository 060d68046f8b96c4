import Foundation
import PushCore
import PushSandbox
import PushCrypto
import Synchronization

/// A push service (RFC 8030) that holds its subscriptions' private keys: it checks the
/// VAPID token (ES256 signature with the `k` key, `aud` = its origin, `exp` in the future
/// and at most 24 h away by its own clock, `sub` mailto:/https:), the `TTL` and `Content-Encoding` headers,
/// decrypts the aes128gcm body and records the plaintext. Scripted by subscription id
/// prefix: `gone` 410, `missing` 404, `busy` 429 with Retry-After 1, `big` 413. A subscription made with an
/// `applicationServerKey` refuses a VAPID key other than that one with 403 (RFC 8292 §4.2).
/// `/push/<id>/<anything>` is another endpoint of subscription `<id>` (same keys), so one
/// subscription can stand for many targets.
public final class WebPushSandbox: Sendable {
    public struct Subscription: Sendable {
        public let endpoint: String
        /// `keys.p256dh` and `keys.auth` as a browser hands them out (base64url).
        public let p256dh: String
        public let auth: String

        public init(endpoint: String, p256dh: String, auth: String) {
            self.endpoint = endpoint
            self.p256dh = p256dh
            self.auth = auth
        }
    }

    public struct Delivered: Sendable {
        public let subscriptionId: String
        public let plaintext: [UInt8]
        public let ttl: Int
        public let urgency: String?
        public let topic: String?
    }

    private struct Holder {
        let key: PrivateKey
        let auth: [UInt8]
        /// The application server's public key the page subscribed with (raw P-256 point), if any.
        let applicationServerKey: [UInt8]?
    }

    private let origin: String
    /// Every origin clients may address this server by (`origin` first): a VAPID `aud` must be the origin of the
    /// push resource the request is for (RFC 8292 §2), so any of these.
    private let origins: Set<String>
    /// Answer as Apple's push service does where it is stricter than the others (`web.push.apple.com`).
    private let apple: Bool
    private let clock: @Sendable () -> Int64
    private let subscriptions = Mutex<[String: Holder]>([:])
    private let delivered = Mutex<[Delivered]>([])
    private let counter = Atomic<Int>(0)

    /// - Parameters:
    ///   - origin: `https://host:port` as clients address this server.
    ///   - aliases: further origins that reach this server (other names its certificate holds).
    ///   - apple: refuse what Apple's push service refuses and the others accept: a VAPID `sub` on a host that is not
    ///     public (`localhost`, `.localhost`, `.invalid`, `.test`, `.local`) gets `403 {"reason":"BadJwtToken"}`
    ///     (web-push-libs/web-push#947, pywebpush#175; FCM and Mozilla accept such a subject).
    public init(
        origin: String, aliases: [String] = [], apple: Bool = false, clock: @escaping @Sendable () -> Int64 = currentTimeMilliseconds
    ) {
        self.origin = origin
        origins = Set([origin] + aliases)
        self.apple = apple
        self.clock = clock
    }

    /// The host of a `mailto:` or `https:` subject, lower-cased.
    static func subjectHost(_ subject: String) -> String {
        let rest =
            subject.hasPrefix("mailto:")
            ? Substring(subject.split(separator: "@").last ?? "")
            : subject.dropFirst("https://".count).prefix { $0 != "/" }
        return rest.prefix { $0 != ":" && $0 != "?" }.lowercased()
    }

    /// Whether Apple's push service refuses a subject on this host.
    static func appleRefuses(subjectHost host: String) -> Bool {
        host.isEmpty || host == "localhost" || [".localhost", ".invalid", ".test", ".local"].contains { host.hasSuffix($0) }
    }

    /// Creates a subscription (what a browser does for a page) and returns what the page sends upstream.
    /// - Parameter applicationServerKey: the VAPID public key the page subscribed with; pushes signed with another are refused.
    public func subscribe(id: String = UUID().uuidString.lowercased(), applicationServerKey: [UInt8]? = nil) throws -> Subscription {
        let key = try PrivateKey.generateP256()
        let auth = try RandomBytes.generate(16)
        subscriptions.withLock { $0[id] = Holder(key: key, auth: auth, applicationServerKey: applicationServerKey) }
        return Subscription(
            endpoint: "\(origin)/push/\(id)", p256dh: Base64URL.encode(try key.rawPublicKey()), auth: Base64URL.encode(auth))
    }

    /// Messages decrypted so far.
    public var messages: [Delivered] { delivered.withLock { $0 } }

    public func respond(to request: SandboxRequest) -> SandboxResponse {
        func answer(_ status: Int, _ text: String) -> SandboxResponse { SandboxResponse(status: status, body: Array(text.utf8)) }
        guard request.method == "POST" else { return answer(405, "POST only") }
        guard request.path.hasPrefix("/push/") else { return answer(404, "no such subscription") }
        let id = String(request.path.dropFirst("/push/".count))
        guard let authorization = request.header("authorization"), authorization.hasPrefix("vapid ") else {
            return answer(401, "VAPID authorization required")
        }
        var parameters: [String: String] = [:]
        for part in authorization.dropFirst(6).split(separator: ",") {
            let pair = part.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
            if pair.count == 2 { parameters[String(pair[0])] = String(pair[1]) }
        }
        guard let token = parameters["t"], let keyText = parameters["k"], let point = Base64URL.decode(keyText),
            let publicKey = try? PublicKey(p256: point), let jwt = JSONWebToken.parse(token), jwt.verifies(with: publicKey)
        else { return answer(401, "VAPID token does not verify") }
        let now = clock() / 1000
        guard case .string(let audience)? = jwt.claims["aud"], origins.contains(audience) else {
            return answer(403, "VAPID aud must be \(origin)")
        }
        // RFC 8292 §2: `exp` "MUST NOT be more than 24 hours from the time of the request". Mozilla autopush refuses a
        // later one (autoendpoint `validate_vapid_jwt`: `exp` past now + 1 day is `FutureExpirationToken`, 401 errno
        // 109); this sandbox answers 403, as for every claim it refuses (the plugin reads 401 and 403 alike).
        guard case .integer(let expires)? = jwt.claims["exp"], expires > now, expires <= now + 24 * 3600 else {
            return answer(403, "VAPID exp must be in the future and at most 24 h away")
        }
        guard case .string(let subject)? = jwt.claims["sub"], subject.hasPrefix("mailto:") || subject.hasPrefix("https:") else {
            return answer(403, "VAPID sub must be a mailto: or https: URI")
        }
        if apple, (subject.hasPrefix("mailto:") && !subject.contains("@")) || Self.appleRefuses(subjectHost: Self.subjectHost(subject)) {
            return SandboxResponse(status: 403, json: #"{"reason":"BadJwtToken"}"#)
        }
        guard let ttlText = request.header("ttl"), let ttl = Int(ttlText), ttl >= 0 else { return answer(400, "TTL header required") }
        guard request.header("content-encoding") == "aes128gcm" else { return answer(415, "Content-Encoding must be aes128gcm") }
        if let topic = request.header("topic"), topic.count > 32 || Base64URL.decode(topic) == nil {
            return answer(400, "Topic must be at most 32 base64url characters")
        }
        if id.hasPrefix("gone") { return answer(410, "subscription expired") }
        if id.hasPrefix("missing") { return answer(404, "subscription not found") }
        if id.hasPrefix("busy") { return SandboxResponse(status: 429, headers: [("retry-after", "1")]) }
        if id.hasPrefix("big") || request.body.count > 4096 { return answer(413, "payload too large") }
        let subscriptionId = String(id.prefix { $0 != "/" })
        guard let holder = subscriptions.withLock({ $0[subscriptionId] }) else { return answer(404, "subscription not found") }
        if let expected = holder.applicationServerKey, expected != point {
            return answer(403, "VAPID key is not the applicationServerKey this subscription was made with")
        }
        guard let plaintext = try? WebPushEncryption.decrypt(request.body, uaKey: holder.key, authSecret: holder.auth) else {
            return answer(400, "body does not decrypt")
        }
        delivered.withLock {
            $0.append(
                Delivered(
                    subscriptionId: id, plaintext: plaintext, ttl: ttl, urgency: request.header("urgency"), topic: request.header("topic")))
        }
        let number = counter.add(1, ordering: .relaxed).newValue
        return SandboxResponse(status: 201, headers: [("location", "\(origin)/message/\(number)")])
    }
}

/// A running Web Push sandbox.
public struct WebPushSandboxInstance: Sendable {
    public let server: SandboxServer
    public let sandbox: WebPushSandbox

    /// - Parameters:
    ///   - host: the host clients name in endpoints (and in the VAPID `aud`): `localhost` or `127.0.0.1`.
    ///   - aliases: further host names that reach it (resolved by a test's own name server), accepted in `aud` too.
    ///   - clock: the push service's own clock (ms since the epoch), against which it checks a VAPID token's `exp`.
    ///   - wrap: applied to the sandbox's responder (fault injection, hostile answers).
    public static func start(
        tls: SandboxTLS, port: Int = 0, host: String = "localhost", aliases: [String] = [], apple: Bool = false,
        clock: @escaping @Sendable () -> Int64 = currentTimeMilliseconds, connectionClosed: (@Sendable (ObjectIdentifier) -> Void)? = nil,
        wrap: @escaping @Sendable (@escaping SandboxServer.Responder) -> SandboxServer.Responder = { $0 }
    )
        async throws -> WebPushSandboxInstance
    {
        let holder = LateResponder()
        let server = try await SandboxServer.start(tls: tls, port: port, connectionClosed: connectionClosed) { holder.respond($0) }
        let sandbox = WebPushSandbox(
            origin: "https://\(host):\(server.port)", aliases: aliases.map { "https://\($0):\(server.port)" }, apple: apple,
            clock: clock)
        holder.set(wrap(sandbox.respond))
        return WebPushSandboxInstance(server: server, sandbox: sandbox)
    }
}
