import PushCore

public struct HTTPTransportConfiguration: Sendable {
    /// Connections per host; HTTP/2 multiplexes streams over each.
    public var maximumConnectionsPerHost: Int
    public var maximumStreamsPerConnection: Int
    /// Response body kept per request unless the request sets its own limit; beyond it the
    /// answer is cut short (providers answer with small JSON documents).
    public var maximumResponseBytes: Int
    public var connectTimeout: Duration
    /// Streams per host that only urgent requests may use, so a host saturated by normal
    /// requests still has room for a call; nil: a tenth of the host's streams (at least 1).
    public var urgentReservedStreams: Int?
    /// A connection without a request for this long is closed: NATs and load balancers drop idle
    /// connections silently (libcurl's default, 118 s). The HTTP/2 client closes it by a timer of its own.
    /// A request's `connectionLifetime` replaces it for the HTTP/2 connections that carry such requests.
    public var maximumIdleTime: Duration
    /// Connection pools (one per host, port, TLS options…) the HTTP/2 client keeps at once. At the bound, pools with nothing
    /// open are forgotten first, then the least recently used one with no request in flight is closed; pools with requests
    /// in flight are never dropped, so those (bounded by the requests in flight) may go beyond it.
    public var maximumConnectionPools: Int
    /// The HTTP proxy requests leave through (`HTTPS_PROXY`, with the `NO_PROXY` hosts reached without it): an HTTP CONNECT
    /// tunnel per connection, TLS for the target inside. nil: every connection goes straight to its host.
    public var egressProxy: EgressProxy?

    public init(
        maximumConnectionsPerHost: Int = 2, maximumStreamsPerConnection: Int = 100,
        maximumResponseBytes: Int = 64 << 10, connectTimeout: Duration = .seconds(5), urgentReservedStreams: Int? = nil,
        maximumIdleTime: Duration = .seconds(118), maximumConnectionPools: Int = 10_000, egressProxy: EgressProxy? = nil
    ) {
        self.egressProxy = egressProxy
        self.urgentReservedStreams = urgentReservedStreams
        self.maximumIdleTime = maximumIdleTime
        self.maximumConnectionPools = maximumConnectionPools
        self.maximumConnectionsPerHost = maximumConnectionsPerHost
        self.maximumStreamsPerConnection = maximumStreamsPerConnection
        self.maximumResponseBytes = maximumResponseBytes
        self.connectTimeout = connectTimeout
    }
}

extension HTTPTransportConfiguration {
    /// The lifetime of the HTTP/2 connections of requests that ask for none: closed after `maximumIdleTime`, no PING.
    var connectionLifetime: HTTPConnectionLifetime { HTTPConnectionLifetime(maximumIdleTime: maximumIdleTime) }
}

/// How long an HTTP/2 connection stays open without requests, and how it is kept alive meanwhile: for a provider that
/// wants its connections long-lived (APNs), where the transport's default closes them after two minutes.
///
/// A connection that has heard nothing from the server for `keepaliveInterval` sends a PING (RFC 9113 §6.7: "a mechanism
/// for … determining whether an idle connection is still functional"), which also keeps NATs and load balancers from
/// dropping it as idle; without an answer (any bytes) within `pingTimeout` it is closed, so a dead connection is found
/// while idle, not by a request lost on it. The same `pingTimeout` bounds the PING sent when a request hears nothing.
public struct HTTPConnectionLifetime: Sendable, Hashable {
    /// Closed after this long without a request.
    public let maximumIdleTime: Duration
    /// A PING after this long without a byte from the server; nil: none but the one a silent request sends.
    public let keepaliveInterval: Duration?
    /// How long a PING may go unanswered before the connection is closed.
    public let pingTimeout: Duration

    public static let shortestKeepaliveInterval = Duration.seconds(1)
    public static let shortestPingTimeout = Duration.milliseconds(100)

    /// Intervals are clamped to `shortestKeepaliveInterval` and `shortestPingTimeout`: no connection PINGs in a loop.
    public init(maximumIdleTime: Duration, keepaliveInterval: Duration? = nil, pingTimeout: Duration = .seconds(5)) {
        self.maximumIdleTime = max(.zero, maximumIdleTime)
        self.keepaliveInterval = keepaliveInterval.map { max(Self.shortestKeepaliveInterval, $0) }
        self.pingTimeout = max(Self.shortestPingTimeout, pingTimeout)
    }
}

