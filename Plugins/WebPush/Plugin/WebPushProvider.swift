import PushCore
import PushCrypto
import PushHTTP

/// Delivers to a browser's push service (FCM web, Mozilla autopush, Apple web push…) at
/// the subscription endpoint: RFC 8291 encrypted body, RFC 8292 VAPID, RFC 8030 headers.
public struct WebPushProvider: PushProvider {
    public let id = ProviderID.webpush
    public var targetFormat: any TargetFormat { WebPushTargetFormat() }
    private let configuration: WebPushConfiguration
    private let transport: any HTTPTransport
    private let policy: EndpointPolicy
    private let vapid: VAPIDTokens
    /// Each app's own VAPID identity, by the targets' `app`.
    private let appVapid: [String: VAPIDTokens]
    private let templates: any PayloadTemplates
    /// The tokens of every VAPID identity, bounded.
    private let vapidTokenCache: VAPIDTokenCache

    public init(
        configuration: WebPushConfiguration, transport: any HTTPTransport, templates: any PayloadTemplates = BuiltInPayloads(),
        clock: @escaping @Sendable () -> Int64 = currentTimeMilliseconds
    ) throws {
        try self.init(configuration: configuration, transport: transport, templates: templates, clock: clock, resolver: nil)
    }

    /// `resolver`: the host resolver to use instead of one with the configured DNS timeout (tests inject lookups).
    init(
        configuration: WebPushConfiguration, transport: any HTTPTransport, templates: any PayloadTemplates = BuiltInPayloads(),
        clock: @escaping @Sendable () -> Int64 = currentTimeMilliseconds, resolver: HostResolver?
    ) throws {
        self.configuration = configuration
        self.transport = transport
        self.templates = templates
        policy = EndpointPolicy(
            EndpointPolicy.Rules(
                allowPrivateNetworks: configuration.allowPrivateNetworks, allowedNetworks: configuration.allowedNetworks,
                allowedHosts: configuration.allowedHosts, allowedPorts: configuration.allowedPorts,
                nat64Prefixes: configuration.nat64Prefixes,
                resolvingProxy: configuration.resolveViaProxy ? configuration.egressProxy : nil),
            resolver: resolver ?? HostResolver(limits: HostResolver.Limits(timeout: configuration.dnsTimeout)))
        let tokenCache = VAPIDTokenCache()
        vapidTokenCache = tokenCache
        vapid = try VAPIDTokens(
            key: configuration.vapidKey, subject: configuration.subject,
            lifetime: configuration.tokenLifetime, cache: tokenCache, clock: clock)
        var appVapid: [String: VAPIDTokens] = [:]
        for (app, identity) in configuration.apps {
            appVapid[app] = try VAPIDTokens(
                key: identity.key, subject: identity.subject, lifetime: configuration.tokenLifetime,
                cache: tokenCache, clock: clock)
        }
        self.appVapid = appVapid
    }

    /// The VAPID identity a target's pushes are signed with: its app's, else the default one.
    func vapidTokens(for target: Target) -> VAPIDTokens { target.app.flatMap { appVapid[$0] } ?? vapid }

    /// A push service answers for its own subscriptions: breakers and slots are per origin, and a
    /// 401/403 (one subscription's VAPID key mismatch) never stops the others. Origins are chosen
    /// by whoever registers a subscription, so they are not metric labels.
    public func scope(of target: Target) -> DeliveryScope {
        let origin = if case .success(let parts)? = target.details(WebPushTarget.self)?.parsedEndpoint { parts.origin } else { "-" }
        return DeliveryScope(provider: id, key: origin, metricLabel: "-", inFlightLimit: configuration.maximumInFlightPerOrigin)
    }

    public func deliver(_ delivery: Delivery) async -> DeliveryResult {
        // Checked and built out of line: a job in flight keeps this function's async frame
        // (docs/writing-a-provider.md).
        if let refusal = SafariVisibilityRule.refusal(delivery) { return refusal }
        let keys: SubscriptionKeys
        switch Self.subscriptionKeys(of: delivery) {
        case .ready(let decoded): keys = decoded
        case .refused(let result): return result
        }
        // One budget for the attempt: the DNS lookup takes its share, the request gets the rest.
        let attemptStarted = ContinuousClock.now
        let target: EndpointPolicy.Target
        switch await policy.check(keys.endpoint, within: configuration.timeout) {
        case .success(let allowed): target = allowed
        case .failure(let refusal) where refusal.retryable: return .retryable(reason: refusal.reason, httpStatus: nil)
        case .failure(let refusal): return .failed(reason: "endpoint refused, not sent: \(refusal.reason)", httpStatus: nil)
        }
        let remaining = configuration.timeout - (ContinuousClock.now - attemptStarted)
        guard remaining > .zero else {
            return .retryable(reason: "DNS lookup of the push service used the attempt's whole timeout", httpStatus: nil)
        }
        let message: Message
        switch prepare(delivery, keys: keys, target: target, timeout: remaining) {
        case .ready(let ready): message = ready
        case .refused(let result): return result
        }
        return await HTTPDelivery.send(message.request, for: delivery, over: transport, classify: Self.classify).truncated(
            message.truncated)
    }

