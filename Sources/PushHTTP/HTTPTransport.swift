import PushCore

/// TLS settings for a request. Verification of the server is always on; `caFile`
/// replaces the system trust store (a sandbox or private CA).
public struct TLSOptions: Sendable, Hashable {
    public enum CertificateFormat: String, Sendable, Hashable {
        case pem = "PEM"
        /// PKCS#12 (`.p12`): certificate and key in one file, usually with a password.
        case pkcs12 = "P12"
    }

    public var caFile: String?
    public var clientCertificateFile: String?
    /// Not needed for PKCS#12, which carries the key.
    public var clientKeyFile: String?
    public var clientCertificateFormat: CertificateFormat
    /// Password of the client key or PKCS#12 file.
    public var clientKeyPassword: String?

    public init(caFile: String? = nil, clientCertificateFile: String? = nil, clientKeyFile: String? = nil,
                clientCertificateFormat: CertificateFormat = .pem, clientKeyPassword: String? = nil) {
        self.caFile = caFile
        self.clientCertificateFile = clientCertificateFile
        self.clientKeyFile = clientKeyFile
        self.clientCertificateFormat = clientCertificateFormat
        self.clientKeyPassword = clientKeyPassword
    }
}

public struct HTTPRequest: Sendable {
    public var method: String
    public var url: String
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]
    public var timeout: Duration
    public var tls: TLSOptions
    /// Connect to this address instead of resolving the URL's host again (`host:port:address`),
    /// so a name checked once cannot be re-pointed by DNS before the request (rebinding).
    public var pinnedResolution: String?
    /// Urgent requests (calls, cancels) jump the queue of requests waiting for a stream to their
    /// host and may use streams held back from normal requests (`CurlTransportConfiguration.urgentReservedStreams`).
    public var lane: Lane

    public init(method: String = "POST", url: String, headers: [(name: String, value: String)] = [],
                body: [UInt8] = [], timeout: Duration = .seconds(10), tls: TLSOptions = TLSOptions(),
                pinnedResolution: String? = nil, lane: Lane = .normal) {
        self.lane = lane
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
        self.tls = tls
        self.pinnedResolution = pinnedResolution
    }
}

public struct HTTPResponse: Sendable {
    public var status: Int
    /// Header names are lower-cased.
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]

    public init(status: Int, headers: [(name: String, value: String)], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    public func header(_ name: String) -> String? {
        let lowered = name.lowercased()
        return headers.first { $0.name == lowered }?.value
    }
}

public enum HTTPTransportError: Error, Sendable, Equatable, CustomStringConvertible {
    case timedOut
    case connectionFailed(String)
    case tls(String)
    case protocolError(String)
    case invalidRequest(String)
    case cancelled
    case shutDown

    public var description: String {
        switch self {
        case .timedOut: "request timed out"
        case .connectionFailed(let detail): "connection failed: \(detail)"
        case .tls(let detail): "TLS failure: \(detail)"
        case .protocolError(let detail): "HTTP protocol error: \(detail)"
        case .invalidRequest(let detail): "invalid request: \(detail)"
        case .cancelled: "request cancelled"
        case .shutDown: "transport is shut down"
        }
    }
}

/// An HTTP/2 client shared by the provider plugins.
public protocol HTTPTransport: Sendable {
    func send(_ request: HTTPRequest) async throws(HTTPTransportError) -> HTTPResponse
    func shutdown()
}
