import NIOCore
import NIOHTTP1
import NIOPosix
import Prometheus
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
    /// Connections accepted beyond this many open ones are closed at once.
    public var maximumConnections: Int

    public init(bindAddress: String, port: Int, idleTimeout: Duration, maximumConnections: Int) {
        self.bindAddress = bindAddress
        self.port = port
        self.idleTimeout = idleTimeout
        self.maximumConnections = maximumConnections
    }

    /// Whether `text` is an address the endpoint can bind to (an IP literal, not a host name).
    public static func isBindableAddress(_ text: String) -> Bool {
        (try? SocketAddress(ipAddress: text, port: 0)) != nil
    }
}

/// The operator endpoint: `/metrics` (Prometheus text format), `/healthz` (alive) and
/// `/readyz` (ready for traffic), over plain HTTP/1.1.
public final class OperationsServer: Sendable {
    public typealias Check = @Sendable () -> (ok: Bool, reason: String)

    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel
    public let port: Int
    /// The address and port actually bound.
    public let localAddress: SocketAddress?

    public static func start(_ endpoint: OperationsEndpoint, registry: PrometheusCollectorRegistry,
                             liveness: @escaping Check, readiness: @escaping Check) async throws -> OperationsServer {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let openConnections = OpenConnections(limit: endpoint.maximumConnections)
        let idleTimeout = TimeAmount(endpoint.idleTimeout)
        do {
            let channel = try await ServerBootstrap(group: group)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        guard openConnections.admit() else { throw ConnectionLimitReached() }
                        channel.closeFuture.whenComplete { _ in openConnections.release() }
                        try channel.pipeline.syncOperations.addHandler(IdleStateHandler(readTimeout: idleTimeout))
                        try channel.pipeline.syncOperations.addHandler(CloseWhenIdle())
                        try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                        try channel.pipeline.syncOperations.addHandler(
                            OperationsHandler(registry: registry, liveness: liveness, readiness: readiness))
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

    public func stop() async {
        try? await channel.close()
        try? await group.shutdownGracefully()
    }
}

/// Counts the endpoint's open connections against its limit.
private final class OpenConnections: Sendable {
    private let limit: Int
    private let count = Atomic<Int>(0)

    init(limit: Int) { self.limit = limit }

    /// Takes a place for a new connection; false when all are taken.
    func admit() -> Bool {
        var current = count.load(ordering: .relaxed)
        while current < limit {
            let (exchanged, original) = count.compareExchange(expected: current, desired: current + 1, ordering: .acquiringAndReleasing)
            if exchanged { return true }
            current = original
        }
        return false
    }

    func release() { count.subtract(1, ordering: .acquiringAndReleasing) }
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
    private let liveness: OperationsServer.Check
    private let readiness: OperationsServer.Check
    private var head: HTTPRequestHead?

    init(registry: PrometheusCollectorRegistry, liveness: @escaping OperationsServer.Check, readiness: @escaping OperationsServer.Check) {
        self.registry = registry
        self.liveness = liveness
        self.readiness = readiness
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): self.head = head
        case .body: break
        case .end:
            guard let head else { return }
            let (status, contentType, body) = answer(head)
            var headers = HTTPHeaders([("content-type", contentType), ("content-length", String(body.count))])
            if !head.isKeepAlive { headers.add(name: "connection", value: "close") }
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: body)))), promise: nil)
            if head.isKeepAlive {
                context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            } else {
                let channel = context.channel
                context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
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
