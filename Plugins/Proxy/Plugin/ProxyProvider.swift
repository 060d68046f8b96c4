import PushCore
import PushHTTP
import PushPluginAPI

/// Delivers to the customer's push proxy: one POST per job and proxy, carrying every endpoint of the job's
/// targets there (`endpointData`), each target getting the request's outcome. A job is its instance
/// (`EndpointGathering`), never its id: jobs that reuse an id are never sent in one request.
public struct ProxyProvider: RequestDelivery {
    public let id = ProviderID.proxy
    public var targetFormat: any TargetFormat { ProxyTargetFormat() }
    private let configuration: ProxyConfiguration
    public let transport: any HTTPTransport
    private let gathering: EndpointGathering
    /// The scopes' endpoints (`DeliveryScope.endpoint`), by app and for the default proxy: proxies with one URL and one client
    /// identity share connections.
    private let scopeEndpoints: [String: String]
    private let defaultScopeEndpoint: String?
    /// Each client certificate's connection identity (its content when the provider was built): one certificate per
    /// connection, and a certificate rotated at the same path gets connections of its own.
    private let certificateIdentities: [TLSOptions: ConnectionIdentity]
    public var connectionIdentities: Set<ConnectionIdentity> { Set(certificateIdentities.values) }

    public init(configuration: ProxyConfiguration, transport: any HTTPTransport) {
        self.configuration = configuration
        self.transport = transport
        let scopeEndpoint = { (endpoint: ProxyEndpoint) in "\(endpoint.url) \(endpoint.tls.clientCertificateFile?.path ?? "")" }
        scopeEndpoints = configuration.endpoints.mapValues(scopeEndpoint)
        defaultScopeEndpoint = configuration.defaultEndpoint.map(scopeEndpoint)
        var identities: [TLSOptions: ConnectionIdentity] = [:]
        for endpoint in Array(configuration.endpoints.values) + [configuration.defaultEndpoint].compactMap({ $0 }) {
            if identities[endpoint.tls] == nil { identities[endpoint.tls] = endpoint.tls.clientCertificateIdentity }
        }
        let certificateIdentities = identities
        self.certificateIdentities = certificateIdentities
        gathering = EndpointGathering(window: configuration.gatheringWindow) { deliveries in
            await Self.send(deliveries, configuration: configuration, certificateIdentities: certificateIdentities, transport: transport)
        }
    }

    public func scope(of target: Target) -> DeliveryScope {
        DeliveryScope(provider: id, key: target.app ?? "-", endpoint: target.app.flatMap { scopeEndpoints[$0] } ?? defaultScopeEndpoint)
    }

    /// A delivery whose job has other targets at the same proxy waits for them (`EndpointGathering`), and their
    /// request goes once they are gathered.
    public func deliver(_ delivery: Delivery) async -> DeliveryResult {
        // Checked out of line: a job in flight keeps this function's async frame (docs/writing-a-provider.md).
        guard let sameProxy = targetsAtTheSameProxy(as: delivery), sameProxy > 1 else { return await deliverRequest(delivery) }
        return await gathering.deliver(delivery, expected: sameProxy)
    }

    /// The request of a job's only target at its proxy; nil when others go to the same proxy (they are gathered).
    public func prepare(_ delivery: Delivery) -> Prepared<PreparedRequest<Void>>? {
        guard let sameProxy = targetsAtTheSameProxy(as: delivery) else { return .refused(Self.noProxy(for: delivery)) }
        guard sameProxy == 1 else { return nil }
        let request = Self.request(for: [delivery], configuration: configuration, certificateIdentities: certificateIdentities)
        return request.map { .ready(PreparedRequest($0, ())) } ?? .refused(Self.noProxy(for: delivery))
    }

    /// How many of the job's targets go to the delivery's proxy, its own included; nil when no proxy takes its app.
    @inline(never)
    private func targetsAtTheSameProxy(as delivery: Delivery) -> Int? {
        guard configuration.endpoint(for: delivery.target.app) != nil else { return nil }
        return delivery.job.targets.count { $0.provider == id && $0.isDeliverable && $0.app == delivery.target.app }
    }

    @inline(never)
    private static func noProxy(for delivery: Delivery) -> DeliveryResult {
        .failed(reason: "no push proxy for app \(delivery.target.app ?? "(none)")", httpStatus: nil)
    }

    /// One request for the gathered deliveries of a job at one proxy, read for the first.
    private static func send(
        _ deliveries: [Delivery], configuration: ProxyConfiguration,
        certificateIdentities: [TLSOptions: ConnectionIdentity], transport: any HTTPTransport
    ) async -> DeliveryResult {
        guard let request = request(for: deliveries, configuration: configuration, certificateIdentities: certificateIdentities) else {
            return .failed(reason: "no push proxy", httpStatus: nil)
        }
        return await exchange(PreparedRequest(request, ()), for: deliveries[0], over: transport)
    }

    // Out of line, so the request is built outside `send`'s async frame, which every job in flight keeps
    // (docs/writing-a-provider.md).
    @inline(never)
    private static func request(
        for deliveries: [Delivery], configuration: ProxyConfiguration,
        certificateIdentities: [TLSOptions: ConnectionIdentity]
    ) -> HTTPRequest? {
        guard let first = deliveries.first, let endpoint = configuration.endpoint(for: first.target.app) else { return nil }
        return HTTPRequest(
            url: endpoint.url, headers: [("content-type", "application/json")],
            body: ProxyRequestBody.encode(deliveries), timeout: endpoint.timeout, tls: endpoint.tls,
            connectionIdentity: certificateIdentities[endpoint.tls])
    }

    /// A 403 names the job's user: the proxy does not know it.
    @inline(never)
    public static func read(_ result: DeliveryResult, of sending: Void, for first: Delivery) -> DeliveryResult {
        if case .rejected(_, let status, _, _) = result {
            return .rejected(
                reason: "proxy does not know user \(first.job.userId): stop pushing to it until it registers a new endpoint",
                httpStatus: status)
        }
        return result
    }

    public func shutdown() async { transport.shutdown() }

    public static func classify(_ response: HTTPResponse, of sending: Void, for delivery: Delivery) -> DeliveryResult {
        classify(response)
    }

    /// The spec's status table: 200 done; 400/404 do not resend; 403 the user is unknown,
    /// stop sending to its bindings; 500/503 retry (503 with Retry-After); anything else is temporary, after the
    /// Retry-After it may carry (a 429's, RFC 6585 §4).
    static func classify(_ response: HTTPResponse) -> DeliveryResult {
        let status = response.status
        switch status {
        case 200:
            return .delivered(providerMessageId: nil, httpStatus: status)
        case 400:
            return .failed(reason: "proxy could not understand the request", httpStatus: status)
        case 403:
            return .rejected(reason: "proxy does not know this user", httpStatus: status)
        case 404:
            return .failed(reason: "proxy is not operational at this URL", httpStatus: status)
        case 503:
            return .retryable(reason: "proxy unavailable", httpStatus: status, retryAfter: HTTPDelivery.retryAfter(response))
        default:
            return .retryable(reason: "proxy answered \(status)", httpStatus: status, retryAfter: HTTPDelivery.retryAfter(response))
        }
    }
}
