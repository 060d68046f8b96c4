import PushHTTP

/// The HTTP client the provider, pipeline and conformance tests send through: the worker's own
/// (`NIOHTTP2Transport` with its default framing, nghttp2, and libcurl over HTTP/1.1 for hosts that speak only
/// that), so a test passes on the client production runs, not on another one.
public enum TestTransport {
    /// - Parameter connectTimeout: how long a connection may take to open (the configuration's default unless given).
    public static func make(
        configuration: HTTPTransportConfiguration = HTTPTransportConfiguration(), connectTimeout: Duration? = nil, name: String = "test"
    ) -> NIOHTTP2Transport {
        var configuration = configuration
        if let connectTimeout { configuration.connectTimeout = connectTimeout }
        return NIOHTTP2Transport(configuration: configuration, name: name)
    }
}
