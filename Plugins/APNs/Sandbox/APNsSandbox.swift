import Foundation
import PushCore
import PushSandbox
import PushCrypto
import Synchronization

/// Checks requests the way APNs does and answers with Apple's status codes and
/// `{"reason": …}` bodies. Authentication: provider tokens (ES256 JWT verified against the
/// registered keys, `iat` at most an hour old, no new token within 20 minutes of the last)
/// or, when the server demands client certificates, the TLS handshake itself.
///
/// Scripted answers by device-token prefix (tokens are hex):
/// `0410…` 410 Unregistered with a timestamp · `0400…` 400 BadDeviceToken ·
/// `0429…` 429 TooManyRequests · `0500…` 500 InternalServerError · `0503…` 503 ServiceUnavailable ·
/// `0601…` 200 after 2 s. A token `register(token:bundleId:pushKit:)` tied to one app is answered
/// 400 DeviceTokenNotForTopic under another app's topic, and so is a PushKit token outside the `.voip` topic
/// or an ordinary token on it.
/// A new connection allows one stream until a token is accepted, then 1000 (as APNs does).
/// A connection is bound to the signing key of the first provider token accepted on it: a token of another key on it
/// is answered 403 `UnrelatedKeyIdInToken`, "The key ID in the provider token isn't related to the key ID of the token
/// used in the first push of this connection. To use this token, open a new connection" (Apple, [Handling notification
/// responses from APNs](https://developer.apple.com/documentation/usernotifications/handling-notification-responses-from-apns)).
/// The server must tell `connectionClosed(_:)` of each connection that closes (`APNsSandboxInstance` does), so a new
/// connection that reuses an old one's identifier starts unbound.
///
/// As strict as APNs, never stricter: a missing `apns-push-type` is accepted ("Sending notification requests to
/// APNs": required for watchOS, recommended elsewhere), and a payload the device would drop — a malformed `aps`
/// key, a Live Activity start without an alert, a widget push without `content-changed`, a Push to Talk transmission
/// not at priority 10 and expiration 0 — is answered 200 as APNs answers it (Apple documents no reason for these),
/// and recorded in `deviceDrops` so tests see it.
public final class APNsSandbox: Sendable {
    public struct SigningKey: Sendable {
        public let keyId: String
        public let teamId: String
        public let publicKey: PublicKey

        public init(keyId: String, teamId: String, publicKeyPEM: String) throws {
            self.keyId = keyId
            self.teamId = teamId
            publicKey = try PublicKey(pem: publicKeyPEM)
        }
    }

    static let pushTypeSuffixes: [String: String] = [
        "alert": "", "background": "", "mdm": "", "location": ".location-query", "voip": ".voip",
        "complication": ".complication", "fileprovider": ".pushkit.fileprovider", "liveactivity": ".push-type.liveactivity",
        "pushtotalk": ".voip-ptt", "widgets": ".push-type.widgets", "controls": ".push-type.controls",
    ]

    /// Push types Apple serves over token-based connections only.
    static let tokenOnlyPushTypes: Set<String> = ["location", "liveactivity", "widgets", "controls"]

    private let keys: [String: SigningKey]
    private let bundleIds: Set<String>
    private let certificateAuthentication: Bool
    private let clock: @Sendable () -> Int64
    private let lastTokenIssuedAt = Mutex<[String: Int64]>([:])
    private let issuedTokens = Mutex<[String: (bundleId: String, pushKit: Bool)]>([:])
    private let dropped = Mutex<[String]>([])
    /// Why the device would drop each request APNs accepted (`APNsPayloadRules`), in order (for tests).
    public var deviceDrops: [String] { dropped.withLock { $0 } }
    private let trustedConnections = Mutex<Set<ObjectIdentifier>>([])
    /// The key id of the first token accepted on each open connection.
    private let connectionKeys = Mutex<[ObjectIdentifier: String]>([:])
    private let answered = Atomic<Int>(0)
    /// Every this many requests, the answer is followed by GOAWAY and a closed connection.
    private let goAwayEvery: Int?
    /// Unregistered timestamp answered for `0410…` tokens (ms since the epoch).
    public static let unregisteredSince: Int64 = 1_795_000_000_000

