import NIOCore
import NIOHTTP1
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import Synchronization

public struct SandboxRequest: Sendable {
    public var method: String
    public var path: String
    /// Header names are lower-cased.
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]
    /// When the request was complete.
    public var receivedAt: ContinuousClock.Instant
    /// Identifies the HTTP/2 connection the request came on.
    public var connection: ObjectIdentifier?

    public func header(_ name: String) -> String? {
        headers.first { $0.name == name.lowercased() }?.value
    }
}

public struct SandboxResponse: Sendable {
    public var status: Int
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]
    /// Answer only after this long (a slow provider).
    public var delay: Duration?
    /// With `delay`: answer as soon as this holds (checked every 10 ms), at the latest once `delay` passed. A test that
    /// needs a request to arrive before this answer waits for it, not for a time that a busy machine may not keep.
    public var answerWhen: (@Sendable () -> Bool)?
    /// Something to do to the whole HTTP/2 connection after answering.
    public var connectionAction: ConnectionAction?
    /// Instead of `body`, a body of this many bytes made up while it is sent, chunk by chunk
    /// as the client's flow-control window allows (a huge answer the server never holds).
    public var generatedBodyBytes: Int?

    public enum ConnectionAction: Sendable {
        /// GOAWAY (NO_ERROR) naming this stream as the last one processed, then close.
        case goAway
        /// A SETTINGS frame raising SETTINGS_MAX_CONCURRENT_STREAMS (APNs does this once a token is accepted).
        case allowConcurrentStreams(Int)
        /// Instead of answering, close the TCP connection at once (every stream on it fails).
        case reset
        /// A graceful shutdown notice (RFC 9113 §6.8): GOAWAY (NO_ERROR) with the last stream id
        /// 2^31-1, so no stream already answered is claimed unprocessed; the connection closes
        /// a second later.
        case gracefulGoAway
    }

    public init(status: Int, headers: [(name: String, value: String)] = [], body: [UInt8] = [], delay: Duration? = nil) {
        self.status = status
        self.headers = headers
        self.body = body
        self.delay = delay
    }

    public init(status: Int, json: String, headers: [(name: String, value: String)] = []) {
        self.init(status: status, headers: headers + [("content-type", "application/json")], body: Array(json.utf8))
    }
}

/// An HTTP/2-over-TLS server on loopback that answers every request through a
/// responder and keeps a record of what it received.
public final class SandboxServer: Sendable {
    public typealias Responder = @Sendable (SandboxRequest) -> SandboxResponse

    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel
    private let received = Mutex<[SandboxRequest]>([])
    public let port: Int
    public let tls: SandboxTLS

    public var baseURL: String { "https://localhost:\(port)" }

    /// Every request received so far, in arrival order.
    public var requests: [SandboxRequest] { received.withLock { $0 } }

