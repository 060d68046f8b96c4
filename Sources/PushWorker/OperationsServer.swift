import NIOCore
import NIOHTTP1
import NIOPosix
import Prometheus
import ServiceLifecycle
import Synchronization

/// Where the operations endpoint listens and what it tolerates from clients
/// (`PUSH_HTTP_BIND`, `PUSH_HTTP_PORT`, `PUSH_HTTP_IDLE_TIMEOUT_S`, `PUSH_HTTP_MAX_INBOUND_CONNECTIONS`).
public struct OperationsEndpoint: Sendable, Equatable {
    /// An IPv4 or IPv6 address literal; `0.0.0.0` listens on every IPv4 interface.
    public var bindAddress: String
    /// 0 picks a free port.
    public var port: Int
    /// A connection whose client sends nothing for this long is closed.
    public var idleTimeout: Duration
    /// Connections open at once; at this many a new one takes the place of the oldest idle one (see `ConnectionSlots`).
    public var maximumConnections: Int
    /// A client that has not completed a request head this long after connecting, or after the first byte of its next
    /// request, is closed (see `RequestHeadDeadline`).
    public var requestHeadTimeout: Duration

    /// Long enough for any client on a congested network to send one small request head (a kubelet probe sends its head
    /// in one segment), short enough that clients dripping bytes cannot hold places for long.
    public static let defaultRequestHeadTimeout = Duration.seconds(5)

