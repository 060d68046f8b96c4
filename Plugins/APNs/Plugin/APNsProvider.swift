import Foundation
import Logging
import PushCore
import PushCrypto
import PushHTTP
import PushPluginAPI

/// Delivers to APNs over HTTP/2: per-target environment, token or certificate auth per app.
public struct APNsProvider: RequestDelivery {
    public let id = ProviderID.apns
    public var targetFormat: any TargetFormat { APNsTargetFormat() }
    private let configuration: APNsConfiguration
    public let transport: any HTTPTransport
    private let apps: [String: APNsApp]
    /// One token cache per (team, key), shared by the apps that use it.
    private let tokens: [String: APNsTokenCache]
    /// Each client certificate's connection identity (its content when the provider was built).
    private let certificateIdentities: [TLSOptions: ConnectionIdentity]
    public let connectionIdentities: Set<ConnectionIdentity>
    private let logger: Logger
    private let templates: any PayloadTemplates
    /// Each configured app's scope per environment, made once: a scope is asked for twice per job.
    private let scopes: [String: AppScopes]
    private let connectionLifetime: HTTPConnectionLifetime

    /// The lifetime of APNs connections unless `PUSH_APNS_IDLE_CONNECTION_S` says otherwise (`APNsConfiguration.defaultConnectionLifetime`).
    public static let connectionLifetime = APNsConfiguration.defaultConnectionLifetime

    /// A class, so a lookup hands out a reference instead of copying the app's settings.
    private final class AppScopes: Sendable {
        let app: APNsApp
        let production: DeliveryScope
        let sandbox: DeliveryScope

        init(app: APNsApp, production: DeliveryScope, sandbox: DeliveryScope) {
            self.app = app
            self.production = production
            self.sandbox = sandbox
        }
    }

    public init(
        configuration: APNsConfiguration, transport: any HTTPTransport, logger: Logger,
        templates: any PayloadTemplates = BuiltInPayloads(),
        clock: @escaping @Sendable () -> Int64 = currentTimeMilliseconds,
        connectionLifetime: HTTPConnectionLifetime = APNsProvider.connectionLifetime,
        predecessor: APNsProvider? = nil
    ) throws {
        self.configuration = configuration
        self.connectionLifetime = connectionLifetime
        self.templates = templates
        self.transport = transport
        self.logger = logger
        var apps: [String: APNsApp] = [:]
        var tokens: [String: APNsTokenCache] = [:]
        var certificateIdentities: [TLSOptions: ConnectionIdentity] = [:]
        for app in configuration.apps {
            apps[app.bundleId] = app
            for authentication in [app.authentication, app.voipAuthentication] as [APNsApp.Authentication?] {
                switch authentication {
                case .token(let keyFile, let keyId, let teamId)?:
                    let signingKey = Self.signingKey(teamId: teamId, keyId: keyId)
                    if tokens[signingKey] == nil {
                        let pem = try String(contentsOfFile: keyFile, encoding: .utf8)
                        // A key whose file did not change keeps its token across a reload: Apple refuses a new one within 20 minutes.
                        let digest = Digest.sha256(Array(pem.utf8))
                        if let kept = predecessor?.tokens[signingKey], kept.keyDigest == digest {
                            tokens[signingKey] = kept
                        } else {
                            tokens[signingKey] = APNsTokenCache(
                                key: try PrivateKey(pem: pem), keyDigest: digest, keyId: keyId, teamId: teamId,
                                clock: clock)
                        }
                    }
                case .certificate(let tls)?:
                    if certificateIdentities[tls] == nil { certificateIdentities[tls] = tls.clientCertificateIdentity }
                case nil:
                    break
                }
            }
        }
        self.apps = apps
        self.tokens = tokens
        self.certificateIdentities = certificateIdentities
        connectionIdentities = Set(tokens.keys.map(ConnectionIdentity.init)).union(certificateIdentities.values)
        scopes = apps.mapValues { app in
            AppScopes(
                app: app, production: Self.scope(app, .production, configuration: configuration),
                sandbox: Self.scope(app, .sandbox, configuration: configuration))
        }
    }

    /// A provider-token signing key, as the token caches and the connections that carry its tokens know it.
    private static func signingKey(teamId: String, keyId: String) -> String { "\(teamId)/\(keyId)" }