    /// - Parameters:
    ///   - certificateAuthentication: the server demands a client certificate; no token is needed.
    public init(
        keys: [SigningKey], bundleIds: Set<String>, certificateAuthentication: Bool = false, goAwayEvery: Int? = nil,
        clock: @escaping @Sendable () -> Int64 = currentTimeMilliseconds
    ) {
        self.goAwayEvery = goAwayEvery
        self.keys = Dictionary(keys.map { ($0.keyId, $0) }) { first, _ in first }
        self.bundleIds = bundleIds
        self.certificateAuthentication = certificateAuthentication
        self.clock = clock
    }

    /// Ties a device token to the app it was issued to, as APNs does; a PushKit token (`PKPushRegistry`) serves
    /// the app's `.voip` topic only, an ordinary one every other topic.
    public func register(token: String, bundleId: String, pushKit: Bool = false) {
        issuedTokens.withLock { $0[token] = (bundleId, pushKit) }
    }

    public func respond(to request: SandboxRequest) -> SandboxResponse {
        func error(_ status: Int, _ reason: String, _ extra: String = "") -> SandboxResponse {
            SandboxResponse(
                status: status, json: #"{"reason":"\#(reason)"\#(extra)}"#,
                headers: [("apns-id", request.header("apns-id") ?? UUID().uuidString.lowercased())])
        }
        guard request.method == "POST" else { return error(405, "MethodNotAllowed") }
        guard request.path.hasPrefix("/3/device/") else { return error(404, "BadPath") }
        let token = String(request.path.dropFirst("/3/device/".count))
        guard !token.isEmpty else { return error(400, "MissingDeviceToken") }
        guard token.count >= 16, token.count.isMultiple(of: 2), token.allSatisfy(\.isHexDigit) else { return error(400, "BadDeviceToken") }

        var tokenAccepted = false
        if !certificateAuthentication {
            guard let authorization = request.header("authorization") else { return error(403, "MissingProviderToken") }
            guard authorization.hasPrefix("bearer "), let jwt = JSONWebToken.parse(String(authorization.dropFirst(7))),
                case .string(let keyId)? = jwt.header["kid"], let key = keys[keyId],
                jwt.header["alg"] == .string("ES256"), jwt.claims["iss"] == .string(key.teamId),
                case .integer(let issuedAt)? = jwt.claims["iat"], jwt.verifies(with: key.publicKey)
            else { return error(403, "InvalidProviderToken") }
            let now = clock() / 1000
            if issuedAt > now + 60 { return error(403, "InvalidProviderToken") }
            if now - issuedAt > 3600 { return error(403, "ExpiredProviderToken") }
            let tooSoon = lastTokenIssuedAt.withLock { last -> Bool in
                if let previous = last[keyId], issuedAt != previous, issuedAt - previous < 20 * 60, issuedAt > previous { return true }
                last[keyId] = max(issuedAt, last[keyId] ?? 0)
                return false
            }
            if tooSoon { return error(429, "TooManyProviderTokenUpdates") }
            if let connection = request.connection {
                let boundKey = connectionKeys.withLock { bound in
                    if let first = bound[connection] { return first }
                    bound[connection] = keyId
                    return keyId
                }
                if boundKey != keyId { return error(403, "UnrelatedKeyIdInToken") }
            }
            tokenAccepted = true
        }

        guard let topic = request.header("apns-topic") else { return error(400, "MissingTopic") }
        let pushType = request.header("apns-push-type") ?? "alert"
        guard let suffix = Self.pushTypeSuffixes[pushType] else { return error(400, "InvalidPushType") }
        // Apple documents that these types need a token-based connection, not the answer; a certificate's topics
        // (the bundle id, `.voip`, `.complication`) do not include theirs, hence TopicDisallowed.
        if certificateAuthentication, Self.tokenOnlyPushTypes.contains(pushType) { return error(400, "TopicDisallowed") }
        if pushType != "mdm" {
            guard topic.hasSuffix(suffix), bundleIds.contains(String(topic.dropLast(suffix.count))) else {
                return error(400, bundleIds.contains(where: { topic.hasPrefix($0) }) ? "InvalidPushType" : "TopicDisallowed")
            }
            if let issued = issuedTokens.withLock({ $0[token] }),
                issued.bundleId != String(topic.dropLast(suffix.count)) || issued.pushKit != (pushType == "voip")
            {
                return error(400, "DeviceTokenNotForTopic")
            }
        }
        let priority = request.header("apns-priority") ?? "10"
        guard ["10", "5", "1"].contains(priority), !(pushType == "background" && priority == "10") else { return error(400, "BadPriority") }
        if let expiration = request.header("apns-expiration"), Int64(expiration).map({ $0 < 0 }) ?? true {
            return error(400, "BadExpirationDate")
        }
        if let collapseId = request.header("apns-collapse-id"), collapseId.utf8.count > 64 { return error(400, "BadCollapseId") }
        if let id = request.header("apns-id"), UUID(uuidString: id) == nil { return error(400, "BadMessageId") }
        guard !request.body.isEmpty else { return error(400, "PayloadEmpty") }
        guard request.body.count <= (pushType == "voip" ? 5120 : 4096) else { return error(413, "PayloadTooLarge") }
        let problem =
            APNsPayloadRules.headerProblem(
                pushType: pushType, priority: priority, expiration: request.header("apns-expiration"), body: request.body)
            ?? APNsPayloadRules.problem(in: request.body, pushType: pushType)
        if let problem { dropped.withLock { $0.append(problem) } }

        var response: SandboxResponse
        switch token.prefix(4) {
        case "0410": response = error(410, "Unregistered", #","timestamp":\#(Self.unregisteredSince)"#)
        case "0400": response = error(400, "BadDeviceToken")
        case "0429": response = error(429, "TooManyRequests")
        case "0500": response = error(500, "InternalServerError")
        case "0503": response = error(503, "ServiceUnavailable")
        case "0601":
            response = SandboxResponse(
                status: 200, headers: [("apns-id", request.header("apns-id") ?? UUID().uuidString.lowercased())], delay: .seconds(2))
        default:
            response = SandboxResponse(status: 200, headers: [("apns-id", request.header("apns-id") ?? UUID().uuidString.lowercased())])
        }
        if tokenAccepted || certificateAuthentication, let connection = request.connection,
            trustedConnections.withLock({ $0.insert(connection).inserted })
        {
            response.connectionAction = .allowConcurrentStreams(1000)
        }
        if let goAwayEvery, answered.add(1, ordering: .relaxed).newValue.isMultiple(of: goAwayEvery) {
            response.connectionAction = .goAway
        }
        return response
    }
}

extension APNsSandbox {
    /// Forgets what the sandbox knew of a connection that closed: the key it was bound to, whether a token was accepted.
    public func connectionClosed(_ connection: ObjectIdentifier) {
        connectionKeys.withLock { _ = $0.removeValue(forKey: connection) }
        trustedConnections.withLock { _ = $0.remove(connection) }
    }

