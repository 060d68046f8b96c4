import PushCore
import PushHTTP

/// Delivers through FCM HTTP v1: `POST /v1/projects/{project}/messages:send` with an
/// OAuth2 bearer token of the project's service account.
public struct FCMProvider: PushProvider {
    public let id = ProviderID.fcm
    public var targetFormat: any TargetFormat { FCMTargetFormat() }
    private let configuration: FCMConfiguration
    private let transport: any HTTPTransport
    private let tokens: [String: FCMAccessTokens]
    private let templates: any PayloadTemplates

    public init(
        configuration: FCMConfiguration, transport: any HTTPTransport,
        templates: any PayloadTemplates = BuiltInPayloads(),
        clock: @escaping @Sendable () -> Int64 = currentTimeMilliseconds
    ) throws {
        self.configuration = configuration
        self.templates = templates
        self.transport = transport
        var tokens: [String: FCMAccessTokens] = [:]
        for account in configuration.accounts {
            tokens[account.projectId] = try FCMAccessTokens(
                account: account, transport: transport,
                tls: TLSOptions(caFile: configuration.caFile), clock: clock)
        }
        self.tokens = tokens
    }

    public func accessTokens(for projectId: String) -> FCMAccessTokens? { tokens[projectId] }

    /// One project's service account and quota serve all its targets: OAuth refusals, quota and outages stop the
    /// project (one breaker, one concurrency limit). The APNs key and web credentials the project holds are
    /// per platform, so THIRD_PARTY_AUTH_ERROR stops only the target's platform, `<project>/<platform>`, and
    /// opens no circuit when the target does not say its platform. A target naming no project uses the default one.
    /// A 429 (QUOTA_EXCEEDED) is the project's quota, which Firebase refills "in the following minute": it holds every
    /// send of the project for its Retry-After (or a minute), at most a minute.
    public func scope(of target: Target) -> DeliveryScope {
        DeliveryScope(
            provider: id, key: configuration.projectId(for: target.app) ?? "-", part: configuration.platform(of: target),
            endpoint: configuration.endpoint, rateLimitHold: FCMResponse.quotaBackoff)
    }

    public func deliver(_ delivery: Delivery) async -> DeliveryResult {
        // Checked and built out of line, sent by a function of its own: a job in flight keeps this
        // function's async frame (docs/writing-a-provider.md).
        let message: Message
        switch prepare(delivery) {
        case .ready(let ready): message = ready
        case .refused(let result): return result
        }
        return await send(message, for: delivery)
    }

    /// A message body ready to send.
    private struct Message {
        let body: [UInt8]
        let projectId: String
        let source: FCMAccessTokens
        let truncated: Bool
    }

