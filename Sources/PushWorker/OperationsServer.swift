import NIOCore
import NIOHTTP1
import NIOPosix
import Prometheus

/// The operator endpoint on `PUSH_HTTP_PORT`: `/metrics` (Prometheus text format),
/// `/healthz` (alive) and `/readyz` (ready for traffic), over plain HTTP/1.1.
public final class OperationsServer: Sendable {
    public typealias Check = @Sendable () -> (ok: Bool, reason: String)

    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel
    public let port: Int

    public static func start(host: String = "0.0.0.0", port: Int, registry: PrometheusCollectorRegistry,
                             liveness: @escaping Check, readiness: @escaping Check) async throws -> OperationsServer {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(
                        OperationsHandler(registry: registry, liveness: liveness, readiness: readiness))
                }
            }
            .bind(host: host, port: port).get()
        return OperationsServer(group: group, channel: channel)
    }

    private init(group: MultiThreadedEventLoopGroup, channel: any Channel) {
        self.group = group
        self.channel = channel
        port = channel.localAddress?.port ?? 0
    }

    public func stop() async {
        try? await channel.close()
        try? await group.shutdownGracefully()
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