    /// - Parameter requireClientCertificate: demand a client certificate issued by the sandbox CA (mutual TLS).
    /// - Parameter initialConcurrentStreams: SETTINGS_MAX_CONCURRENT_STREAMS announced on every new connection.
    /// - Parameter connectionClosed: called with `SandboxRequest.connection` of each connection that closes (either side).
    public static func start(
        tls: SandboxTLS, requireClientCertificate: Bool = false, port: Int = 0,
        initialConcurrentStreams: Int = 100,
        connectionClosed: (@Sendable (ObjectIdentifier) -> Void)? = nil,
        responder: @escaping Responder
    ) async throws -> SandboxServer {
        var configuration = try tls.serverConfiguration(applicationProtocols: ["h2"])
        // Idle clients do not answer close_notify; do not hold a stop for them.
        configuration.shutdownTimeout = .milliseconds(100)
        if requireClientCertificate {
            configuration.certificateVerification = .noHostnameVerification
            configuration.trustRoots = .certificates([try NIOSSLCertificate(bytes: Array(tls.caCertificatePEM.utf8), format: .pem)])
        }
        let sslContext = try NIOSSLContext(configuration: configuration)
        // Provider front ends tolerate what HTTP/2 clients such as libcurl legitimately do
        // under load (an empty DATA frame closing each stream, bursts of resets); NIO's
        // denial-of-service defaults would answer ENHANCE_YOUR_CALM.
        var permissiveConnection = NIOHTTP2Handler.ConnectionConfiguration()
        permissiveConnection.maximumSequentialEmptyDataFrames = 100_000
        permissiveConnection.controlFrameRateLimit.maximumCount = 100_000
        permissiveConnection.maximumConnectionGlitches = 100_000
        permissiveConnection.maximumRecentlyResetStreams = 100_000
        permissiveConnection.initialSettings = [
            HTTP2Setting(parameter: .maxConcurrentStreams, value: initialConcurrentStreams),
            HTTP2Setting(parameter: .maxHeaderListSize, value: HPACKDecoder.defaultMaxHeaderListSize),
        ]
        var permissiveStreams = NIOHTTP2Handler.StreamConfiguration()
        permissiveStreams.streamResetFrameRateLimit.maximumCount = 100_000
        permissiveStreams.streamErrorRateLimit.maximumCount = 100_000
        let connectionConfiguration = permissiveConnection
        let streamConfiguration = permissiveStreams
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let box = RecorderBox()
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                if let connectionClosed {
                    let connection = ObjectIdentifier(channel)
                    channel.closeFuture.whenComplete { _ in connectionClosed(connection) }
                }
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: sslContext))
                    _ = try channel.pipeline.syncOperations.configureHTTP2Pipeline(
                        mode: .server,
                        connectionConfiguration: connectionConfiguration,
                        streamConfiguration: streamConfiguration
                    ) { stream in
                        stream.eventLoop.makeCompletedFuture {
                            try stream.pipeline.syncOperations.addHandlers([
                                HTTP2FramePayloadToHTTP1ServerCodec(),
                                SandboxStreamHandler(responder: responder, record: { box.server?.record($0) }),
                            ])
                        }
                    }
                }
            }
            .bind(host: "127.0.0.1", port: port).get()
        let server = SandboxServer(group: group, channel: channel, tls: tls)
        box.set(server)
        return server
    }

    private init(group: MultiThreadedEventLoopGroup, channel: any Channel, tls: SandboxTLS) {
        self.group = group
        self.channel = channel
        self.tls = tls
        port = channel.localAddress?.port ?? 0
    }

    fileprivate func record(_ request: SandboxRequest) { received.withLock { $0.append(request) } }

    public func stop() async {
        try? await channel.close()
        try? await group.shutdownGracefully()
    }
}

/// Lets handlers created before the server object reach it.
private final class RecorderBox: Sendable {
    private let value = Mutex<SandboxServer?>(nil)
    var server: SandboxServer? { value.withLock { $0 } }
    func set(_ server: SandboxServer) { value.withLock { $0 = server } }
}