    private struct SubscriptionKeys {
        let endpoint: Result<WebPushEndpoint, EndpointRefusal>
        let uaPublic: [UInt8]
        let authSecret: [UInt8]
    }

    /// An encrypted request ready to send.
    private struct Message {
        let request: HTTPRequest
        let truncated: Bool
    }

    @inline(never)
    private static func subscriptionKeys(of delivery: Delivery) -> Prepared<SubscriptionKeys> {
        guard let subscription = delivery.target.details(WebPushTarget.self), let endpoint = subscription.parsedEndpoint,
            let keys = subscription.keys
        else {
            return .refused(.failed(reason: "webpush target without endpoint or keys", httpStatus: nil))
        }
        guard let uaPublic = Base64URL.decode(keys.p256dh), uaPublic.count == 65,
            let authSecret = Base64URL.decode(keys.auth), authSecret.count == 16
        else {
            return .refused(
                .rejected(
                    reason: "subscription keys are malformed (p256dh must be a 65-byte point, auth 16 bytes)",
                    httpStatus: nil))
        }
        return .ready(SubscriptionKeys(endpoint: endpoint, uaPublic: uaPublic, authSecret: authSecret))
    }

    @inline(never)
    private func prepare(_ delivery: Delivery, keys: SubscriptionKeys, target: EndpointPolicy.Target, timeout: Duration) -> Prepared<
        Message
    > {
        let override = delivery.job.overrides[.webpush]?["payload"]
        let fitted: AlertFitting.Fitted
        let templateKey = PayloadTemplateKey(provider: id, app: delivery.target.app ?? "default", kind: delivery.job.kind)
        switch templates.render(templateKey, keywords: PayloadKeywords(delivery: delivery, app: delivery.target.app ?? "")) {
        case .success(let rendered)?:
            let payload = PayloadOverride.apply(override, to: rendered.bytes())
            guard payload.count <= WebPushRequest.largestPlaintext else {
                return .refused(
                    .failed(
                        reason: "payload template \(rendered.source) renders \(payload.count) bytes, more than the "
                            + "\(WebPushRequest.largestPlaintext) a push message can carry; not sent", httpStatus: nil))
            }
            fitted = AlertFitting.Fitted(payload: payload, notification: delivery.job.notification, truncated: false)
        case .failure(let failure)?:
            return .refused(.failed(reason: "payload template \(failure); not sent", httpStatus: nil))
        case nil:
            switch AlertFitting.fit(
                delivery.job.notification, limit: WebPushRequest.largestPlaintext, override: override,
                build: {
                    delivery.replacingNotification($0).job.summaryJSON()
                })
            {
            case .success(let shortened): fitted = shortened
            case .failure(let tooLarge):
                return .refused(
                    .failed(
                        reason: "payload of \(tooLarge.size) bytes exceeds 4096 bytes "
                            + "once encrypted even with an empty body; not sent", httpStatus: nil))
            }
        }
        let body: [UInt8]
        let authorization: String
        do {
            body = try WebPushEncryption.encrypt(fitted.payload, uaPublic: keys.uaPublic, authSecret: keys.authSecret)
            authorization = try vapidTokens(for: delivery.target).authorization(for: target.origin)
        } catch {
            return .refused(.rejected(reason: "cannot encrypt for this subscription: \(error)", httpStatus: nil))
        }
        var request = HTTPRequest(
            url: target.url, headers: WebPushRequest.headers(delivery) + [("authorization", authorization)],
            body: body, timeout: timeout, tls: TLSOptions(caFile: configuration.caFile),
            pinnedResolution: target.pinnedResolution, maximumResponseBytes: Self.maximumResponseBytes)
        request.resolvedByProxy = target.resolvedByProxy
        return .ready(Message(request: request, truncated: fitted.truncated))
    }

    public func shutdown() async { transport.shutdown() }

    /// Hosts with a cached DNS answer, and VAPID tokens held (all identities): bounded maps keyed by outside values.
    var boundedEntries: (dnsCache: Int, vapidTokens: Int) { (policy.resolver.cachedHosts, vapidTokenCache.count) }

    /// Push services answer with a status, a few headers and at most a short error document.
    static let maximumResponseBytes = 4096

    /// RFC 8030 answers: 201 (200, 202) accepted; 404/410 the subscription is gone; 400 and
    /// 413 our request is wrong; 401/403 the VAPID authorization of this subscription (RFC 8292 §4.2:
    /// a key that does not match the one the subscription was made with is refused with 403); 429 and 5xx later.
    static func classify(_ response: HTTPResponse) -> DeliveryResult {
        let status = response.status
        switch status {
        case 200, 201, 202:
            return .delivered(providerMessageId: response.header("location"), httpStatus: status)
        case 404, 410:
            return .rejected(reason: status == 410 ? "subscription expired or unsubscribed" : "subscription not found", httpStatus: status)
        case 401, 403:
            return .failed(
                reason: "push service refused the VAPID authorization for this subscription", httpStatus: status,
                action: .checkCredentials, blame: .request)
        case 429, 500...599:
            return .retryable(reason: "push service answered \(status)", httpStatus: status, retryAfter: HTTPDelivery.retryAfter(response))
        case 413:
            return .failed(reason: "push service says the payload is too large", httpStatus: status)
        default:
            return .failed(reason: "push service answered \(status)", httpStatus: status)
        }
    }
}