    @inline(never)
    private func prepare(_ delivery: Delivery) -> Prepared<Message> {
        guard let projectId = configuration.projectId(for: delivery.target.app), let source = tokens[projectId] else {
            return .refused(.failed(reason: "no FCM service account for project \(delivery.target.app ?? "(none)")", httpStatus: nil))
        }
        if let key = FCMMessage.reservedDataKey(in: delivery.job.data) {
            return .refused(.failed(reason: Self.reservedKeyReason(key), httpStatus: nil))
        }
        if case .object(let data)? = delivery.job.overrides[.fcm]?["message"]?["data"],
            let key = data.map(\.key).filter(FCMMessage.isReservedDataKey).min()
        {
            return .refused(.failed(reason: Self.reservedKeyReason(key) + " (overrides.fcm)", httpStatus: nil))
        }
        var body: [UInt8]
        var truncated = false
        let platform = configuration.platform(of: delivery.target)
        func keywords() -> PayloadKeywords {
            var keywords = PayloadKeywords(delivery: delivery, app: projectId)
            let (pushType, priority) = FCMMessage.apnsHeaders(delivery.job)
            keywords.set("PUSHTYPE", pushType)
            keywords.set("APRIORITY", priority)
            return keywords
        }
        switch templates.render(PayloadTemplateKey(provider: .fcm, app: projectId, kind: delivery.job.kind), keywords: keywords()) {
        case nil:
            if platform == "ios", FCMMessage.needsVoIPOnApple(delivery.job) {
                return .refused(.failed(reason: Self.callsToIOSReason(delivery.job.kind), httpStatus: nil))
            }
            let override = delivery.job.overrides[.fcm]
            let measured = { (notification: Notification?) in
                FCMMessage.payload(
                    of: PayloadOverride.apply(
                        override,
                        to: FCMMessage.body(
                            delivery, platform: platform, notification: notification,
                            includingToken: false)))
            }
            guard let fitted = AlertFitting.fit(delivery.job.notification, limit: FCMMessage.largestPayloadBytes, build: measured) else {
                return .refused(
                    .failed(
                        reason: "the FCM payload (data and notification) is \(measured(delivery.job.notification).count) bytes "
                            + "even with an empty body; FCM accepts \(FCMMessage.largestPayloadBytes); not sent", httpStatus: nil))
            }
            body = PayloadOverride.apply(override, to: FCMMessage.body(delivery, platform: platform, notification: fitted.notification))
            truncated = fitted.truncated
        case .success(let rendered)?:
            if case .object(let data)? = rendered.document["message"]?["data"],
                let key = data.map(\.key).filter(FCMMessage.isReservedDataKey).min()
            {
                return .refused(.failed(reason: Self.reservedKeyReason(key) + " (template \(rendered.source))", httpStatus: nil))
            }
            var rendered = rendered
            if configuration.removeNotification.removes(delivery.job.kind) {
                rendered.document = rendered.document.removing(["message", "notification"]).removing(["message", "android", "notification"])
            }
            body = PayloadOverride.apply(delivery.job.overrides[.fcm], to: rendered.bytes())
        case .failure(let failure)?: return .refused(.failed(reason: "payload template \(failure); not sent", httpStatus: nil))
        }
        return .ready(Message(body: body, projectId: projectId, source: source, truncated: truncated))
    }

    @inline(never)
    private func send(_ message: Message, for delivery: Delivery) async -> DeliveryResult {
        let token: String
        do {
            token = try await message.source.token()
        } catch .refused(let detail) {
            return .failed(reason: detail, httpStatus: nil, action: .checkCredentials)
        } catch {
            return .retryable(reason: "\(error)", httpStatus: nil)
        }
        let request = HTTPRequest(
            url: "\(configuration.endpoint)/v1/projects/\(message.projectId)/messages:send",
            headers: [("authorization", "Bearer \(token)"), ("content-type", "application/json")],
            body: message.body, timeout: configuration.timeout,
            tls: TLSOptions(caFile: configuration.caFile))
        let result = await HTTPDelivery.send(request, for: delivery, over: transport, classify: FCMResponse.classify)
            .truncated(message.truncated)
        // 401 UNAUTHENTICATED: the access token was not accepted. Fetch a new one once; if a
        // fresh token is refused too, the credentials are at fault (and the circuit opens).
        // THIRD_PARTY_AUTH_ERROR is a 401 about the project's APNs or web credentials, blamed on the part.
        if case .failed(let reason, 401?, .checkCredentials, .scope) = result {
            if await message.source.rejected(token) {
                return .retryable(reason: "\(reason) (access token renewed)", httpStatus: 401)
            }
        }
        return result
    }

    /// A call or cancel to an iOS token with nothing to show could only be a background push, which Apple delivers at
    /// its discretion (FCM sends data messages to Apple devices at priority 5).
    static func callsToIOSReason(_ kind: JobKind) -> String {
        "calls to iOS need APNs VoIP: a \(kind.rawValue) to an iOS token through FCM with nothing to show (no title, body, "
            + "sound or badge) could only be a background push, which Apple delivers at its discretion; not sent"
    }

    static func reservedKeyReason(_ key: String) -> String {
        "data key \"\(key)\" is reserved by FCM (from, message_type, google*, gcm*); not sent"
    }

    public func shutdown() async { transport.shutdown() }
}
