import PushHTTP

/// The HTTP/2 clients `bench --scenario transport` compares (`--client`). The worker has one, `standard`; the others
/// are measured beside it: swift-nio-http2's framing on the same connections, and libcurl, which carries the cold paths.
public enum HTTPClientKind: String, Sendable, CaseIterable {
    /// swift-nio with nghttp2's HTTP/2 framing: the worker's client.
    case nghttp2
    /// swift-nio and swift-nio-http2's framing (`HTTP2FramingKind.nio`).
    case nio
    /// libcurl's multi interface for every request.
    case curl

    public static let standard = HTTPClientKind.nghttp2

    /// The library that frames HTTP/2, with its version where it has one: for reports.
    public var library: String {
        switch self {
        case .nio: HTTP2FramingKind.nio.library
        case .nghttp2: HTTP2FramingKind.nghttp2.library
        case .curl: String(CurlHTTPTransport.libraryVersion.split(separator: " ").first ?? "libcurl")
        }
    }

    public func makeTransport(configuration: HTTPTransportConfiguration, name: String) -> any HTTPTransport {
        switch self {
        case .nio: NIOHTTP2Transport(configuration: configuration, name: name, framing: .nio)
        case .nghttp2: NIOHTTP2Transport(configuration: configuration, name: name, framing: .nghttp2)
        case .curl: CurlHTTPTransport(configuration: configuration, name: name)
        }
    }
}