private final class SandboxStreamHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let responder: SandboxServer.Responder
    private let record: @Sendable (SandboxRequest) -> Void
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []

    init(responder: @escaping SandboxServer.Responder, record: @escaping @Sendable (SandboxRequest) -> Void) {
        self.responder = responder
        self.record = record
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
        case .body(var buffer):
            body.append(contentsOf: buffer.readBytes(length: buffer.readableBytes) ?? [])
        case .end:
            guard let head else { return }
            let request = SandboxRequest(
                method: head.method.rawValue, path: head.uri,
                headers: head.headers.map { ($0.name.lowercased(), $0.value) }, body: body,
                receivedAt: .now, connection: context.channel.parent.map { ObjectIdentifier($0) })
            record(request)
            let response = responder(request)
            if let delay = response.delay {
                let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                let latest =
                    NIODeadline.now()
                    + .nanoseconds(
                        Int64(delay.components.seconds) * 1_000_000_000 + delay.components.attoseconds / 1_000_000_000)
                Self.answer(response, loopBound, at: latest)
            } else {
                write(response, context: context)
            }
        }
    }

    /// Writes `response` once its `answerWhen` holds or `latest` passed, checking every 10 ms.
    private static func answer(
        _ response: SandboxResponse, _ loopBound: NIOLoopBound<(SandboxStreamHandler, ChannelHandlerContext)>, at latest: NIODeadline
    ) {
        let eventLoop = loopBound.value.1.eventLoop
        let next = response.answerWhen == nil ? latest : min(latest, .now() + .milliseconds(10))
        eventLoop.scheduleTask(deadline: next) {
            if next < latest, response.answerWhen?() != true { return answer(response, loopBound, at: latest) }
            let (handler, context) = loopBound.value
            handler.write(response, context: context)
        }
    }

    private func perform(_ action: SandboxResponse.ConnectionAction, context: ChannelHandlerContext) {
        guard let connection = context.channel.parent else { return }
        switch action {
        case .goAway:
            let streamID = (try? context.channel.syncOptions?.getOption(HTTP2StreamChannelOptions.streamID)) ?? .rootStream
            let frame = HTTP2Frame(streamID: .rootStream, payload: .goAway(lastStreamID: streamID, errorCode: .noError, opaqueData: nil))
            connection.writeAndFlush(frame).whenComplete { _ in
                connection.eventLoop.scheduleTask(in: .milliseconds(50)) { connection.close(promise: nil) }
            }
        case .allowConcurrentStreams(let count):
            connection.writeAndFlush(
                HTTP2Frame(
                    streamID: .rootStream,
                    payload: .settings(.settings([HTTP2Setting(parameter: .maxConcurrentStreams, value: count)]))),
                promise: nil)
        case .reset:
            connection.close(promise: nil)
        case .gracefulGoAway:
            let frame = HTTP2Frame(streamID: .rootStream, payload: .goAway(lastStreamID: .maxID, errorCode: .noError, opaqueData: nil))
            connection.writeAndFlush(frame).whenComplete { _ in
                connection.eventLoop.scheduleTask(in: .seconds(1)) { connection.close(promise: nil) }
            }
        }
    }

    private func write(_ response: SandboxResponse, context: ChannelHandlerContext) {
        if case .reset? = response.connectionAction {
            context.channel.parent?.close(promise: nil)
            return
        }
        var headers = HTTPHeaders(response.headers.map { ($0.name, $0.value) })
        headers.replaceOrAdd(name: "content-length", value: "\(response.generatedBodyBytes ?? response.body.count)")
        context.write(
            wrapOutboundOut(
                .head(
                    HTTPResponseHead(
                        version: .http2, status: .init(statusCode: response.status),
                        headers: headers))), promise: nil)
        if let size = response.generatedBodyBytes {
            writeGenerated(remaining: size, then: response.connectionAction, context: context)
            return
        }
        if !response.body.isEmpty {
            context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: response.body)))), promise: nil)
        }
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        if let action = response.connectionAction { perform(action, context: context) }
    }

    private static let filler = ByteBufferAllocator().buffer(repeating: UInt8(ascii: "x"), count: 1 << 16)

    /// One chunk at a time, the next once the last has left the stream (its write completes only
    /// when the flow-control window let it go); a stream the client reset fails the write and ends it.
    private func writeGenerated(remaining: Int, then action: SandboxResponse.ConnectionAction?, context: ChannelHandlerContext) {
        guard remaining > 0 else {
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            if let action { perform(action, context: context) }
            return
        }
        let chunk = Self.filler.getSlice(at: Self.filler.readerIndex, length: min(remaining, Self.filler.readableBytes))!
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let eventLoop = context.eventLoop
        context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(chunk)))).whenSuccess {
            // Through the event loop's queue: a write that completes at once must not recurse.
            eventLoop.execute {
                let (handler, context) = loopBound.value
                handler.writeGenerated(remaining: remaining - chunk.readableBytes, then: action, context: context)
            }
        }
    }
}

/// For behaviours that need the server's address (an origin, a token URL): the server
/// starts with this as its responder, and the behaviour is set once the port is known.
public final class LateResponder: Sendable {
    private let responder = Mutex<SandboxServer.Responder?>(nil)

    public init() {}

    public func set(_ value: @escaping SandboxServer.Responder) { responder.withLock { $0 = value } }

    public func respond(_ request: SandboxRequest) -> SandboxResponse {
        responder.withLock { $0 }?(request) ?? SandboxResponse(status: 503)
    }
}