    public init(
        bindAddress: String, port: Int, idleTimeout: Duration, maximumConnections: Int,
        requestHeadTimeout: Duration = defaultRequestHeadTimeout
    ) {
        self.bindAddress = bindAddress
        self.port = port
        self.idleTimeout = idleTimeout
        self.maximumConnections = maximumConnections
        self.requestHeadTimeout = requestHeadTimeout
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
        let requestHeadTimeout = TimeAmount(endpoint.requestHeadTimeout)
        do {
            let channel = try await ServerBootstrap(group: group)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        switch slots.admit(channel) {
                        case .admitted: break
                        case .admittedInPlaceOf(let oldest): oldest.close(promise: nil)
                        case .refused: throw ConnectionLimitReached()
                        }
                        channel.closeFuture.whenComplete { _ in slots.release(channel) }
                        try channel.pipeline.syncOperations.addHandler(RequestHeadDeadline(timeout: requestHeadTimeout))
                        try channel.pipeline.syncOperations.addHandler(IdleStateHandler(readTimeout: idleTimeout))
                        try channel.pipeline.syncOperations.addHandler(CloseWhenIdle())
                        try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                        try channel.pipeline.syncOperations.addHandler(
                            OperationsHandler(registry: registry, slots: slots, liveness: liveness, readiness: readiness))
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

/// The endpoint's open connections against its limit, oldest first. At the limit a new connection takes the place of
/// the oldest one with no request in progress (one still sending its head counts as idle), so a kubelet probe is answered
/// even when slow or idle clients hold every place; only when every connection is being answered is the new one refused.
final class ConnectionSlots: Sendable {
    enum Admission {
        case admitted
        /// Admitted; the caller closes this connection, whose place the new one took.
        case admittedInPlaceOf(any Channel)
        case refused
    }

    private struct Slot {
        let channel: any Channel
        var answering = false
    }

    private let limit: Int
    /// In the order the connections were accepted.
    private let slots = Mutex<[Slot]>([])

    init(limit: Int) { self.limit = limit }

    func admit(_ channel: any Channel) -> Admission {
        slots.withLock { slots in
            guard slots.count >= limit else {
                slots.append(Slot(channel: channel))
                return .admitted
            }
            guard let oldestIdle = slots.firstIndex(where: { !$0.answering }) else { return .refused }
            let oldest = slots.remove(at: oldestIdle).channel
            slots.append(Slot(channel: channel))
            return .admittedInPlaceOf(oldest)
        }
    }

    /// Marks whether `channel` has a request in progress: from its complete head until its answer is written.
    func setAnswering(_ answering: Bool, _ channel: any Channel) {
        slots.withLock { slots in
            if let index = slots.firstIndex(where: { $0.channel === channel }) { slots[index].answering = answering }
        }
    }

    /// Frees the place of a closed connection (none if it already gave its place to a newer one).
    func release(_ channel: any Channel) {
        slots.withLock { slots in slots.removeAll { $0.channel === channel } }
    }
}

/// What `OperationsHandler` tells `RequestHeadDeadline` (an outbound user event, travelling towards the socket).
private enum RequestProgress {
    case headReceived
    case answered
}

/// Closes a connection whose client has not completed a request head within the timeout: counted from the accept for the
/// first request and from the first byte of each later one (between requests the idle timeout applies). The idle
/// timeout alone is defeated by a client that sends one byte now and then (the "slowloris" attack); this deadline is not.
/// It sits before the HTTP decoder and learns of complete heads and written answers from `RequestProgress` events.
private final class RequestHeadDeadline: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = NIOAny

    private enum Phase {
        case awaitingHead(Scheduled<Void>?)
        case answering
        case betweenRequests
    }

    private let timeout: TimeAmount
    private var phase = Phase.awaitingHead(nil)

    init(timeout: TimeAmount) { self.timeout = timeout }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { startDeadline(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        startDeadline(context: context)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .betweenRequests = phase { startDeadline(context: context) }
        context.fireChannelRead(data)
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        switch event as? RequestProgress {
        case .headReceived?:
            cancelDeadline()
            phase = .answering
            promise?.succeed()
        case .answered?:
            phase = .betweenRequests
            promise?.succeed()
        case nil:
            context.triggerUserOutboundEvent(event, promise: promise)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        cancelDeadline()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) { cancelDeadline() }

    private func startDeadline(context: ChannelHandlerContext) {
        switch phase {
        case .awaitingHead(.some), .answering: return
        case .awaitingHead(nil), .betweenRequests: break
        }
        let channel = context.channel
        phase = .awaitingHead(context.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) })
    }

    private func cancelDeadline() {
        if case .awaitingHead(let deadline?) = phase {
            deadline.cancel()
            phase = .awaitingHead(nil)
        }
    }
}

/// Thrown from the child initializer so that NIO closes the accepted connection at once.
private struct ConnectionLimitReached: Error {}

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

private final class OperationsHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let registry: PrometheusCollectorRegistry
    private let slots: ConnectionSlots
    private let liveness: OperationsServer.Check
    private let readiness: OperationsServer.Check
    private var head: HTTPRequestHead?

    init(
        registry: PrometheusCollectorRegistry, slots: ConnectionSlots,
        liveness: @escaping OperationsServer.Check, readiness: @escaping OperationsServer.Check
    ) {
        self.registry = registry
        self.slots = slots
        self.liveness = liveness
        self.readiness = readiness
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            slots.setAnswering(true, context.channel)
            context.triggerUserOutboundEvent(RequestProgress.headReceived, promise: nil)
        case .body: break
        case .end:
            guard let head else { return }
            let (status, contentType, body) = answer(head)
            var headers = HTTPHeaders([("content-type", contentType), ("content-length", String(body.count))])
            if !head.isKeepAlive { headers.add(name: "connection", value: "close") }
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: body)))), promise: nil)
            let channel = context.channel
            let keepAlive = head.isKeepAlive
            let slots = self.slots
            context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
                if keepAlive {
                    slots.setAnswering(false, channel)
                    channel.triggerUserOutboundEvent(RequestProgress.answered, promise: nil)
                } else {
                    channel.close(promise: nil)
                }
            }
            self.head = nil
        }
    }

    private func answer(_ head: HTTPRequestHead) -> (HTTPResponseStatus, String, [UInt8]) {
        guard head.method == .GET || head.method == .HEAD else { return (.methodNotAllowed, "text/plain", Array("GET only\n".utf8)) }
        switch head.uri.split(separator: "?").first.map(String.init) ?? head.uri {
        case "/metrics":
            return (.ok, "text/plain; version=0.0.4; charset=utf-8", registry.emitToBuffer())
        case "/healthz":
            let (ok, reason) = liveness()
            return (ok ? .ok : .serviceUnavailable, "text/plain", Array("\(reason)\n".utf8))
        case "/readyz":
            let (ok, reason) = readiness()
            return (ok ? .ok : .serviceUnavailable, "text/plain", Array("\(reason)\n".utf8))
        default:
            return (.notFound, "text/plain", Array("not found: /metrics, /healthz, /readyz\n".utf8))
        }
    }
}
