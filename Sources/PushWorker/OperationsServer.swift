import NIOCore
import NIOHTTP1
import NIOPosix
import Prometheus
import ServiceLifecycle

/// Where the operations endpoint listens and what it tolerates from clients
/// (`PUSH_HTTP_BIND`, `PUSH_HTTP_PORT`, `PUSH_HTTP_IDLE_TIMEOUT_S`, `PUSH_HTTP_MAX_INBOUND_CONNECTIONS`).
public struct OperationsEndpoint: Sendable, Equatable {
    /// An IPv4 or IPv6 address literal; `0.0.0.0` listens on every IPv4 interface.
    public var bindAddress: String
    /// 0 picks a free port.
    public var port: Int
    /// A connection whose client sends nothing for this long is closed.
    public var idleTimeout: Duration
    /// Connections open at once; at this many a new one takes the place of another (see `ConnectionSlots`).
    public var maximumConnections: Int
    /// A client that has not completed a request head this long after connecting, or after the first byte of its next
    /// request, is closed (see `ExchangeDeadlines`). No request has a body, so this bounds the whole request.
    public var requestHeadTimeout: Duration
    /// An answer not fully written this long after its request head arrived — its client does not read — resets the
    /// connection (see `ExchangeDeadlines`).
    public var responseWriteTimeout: Duration

    /// Long enough for any client on a congested network to send one small request head (a kubelet probe sends its head
    /// in one segment), short enough that clients dripping bytes cannot hold places for long.
    public static let defaultRequestHeadTimeout = Duration.seconds(5)
    /// Prometheus gives up on a scrape after its `scrape_timeout` (10 s by default): an answer still unwritten by then
    /// has no reader left.
    public static let defaultResponseWriteTimeout = Duration.seconds(10)

    public init(
        bindAddress: String, port: Int, idleTimeout: Duration, maximumConnections: Int,
        requestHeadTimeout: Duration = defaultRequestHeadTimeout,
        responseWriteTimeout: Duration = defaultResponseWriteTimeout
    ) {
        self.bindAddress = bindAddress
        self.port = port
        self.idleTimeout = idleTimeout
        self.maximumConnections = maximumConnections
        self.requestHeadTimeout = requestHeadTimeout
        self.responseWriteTimeout = responseWriteTimeout
    }

    /// Whether `text` is an address the endpoint can bind to (an IP literal, not a host name).
    public static func isBindableAddress(_ text: String) -> Bool {
        (try? SocketAddress(ipAddress: text, port: 0)) != nil
    }
}

/// The operator endpoint: `/metrics` (Prometheus text format), `/healthz` (alive) and
/// `/readyz` (ready for traffic), over plain HTTP/1.1.
public final class OperationsServer: Service, Sendable {
    public typealias Check = @Sendable () -> (ok: Bool, reason: String)

    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel
    public let port: Int
    /// The address and port actually bound.
    public let localAddress: SocketAddress?

    public static func start(
        _ endpoint: OperationsEndpoint, registry: PrometheusCollectorRegistry,
        liveness: @escaping Check, readiness: @escaping Check
    ) async throws -> OperationsServer {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let slots = ConnectionSlots(limit: endpoint.maximumConnections)
        let idleTimeout = TimeAmount(endpoint.idleTimeout)
        let headTimeout = TimeAmount(endpoint.requestHeadTimeout)
        let writeTimeout = TimeAmount(endpoint.responseWriteTimeout)
        let routes = OperationsRoutes(registry: registry, liveness: liveness, readiness: readiness)
        do {
            let channel = try await ServerBootstrap(group: group)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        switch slots.admit(channel) {
                        case .admitted: break
                        case .admittedInPlaceOf(let other, .betweenRequests): other.close(promise: nil)
                        case .admittedInPlaceOf(let other, .busy): other.closeWithReset()
                        }
                        channel.closeFuture.whenComplete { _ in slots.release(channel) }
                        let pipeline = channel.pipeline.syncOperations
                        try pipeline.addHandler(
                            ExchangeDeadlines(headTimeout: headTimeout, writeTimeout: writeTimeout, slots: slots))
                        try pipeline.addHandler(IdleStateHandler(readTimeout: idleTimeout))
                        try pipeline.addHandler(CloseWhenIdle())
                        try pipeline.configureHTTPServerPipeline()
                        try pipeline.addHandler(OperationsHandler(routes: routes))
                    }
                }
                .bind(host: endpoint.bindAddress, port: endpoint.port).get()
            return OperationsServer(group: group, channel: channel)
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
    }

    private init(group: MultiThreadedEventLoopGroup, channel: any Channel) {
        self.group = group
        self.channel = channel
        localAddress = channel.localAddress
        port = channel.localAddress?.port ?? 0
    }

    /// As a service: it listens from `start` on and stops at the graceful shutdown (late in it: readiness says
    /// "shutting down" while the pipeline drains).
    public func run() async {
        try? await gracefulShutdown()
        await stop()
    }

    public func stop() async {
        try? await channel.close()
        try? await group.shutdownGracefully()
    }
}