    /// An app in one environment. Its endpoint (`DeliveryScope.endpoint`) is the connections its requests go over
    /// (`connectionIdentity(for:)`): the environment's URL and signing key, shared by every app that signs with that key; an
    /// app with a client certificate has connections of its own.
    private static func scope(_ app: APNsApp, _ environment: APNsEnvironment, configuration: APNsConfiguration) -> DeliveryScope {
        let url = environment == .sandbox ? configuration.sandboxURL : configuration.productionURL
        var connections = app.bundleId
        if !app.hasCertificate, case .token(_, let keyId, let teamId) = app.authentication {
            connections = signingKey(teamId: teamId, keyId: keyId)
        }
        return scope(app.bundleId, environment, configuration: configuration, endpoint: "\(url) \(connections)")
    }

    private static func scope(
        _ bundleId: String, _ environment: APNsEnvironment, configuration: APNsConfiguration,
        endpoint: String?
    ) -> DeliveryScope {
        DeliveryScope(provider: .apns, key: "\(bundleId)/\(environment.rawValue)", metricLabel: bundleId, endpoint: endpoint)
    }

    func tokenCache(for authentication: APNsApp.Authentication) -> APNsTokenCache? {
        guard case .token(_, let keyId, let teamId) = authentication else { return nil }
        return tokens[Self.signingKey(teamId: teamId, keyId: keyId)]
    }

    /// Whom the connection of a request with these credentials speaks for: APNs binds a connection to the signing key of
    /// the first provider token it accepted on it (`ConnectionIdentity`), and a client certificate is one per connection
    /// by construction of TLS.
    private func connectionIdentity(for authentication: APNsApp.Authentication) -> ConnectionIdentity? {
        switch authentication {
        case .token(_, let keyId, let teamId): ConnectionIdentity(Self.signingKey(teamId: teamId, keyId: keyId))
        case .certificate(let tls): certificateIdentities[tls]
        }
    }

    /// Apple keeps production and sandbox apart (their own hosts, and a key or certificate may be
    /// valid for one only), so a 403 from one environment says nothing about the other.
    public func scope(of target: Target) -> DeliveryScope {
        let bundleId = app(of: target)?.bundleId ?? target.app ?? configuration.defaultBundleId ?? "-"
        guard let known = scopes[bundleId] else {
            return Self.scope(bundleId, .production, configuration: configuration, endpoint: configuration.productionURL)
        }
        return known.app.environment(of: target) == .sandbox ? known.sandbox : known.production
    }

    /// How an answer is read: whether the target named its environment, and the guess if not.
    public static func classify(_ response: HTTPResponse, of sending: Sending, for delivery: Delivery) -> DeliveryResult {
        let details = delivery.target.details(APNsTarget.self)
        let environmentNamed = details?.namesEnvironment ?? false
        let guessed = details?.environment == nil ? APNsResponse.defaultEnvironmentGuess : APNsResponse.rfc8599ProductionGuess
        return APNsResponse.classify(response, environmentNamed: environmentNamed, guessedEnvironment: guessed)
    }

    /// What reading the answer to a request needs.
    public struct Sending: Sendable {
        let logger: Logger
        /// The cache of the provider token it carries (token authentication), told when APNs finds the token expired.
        let tokens: APNsTokenCache?
        let bearer: String?
        let bundleId: String
        let pushType: APNsPushType
        let truncated: Bool
        /// Of a dual binding, the token the request went to.
        let half: BindingToken?
    }