/// A request for a transport to send. Its fields live in one copy-on-write box, and only its lane beside it: a request
/// is held by the async frames of every step of a send (the provider's, `HTTPDelivery`'s, the transport's), each of which
/// would otherwise keep about 300 bytes of it.
public struct HTTPRequest: Sendable {
    private struct Fields {
        var method: String
        var url: String
        var headers: [(name: String, value: String)]
        var body: [UInt8]
        var timeout: Duration
        var tls: TLSOptions
        var pinnedResolution: String?
        var maximumResponseBytes: Int?
        var connectionLifetime: HTTPConnectionLifetime?
        var connectionIdentity: ConnectionIdentity?
        var resolvedByProxy: Bool
    }

    /// Changed only through a reference no other request shares (`fields`' `_modify`), as an array's storage is.
    private final class Storage: @unchecked Sendable {
        /// Unchecked: a write happens only through a request that alone holds the storage, so no access overlaps it.
        @exclusivity(unchecked) var fields: Fields

        init(_ fields: Fields) { self.fields = fields }
    }

    private var storage: Storage

    /// Urgent requests (calls, cancels) jump the queue of requests waiting for a stream to their
    /// host and may use streams held back from normal requests (`HTTPTransportConfiguration.urgentReservedStreams`).
    public var lane: Lane

    private var fields: Fields {
        _read { yield storage.fields }
        _modify {
            if !isKnownUniquelyReferenced(&storage) { storage = Storage(storage.fields) }
            yield &storage.fields
        }
    }

    public var method: String {
        get { fields.method }
        _modify { yield &fields.method }
    }
    public var url: String {
        get { fields.url }
        _modify { yield &fields.url }
    }
    public var headers: [(name: String, value: String)] {
        get { fields.headers }
        _modify { yield &fields.headers }
    }
    public var body: [UInt8] {
        get { fields.body }
        _modify { yield &fields.body }
    }
    public var timeout: Duration {
        get { fields.timeout }
        _modify { yield &fields.timeout }
    }
    public var tls: TLSOptions {
        get { fields.tls }
        _modify { yield &fields.tls }
    }
    /// Connect to this address instead of resolving the URL's host again (`host:port:address`, naming the URL's host
    /// and port), so a name checked once cannot be re-pointed by DNS before the request (rebinding). TLS is still for
    /// the URL's host (`PinnedAddress`); the HTTP/2 client refuses a pin for another host or port unsent.
    public var pinnedResolution: String? {
        get { fields.pinnedResolution }
        _modify { yield &fields.pinnedResolution }
    }
    /// Bytes of response body kept; the rest is not read (the stream is reset) and the response
    /// is marked `bodyTruncated`. Nil: the transport's limit. Answers from untrusted endpoints get a small one.
    public var maximumResponseBytes: Int? {
        get { fields.maximumResponseBytes }
        _modify { yield &fields.maximumResponseBytes }
    }
    /// How long the HTTP/2 connection that carries the request lives idle, and its keepalive PING; nil: the transport's
    /// (`HTTPTransportConfiguration.maximumIdleTime`, no PING). Part of the connection's identity, as `tls` is: requests
    /// that ask for different lifetimes go over different connections. Set by a provider's code, never from a job.
    /// libcurl keeps the transport's `maximumIdleTime` and sends no PING.
    public var connectionLifetime: HTTPConnectionLifetime? {
        get { fields.connectionLifetime }
        _modify { yield &fields.connectionLifetime }
    }
    /// Whom the connection that carries this request speaks for (`ConnectionIdentity`): part of the connection's
    /// identity, as `tls` is. nil: anyone's requests to the same host and TLS options may share it.
    public var connectionIdentity: ConnectionIdentity? {
        get { fields.connectionIdentity }
        _modify { yield &fields.connectionIdentity }
    }
    /// The host name is left for the egress proxy to resolve (`CONNECT host:port`): the worker did not look it up, so
    /// the request is sent only through the proxy; a transport without a proxy for this host refuses it unsent.
    public var resolvedByProxy: Bool {
        get { fields.resolvedByProxy }
        _modify { yield &fields.resolvedByProxy }
    }

