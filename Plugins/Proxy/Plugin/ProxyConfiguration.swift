import PushHTTP

/// The customer's push proxies (BlackBerry Spark push-proxy protocol 0.2): one per app, and a default.
public struct ProxyConfiguration: Sendable {
    /// The default proxy: serves targets without `app` and apps without a proxy of their own.
    public var defaultEndpoint: ProxyEndpoint?
    /// Proxies by the targets' `app`.
    public var endpoints: [String: ProxyEndpoint]
    /// How long deliveries of one job to one proxy wait for the job's other targets, to go out in one request.
    public var gatheringWindow: Duration

    public init(url: String, tls: TLSOptions = TLSOptions(), timeout: Duration = .seconds(10)) {
        self.init(defaultEndpoint: ProxyEndpoint(url: url, tls: tls, timeout: timeout))
    }

    public init(defaultEndpoint: ProxyEndpoint?, endpoints: [String: ProxyEndpoint] = [:], gatheringWindow: Duration = .milliseconds(20)) {
        self.defaultEndpoint = defaultEndpoint
        self.endpoints = endpoints
        self.gatheringWindow = gatheringWindow
    }

    /// The proxy of a target's app.
    public func endpoint(for app: String?) -> ProxyEndpoint? { app.flatMap { endpoints[$0] } ?? defaultEndpoint }
}

/// One push proxy: its HTTPS URL, the CA it is trusted with and the client certificate (mutual TLS).
public struct ProxyEndpoint: Sendable, Equatable {
    public var url: String
    public var tls: TLSOptions
    public var timeout: Duration

    public init(url: String, tls: TLSOptions = TLSOptions(), timeout: Duration = .seconds(10)) {
        self.url = url
        self.tls = tls
        self.timeout = timeout
    }
}