    /// The device token a request is for (the record and fault key).
    public static func deviceToken(of request: SandboxRequest) -> String? {
        guard request.path.hasPrefix("/3/device/") else { return nil }
        return String(request.path.dropFirst("/3/device/".count))
    }

    /// The `kid` of a request's provider token, verified or not (the record's signer); nil without one, and for a
    /// key id that is not the ten alphanumerics Apple issues (the record is split on spaces).
    public static func signingKeyId(of request: SandboxRequest) -> String? {
        guard let authorization = request.header("authorization"), authorization.hasPrefix("bearer "),
            let jwt = JSONWebToken.parse(String(authorization.dropFirst(7))),
            case .string(let keyId)? = jwt.header["kid"], keyId.utf8.count == 10,
            keyId.unicodeScalars.allSatisfy({ $0.isASCII && CharacterSet.alphanumerics.contains($0) })
        else { return nil }
        return keyId
    }
}

/// Apps of other teams a sandbox also serves (`APNsSandboxInstance.start(teams:)`), for runs with several APNs apps:
/// team `n` (from 1) is `TEAM0000nn`, owns the bundle id `com.example.app<n>` and `keysPerTeam` signing keys
/// `K0nn00000k` (k from 0), each written as `AuthKey_<key id>.p8` into a directory, so an app can rotate to its
/// team's next key.
public struct APNsSandboxTeam: Sendable, Encodable {
    public struct Key: Sendable, Encodable {
        public let keyId: String
        public let keyFile: String

        public init(keyId: String, keyFile: String) {
            self.keyId = keyId
            self.keyFile = keyFile
        }
    }

    public let teamId: String
    public let bundleId: String
    public let keys: [Key]

    public init(teamId: String, bundleId: String, keys: [Key]) {
        self.teamId = teamId
        self.bundleId = bundleId
        self.keys = keys
    }

