import PushHTTP

/// The customer's push proxy (BlackBerry Spark push-proxy protocol 0.2).
public struct ProxyConfiguration: Sendable {
    /// The proxy's HTTPS endpoint URL.
    public var url: String
    /// Custom CA, and client certificate/key for mutual TLS.
    public var tls: TLSOptions
    public var timeout: Duration

    public init(url: String, tls: TLSOptions = TLSOptions(), timeout: Duration = .seconds(10)) {
        self.url = url
        self.tls = tls
        self.timeout = timeout
    }
}