    @inline(never)
    public func prepare(_ delivery: Delivery) -> Prepared<PreparedRequest<Sending>>? {
        guard let app = app(of: delivery.target) else {
            return .refused(.failed(reason: "no APNs credentials for app \(delivery.target.app ?? "(none)")", httpStatus: nil))
        }
        let bundleId = app.bundleId
        var built: APNsRequest.Built
        do {
            built = try APNsRequest.build(delivery, app: app, templates: templates)
        } catch {
            return .refused(Self.result(of: error, delivery: delivery, bundleId: bundleId))
        }
        // Taken out, so the `authorization` below goes into the room left for it instead of a copy of the array.
        var headers = built.headers
        built.headers = []
        var tls = TLSOptions(caFile: configuration.caFile)
        var bearer: String?
        var tokens: APNsTokenCache?
        let authentication = app.authentication(for: built.pushType)
        switch authentication {
        case .token:
            tokens = tokenCache(for: authentication)
            do {
                bearer = try tokens?.token()
            } catch {
                return .refused(.failed(reason: "cannot sign the provider token: \(error)", httpStatus: nil, action: .checkCredentials))
            }
            headers.append(("authorization", "bearer \(bearer ?? "")"))
        case .certificate(let certificate):
            tls = certificate
            tls.caFile = configuration.caFile
        }
        let base = app.environment(of: delivery.target) == .sandbox ? configuration.sandboxURL : configuration.productionURL
        let request = HTTPRequest(
            url: base + built.path, headers: headers, body: built.payload,
            timeout: configuration.timeout, tls: tls, connectionLifetime: connectionLifetime,
            connectionIdentity: connectionIdentity(for: authentication))
        return .ready(
            PreparedRequest(
                request,
                Sending(
                    logger: logger, tokens: tokens, bearer: bearer, bundleId: bundleId,
                    pushType: built.pushType, truncated: built.truncated,
                    half: delivery.target.details(APNsTarget.self)?.half(sentAs: built.pushType))))
    }

    /// The configured app a target goes to: its `app` (else the default bundle id), or else the other reading of its
    /// RFC 8599 `pn-param` (`APNsTarget.alternativeBundleId`) — the first label is the team id whenever the rest names
    /// a configured app, and part of the bundle id whenever the whole does.
    private func app(of target: Target) -> APNsApp? {
        if let app = apps[target.app ?? configuration.defaultBundleId ?? ""] { return app }
        return target.details(APNsTarget.self)?.alternativeBundleId.flatMap { apps[$0] }
    }

    /// A request not built: `failed`, unsent, saying why.
    private static func result(of refusal: APNsRequest.Refusal, delivery: Delivery, bundleId: String) -> DeliveryResult {
        let reason: String
        switch refusal {
        case .payloadTooLarge(let size, let limit):
            reason = "PayloadTooLarge: \(size) bytes, the limit is \(limit)"
        case .template(let failure):
            reason = "payload template \(failure)"
        case .destination(.notForPushKitToken(let pushType, let notation)):
            let token =
                notation == .xmpush
                ? "an X-MPUSH i: token, which app \(bundleId) declares a PushKit (VoIP) token"
                : "a PushKit (VoIP) token"
            reason = "the binding is \(token), for calls only: a \(delivery.job.kind.rawValue) push would go as \(pushType.rawValue)"
        case .liveActivityMissing:
            reason = "the target's push type is liveactivity and the job has no liveActivity"
        case .liveActivityStartWithoutAlert:
            reason = "a Live Activity start needs an alert (a title or body) and the job's notification has none"
        case .needsTokenAuthentication(let pushType):
            reason = "the \(pushType.rawValue) push type needs token authentication"
        }
        return .failed(reason: reason + "; not sent", httpStatus: nil)
    }

    @inline(never)
    public static func read(_ answer: DeliveryResult, of sending: Sending, for delivery: Delivery) -> DeliveryResult {
        var result = answer.truncated(sending.truncated)
        if case .rejected(let reason, let status, let since, nil) = result, let half = sending.half {
            let other: BindingToken = half == .voip ? .remote : .voip
            result = .rejected(
                reason: "\(reason): the \(half.rawValue) token of this voip&remote binding; its \(other.rawValue) token is kept",
                httpStatus: status, invalidSince: since, token: half)
        }
        switch result {
        case .retryable("ExpiredProviderToken", _, _):
            if let bearer = sending.bearer { sending.tokens?.rejected(bearer) }
        case .retryable(APNsResponse.unrelatedKeyId, _, _):
            sending.logger.error(
                "APNs saw provider tokens of two keys on one connection: a bug to report",
                metadata: [
                    "bundleId": "\(sending.bundleId)", "pushType": "\(sending.pushType.rawValue)",
                ])
        case .failed(let reason, 400?, .none, _):
            sending.logger.error(
                "APNs refused a request push-worker built: a bug to report",
                metadata: [
                    "reason": "\(reason)", "bundleId": "\(sending.bundleId)", "pushType": "\(sending.pushType.rawValue)",
                ])
        default:
            break
        }
        return result
    }

    public func shutdown() async { transport.shutdown() }
}