    public init(
        method: String = "POST", url: String, headers: [(name: String, value: String)] = [],
        body: [UInt8] = [], timeout: Duration = .seconds(10), tls: TLSOptions = TLSOptions(),
        pinnedResolution: String? = nil, lane: Lane = .normal, maximumResponseBytes: Int? = nil,
        connectionLifetime: HTTPConnectionLifetime? = nil, connectionIdentity: ConnectionIdentity? = nil
    ) {
        storage = Storage(
            Fields(
                method: method, url: url, headers: headers, body: body, timeout: timeout, tls: tls,
                pinnedResolution: pinnedResolution, maximumResponseBytes: maximumResponseBytes,
                connectionLifetime: connectionLifetime, connectionIdentity: connectionIdentity, resolvedByProxy: false))
        self.lane = lane
    }
}

extension HTTPRequest {
    /// Why this request must not be sent, if it must not: a CR, LF, NUL or other control
    /// character in the URL or a header value would let a value end its header and start
    /// another (header injection), and a header name must be a token (RFC 9110 §5.1). Job
    /// fields are refused at decode already; this is the second line of defence for anything
    /// that reaches a request, and the only check of outgoing fields on the HTTP/2 client.
    public var unsafeFieldDescription: String? {
        if url.containsUTF8Byte(where: { $0 < 0x21 || $0 == 0x7F }) { return "the URL contains a control character or space" }
        for header in headers {
            if header.name.isEmpty || header.name.containsUTF8Byte(where: { !Self.isTokenCharacter($0) }) {
                return "a header name is empty or not a token (RFC 9110 §5.6.2: letters, digits and !#$%&'*+-.^_`|~)"
            }
            if header.value.containsUTF8Byte(where: { ($0 < 0x20 && $0 != 0x09) || $0 == 0x7F }) {
                return "the value of header \(header.name) contains a control character"
            }
        }
        return nil
    }

    /// RFC 9110 §5.6.2 `tchar`.
    static func isTokenCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "'"),
            UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"),
            UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            true
        default: false
        }
    }
}

public struct HTTPResponse: Sendable {
    public var status: Int
    /// Header names are lower-cased.
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]
    /// The server sent more body than the request's limit; `body` holds the first part.
    public var bodyTruncated: Bool

    /// Header fields kept per response: a provider sends a handful; a hostile endpoint could send thousands.
    public static let maximumHeaderCount = 64
    public static let maximumHeaderBytes = 16 << 10

    public init(status: Int, headers: [(name: String, value: String)], body: [UInt8], bodyTruncated: Bool = false) {
        self.status = status
        self.headers = headers
        self.body = body
        self.bodyTruncated = bodyTruncated
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
    /// Sends `request` with no task waiting: `completion` runs once, with the answer or the failure, on the
    /// transport's thread (or before `start` returns, for a request refused at once). The default sends from a task
    /// of its own; a transport with threads of its own answers on them.
    func start(_ request: HTTPRequest, completion: @escaping HTTPCompletion) -> any DeliveryInFlight
    /// Closes the connections of every identity not in `live` once the requests they carry have finished; requests
    /// without an identity are not affected. Called when live configuration removed apps or rotated their credentials.
    func closeConnections(except live: Set<ConnectionIdentity>)
    func shutdown()
}

/// What a request started with no task waiting gets (`HTTPTransport.start`).
public typealias HTTPCompletion = @Sendable (Result<HTTPResponse, HTTPTransportError>) -> Void

extension HTTPTransport {
    public func start(_ request: HTTPRequest, completion: @escaping HTTPCompletion) -> any DeliveryInFlight {
        TaskInFlight(
            Task {
                do throws(HTTPTransportError) {
                    completion(.success(try await send(request)))
                } catch {
                    completion(.failure(error))
                }
            })
    }
}

/// A request a task sends (`HTTPTransport.start`'s default): cancelling it cancels the task, whose send then fails with
/// `cancelled`.
private struct TaskInFlight: DeliveryInFlight {
    let task: Task<Void, Never>

    init(_ task: Task<Void, Never>) { self.task = task }

    func cancel() { task.cancel() }
}