    /// Generates `count` teams' keys into `directory`; returns the teams and the keys to register in the sandbox.
    public static func generate(count: Int, keysPerTeam: Int, directory: URL) throws -> ([APNsSandboxTeam], [APNsSandbox.SigningKey]) {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var teams: [APNsSandboxTeam] = []
        var signingKeys: [APNsSandbox.SigningKey] = []
        for team in 0..<min(max(count, 0), 99) {
            let teamId = String(format: "TEAM%06d", team + 1)
            var keys: [Key] = []
            for index in 0..<min(max(keysPerTeam, 1), 99) {
                let keyId = String(format: "K%03d%06d", team + 1, index)
                let key = try PrivateKey.generateP256()
                let keyFile = directory.appendingPathComponent("AuthKey_\(keyId).p8").path
                try key.pem().write(toFile: keyFile, atomically: true, encoding: .utf8)
                keys.append(Key(keyId: keyId, keyFile: keyFile))
                signingKeys.append(try APNsSandbox.SigningKey(keyId: keyId, teamId: teamId, publicKeyPEM: key.publicKeyPEM()))
            }
            teams.append(APNsSandboxTeam(teamId: teamId, bundleId: "com.example.app\(team + 1)", keys: keys))
        }
        return (teams, signingKeys)
    }
}

/// A running APNs sandbox with a freshly generated `.p8` signing key registered in it,
/// for the demo, the `sandbox` command and tests.
public struct APNsSandboxInstance: Sendable {
    public static let keyId = "KEYID4APNS"
    public static let teamId = "TEAM123456"
    public static let bundleId = "com.example.chat"

    public let server: SandboxServer
    public let sandbox: APNsSandbox
    /// The PKCS#8 PEM signing key (what Apple's `.p8` file holds), inside the TLS directory.
    public let keyFile: String
    /// The other teams the sandbox serves besides `teamId` (their keys are inside the TLS directory, `apns-keys/`).
    public let teams: [APNsSandboxTeam]

    /// New connections allow one stream until a token is accepted, as APNs does.
    /// - Parameters:
    ///   - teams: how many other teams (`APNsSandboxTeam`) to serve besides `teamId`, with `keysPerTeam` keys each.
    ///   - wrap: applied to the sandbox's responder (fault injection, hostile answers).
    public static func start(
        tls: SandboxTLS, certificateAuthentication: Bool = false, goAwayEvery: Int? = nil,
        port: Int = 0, teams teamCount: Int = 0, keysPerTeam: Int = 2,
        connectionClosed: (@Sendable (ObjectIdentifier) -> Void)? = nil,
        wrap: @Sendable (@escaping SandboxServer.Responder) -> SandboxServer.Responder = { $0 }
    )
        async throws -> APNsSandboxInstance
    {
        let key = try PrivateKey.generateP256()
        let keyFile = tls.directory.appendingPathComponent("AuthKey_\(keyId).p8").path
        try key.pem().write(toFile: keyFile, atomically: true, encoding: .utf8)
        let (teams, teamKeys) =
            teamCount > 0
            ? try APNsSandboxTeam.generate(
                count: teamCount, keysPerTeam: keysPerTeam, directory: tls.directory.appendingPathComponent("apns-keys"))
            : ([], [])
        let sandbox = APNsSandbox(
            keys: [try APNsSandbox.SigningKey(keyId: keyId, teamId: teamId, publicKeyPEM: key.publicKeyPEM())] + teamKeys,
            bundleIds: Set([bundleId] + teams.map(\.bundleId)), certificateAuthentication: certificateAuthentication,
            goAwayEvery: goAwayEvery)
        let server = try await SandboxServer.start(
            tls: tls, requireClientCertificate: certificateAuthentication, port: port,
            initialConcurrentStreams: 1,
            connectionClosed: { connection in
                sandbox.connectionClosed(connection)
                connectionClosed?(connection)
            }, responder: wrap(sandbox.respond))
        return APNsSandboxInstance(server: server, sandbox: sandbox, keyFile: keyFile, teams: teams)
    }
}

extension APNsSandboxInstance {
    /// The `PUSH_APNS_*` settings that point a worker at this sandbox with its signing key
    /// (trust for its certificate is the caller's `PUSH_APNS_CA_FILE`).
    public var workerEnvironment: [String: String] {
        [
            "PUSH_APNS_KEY_FILE": keyFile,
            "PUSH_APNS_KEY_ID": Self.keyId,
            "PUSH_APNS_TEAM_ID": Self.teamId,
            "PUSH_APNS_BUNDLE_ID": Self.bundleId,
            "PUSH_APNS_HOST": "localhost",
            "PUSH_APNS_PORT": String(server.port),
        ]
    }
}