/// Closes the connection when `IdleStateHandler` reports that the client went quiet.
private final class CloseWhenIdle: ChannelInboundHandler {
    typealias InboundIn = NIOAny

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is IdleStateHandler.IdleStateEvent {
            context.close(promise: nil)
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }
}

/// Answers each request as soon as its head is complete, in the order they came. A request that announces a body is
/// answered at once and its connection closed: the body is never read or waited for.
private final class OperationsHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let routes: OperationsRoutes
    /// Set by an answer that closes the connection: nothing after that request is answered.
    private var closing = false

    init(routes: OperationsRoutes) { self.routes = routes }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(let head) = unwrapInboundIn(data), !closing else { return }
        let answer = routes.answer(head)
        closing = answer.closesConnection || !head.isKeepAlive
        var headers = HTTPHeaders([("content-type", answer.contentType), ("content-length", String(answer.body.count))])
        headers.add(contentsOf: answer.extraHeaders)
        if closing { headers.add(name: "connection", value: "close") }

        context.triggerUserOutboundEvent(ExchangeProgress.answerStarted, promise: nil)
        context.write(
            wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: answer.status, headers: headers))), promise: nil)
        if head.method != .HEAD {
            context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: answer.body)))), promise: nil)
        }
        let channel = context.channel
        let closes = closing
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
            channel.triggerUserOutboundEvent(ExchangeProgress.answerFinished, promise: nil)
            if closes { channel.close(promise: nil) }
        }
    }
}

/// What the endpoint answers to a request head.
struct OperationsRoutes: Sendable {
    struct Answer {
        var status: HTTPResponseStatus
        var contentType = "text/plain"
        var body: [UInt8]
        var extraHeaders: [(String, String)] = []
        /// The request announced a body, which is not read: the connection cannot carry another request.
        var closesConnection = false
    }

    let registry: PrometheusCollectorRegistry
    let liveness: OperationsServer.Check
    let readiness: OperationsServer.Check

    func answer(_ head: HTTPRequestHead) -> Answer {
        let announcesBody = Self.announcesBody(head)
        guard head.method == .GET || head.method == .HEAD else {
            return Answer(
                status: .methodNotAllowed, body: Array("GET or HEAD only\n".utf8), extraHeaders: [("allow", "GET, HEAD")],
                closesConnection: announcesBody)
        }
        guard !announcesBody else {
            return Answer(status: .payloadTooLarge, body: Array("no request body accepted\n".utf8), closesConnection: true)
        }
        switch head.uri.split(separator: "?").first.map(String.init) ?? head.uri {
        case "/metrics":
            return Answer(status: .ok, contentType: "text/plain; version=0.0.4; charset=utf-8", body: registry.emitToBuffer())
        case "/healthz":
            let (ok, reason) = liveness()
            return Answer(status: ok ? .ok : .serviceUnavailable, body: Array("\(reason)\n".utf8))
        case "/readyz":
            let (ok, reason) = readiness()
            return Answer(status: ok ? .ok : .serviceUnavailable, body: Array("\(reason)\n".utf8))
        default:
            return Answer(status: .notFound, body: Array("not found: /metrics, /healthz, /readyz\n".utf8))
        }
    }

    /// Whether a body follows the head (RFC 9112 §6.3): any `Transfer-Encoding`, or a `Content-Length` other than 0.
    static func announcesBody(_ head: HTTPRequestHead) -> Bool {
        head.headers.contains(name: "transfer-encoding") || head.headers["content-length"].contains { Int($0) != 0 }
    }
}
