/// The HTTP/2 clients behind `HTTPTransport` (`PUSH_HTTP_CLIENT`).
public enum HTTPClientKind: String, Sendable, CaseIterable {
    /// swift-nio-http2; libcurl for requests to a pinned address and to HTTP/1.1-only hosts.
    case nio
    /// libcurl's multi interface for every request.
    case curl

    public func makeTransport(configuration: HTTPTransportConfiguration, name: String) -> any HTTPTransport {
        switch self {
        case .nio: NIOHTTP2Transport(configuration: configuration, name: name)
        case .curl: CurlHTTPTransport(configuration: configuration, name: name)
        }
    }
}
