/// The HTTP/2 clients behind `HTTPTransport` (`PUSH_HTTP_CLIENT`).
public enum HTTPClientKind: String, Sendable, CaseIterable {
    /// swift-nio with nghttp2's HTTP/2 framing; libcurl for requests to a pinned address and to HTTP/1.1-only hosts.
    case nghttp2
    /// swift-nio and swift-nio-http2; libcurl for the same requests as `nghttp2`.
    case nio
    /// libcurl's multi interface for every request.
    case curl

    /// The variable that chooses the client.
    public static let variable = "PUSH_HTTP_CLIENT"

    /// The client keeps requests of different `HTTPRequest.connectionIdentity` on different connections. libcurl's
    /// connection cache matches a connection by host, port and TLS settings (a client certificate by its path) and
    /// has no notion of whom a request speaks for: two APNs signing keys would share a connection, which APNs refuses.
    public var separatesConnectionIdentities: Bool { self != .curl }

    /// The client `PUSH_HTTP_CLIENT` chooses when unset: half the CPU per request of `nio` and twice its requests
    /// per second on one event loop (docs/performance.md).
    public static let standard = HTTPClientKind.nghttp2

    /// The library that frames HTTP/2, with its version where it has one: for reports.
    public var library: String {
        switch self {
        case .nio: "swift-nio-http2"
        case .nghttp2: "nghttp2 " + NGHTTP2Framing.libraryVersion
        case .curl: String(CurlHTTPTransport.libraryVersion.split(separator: " ").first ?? "libcurl")
        }
    }

    public func makeTransport(configuration: HTTPTransportConfiguration, name: String) -> any HTTPTransport {
        switch self {
        case .nio: NIOHTTP2Transport(configuration: configuration, name: name)
        case .nghttp2: NIOHTTP2Transport(configuration: configuration, name: name, framing: .nghttp2)
        case .curl: CurlHTTPTransport(configuration: configuration, name: name)
        }
    }
}
