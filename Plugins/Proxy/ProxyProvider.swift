import PushCore
import PushHTTP

/// Delivers to the customer's push proxy: one POST per target.
public struct ProxyProvider: PushProvider {
    public let id = ProviderID.proxy
    public var targetFormat: any TargetFormat { ProxyTargetFormat() }
    private let configuration: ProxyConfiguration
    private let transport: any HTTPTransport

    public init(configuration: ProxyConfiguration, transport: any HTTPTransport) {
        self.configuration = configuration
        self.transport = transport
    }

    public func deliver(_ delivery: Delivery) async -> DeliveryResult {
        let request = HTTPRequest(url: configuration.url,
                                  headers: [("content-type", "application/json")],
                                  body: ProxyRequestBody.encode(delivery),
                                  timeout: configuration.timeout,
                                  tls: configuration.tls)
        return await HTTPDelivery.send(request, for: delivery, over: transport, classify: Self.classify)
    }

    public func shutdown() async { transport.shutdown() }

    /// The spec's status table: 200 done; 400/404 do not resend; 403 the user is unknown,
    /// stop sending to its bindings; 500/503 retry (503 with Retry-After); anything else is temporary.
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
            return .retryable(reason: "proxy answered \(status)", httpStatus: status)
        }
    }
}
