import PushCore
import PushHTTP

/// Delivers through Huawei Push Kit v1: `POST {endpoint}/v1/{appId}/messages:send` with the app's
/// OAuth 2.0 access token, one device token per request.
public struct HMSProvider: PushProvider {
    public let id = ProviderID.hms
    public var targetFormat: any TargetFormat { HMSTargetFormat() }
    private let configuration: HMSConfiguration
    private let transport: any HTTPTransport
    private let tokens: [String: HMSAccessTokens]
    /// Each app's notification category.
    private let categories: [String: String]

    public init(
        configuration: HMSConfiguration, transport: any HTTPTransport,
        clock: @escaping @Sendable () -> Int64 = currentTimeMilliseconds
    ) {
        self.configuration = configuration
        self.transport = transport
        let tls = TLSOptions(caFile: configuration.caFile)
        tokens = Dictionary(
            configuration.apps.map { app in
                (app.appId, HMSAccessTokens(app: app, tokenURL: configuration.tokenURL, transport: transport, tls: tls, clock: clock))
            }
        ) { first, _ in first }
        categories = Dictionary(configuration.apps.map { ($0.appId, $0.category) }) { first, _ in first }
    }

    public func accessTokens(for appId: String) -> HMSAccessTokens? { tokens[appId] }

    /// One app's OAuth client and quota serve all its targets: a refused secret or flow control stops that app
    /// (`hms/<appId>`), never another.
    public func scope(of target: Target) -> DeliveryScope {
        DeliveryScope(provider: id, key: target.app ?? configuration.defaultAppId ?? "-", endpoint: configuration.endpoint)
    }

    public func deliver(_ delivery: Delivery) async -> DeliveryResult {
        // Checked and built out of line, sent by a function of its own: a job in flight keeps this
        // function's async frame (docs/writing-a-provider.md).
        let message: Message
        switch prepare(delivery) {
        case .ready(let ready): message = ready
        case .refused(let result): return result
        }
        let first = await send(message, for: delivery)
        // 80200001/80200003: the access token was refused (revoked, expired early). Fetch a new one once;
        // a fresh token refused again means the credentials are at fault.
        guard case .accessTokenRefused(let accessToken, let refusal) = first else { return first.result.truncated(message.truncated) }
        guard await message.source.rejected(accessToken) else { return refusal }
        return await send(message, for: delivery).result.truncated(message.truncated)
    }

    /// A message ready to send.
    private struct Message {
        let body: [UInt8]
        let appId: String
        let deviceToken: String
        let source: HMSAccessTokens
        let truncated: Bool
    }

    @inline(never)
    private func prepare(_ delivery: Delivery) -> Prepared<Message> {
        guard let appId = delivery.target.app ?? configuration.defaultAppId, let source = tokens[appId] else {
            return .refused(.failed(reason: "no HMS app \(delivery.target.app ?? "(none)") is configured", httpStatus: nil))
        }
        guard let deviceToken = delivery.target.details(HMSTarget.self)?.token else {
            return .refused(.failed(reason: "the HMS target has no token", httpStatus: nil))
        }
        // Huawei's limit is about the body without its tokens; the summary's alert is shortened to fit it.
        let fitted: AlertFitting.Fitted
        switch AlertFitting.fit(
            delivery.job.notification, limit: HMSMessage.largestBodyBytes, override: delivery.job.overrides[.hms],
            build: {
                HMSMessage.bodyBeforeOverride(delivery.replacingNotification($0), tokens: [], category: categories[appId])
            })
        {
        case .success(let fitting): fitted = fitting
        case .failure(let tooLarge):
            return .refused(
                .failed(
                    reason: "the HMS message is \(tooLarge.size) bytes; Huawei accepts at most "
                        + "\(HMSMessage.largestBodyBytes) (without the token); not sent", httpStatus: nil))
        }
        let body = HMSMessage.body(
            delivery.replacingNotification(fitted.notification), tokens: [deviceToken], category: categories[appId])
        return .ready(Message(body: body, appId: appId, deviceToken: deviceToken, source: source, truncated: fitted.truncated))
    }

    private indirect enum Attempt {
        case classified(DeliveryResult)
        case accessTokenRefused(accessToken: String, DeliveryResult)

        var result: DeliveryResult {
            switch self {
            case .classified(let result), .accessTokenRefused(_, let result): result
            }
        }
    }

    @inline(never)
    private func send(_ message: Message, for delivery: Delivery) async -> Attempt {
        let (body, appId, deviceToken) = (message.body, message.appId, message.deviceToken)
        let accessToken: String
        do {
            accessToken = try await message.source.token()
        } catch {
            switch error {
            case .refused(let detail): return .classified(.failed(reason: detail, httpStatus: nil, action: .checkCredentials))
            case .unavailable(let detail): return .classified(.retryable(reason: detail, httpStatus: nil))
            }
        }
        let request = HTTPRequest(
            url: "\(configuration.endpoint)/v1/\(appId)/messages:send",
            headers: [("authorization", "Bearer \(accessToken)"), ("content-type", "application/json;charset=utf-8")],
            body: body, timeout: configuration.timeout, tls: TLSOptions(caFile: configuration.caFile))
        var refusesAccessToken = false
        let result = await HTTPDelivery.send(request, for: delivery, over: transport) { response in
            let answer = HMSAnswer(response)
            refusesAccessToken = answer.refusesAccessToken
            return HMSResponse.classify(answer, token: deviceToken, targetNamesApp: delivery.target.app != nil)
        }
        return refusesAccessToken ? .accessTokenRefused(accessToken: accessToken, result) : .classified(result)
    }

    public func shutdown() async { transport.shutdown() }
}
