import NIOCore
import NIOPosix
import NIOSSL
import PushSandbox
import Synchronization
import Testing
import TestSupport
@testable import PushHTTP

/// A server that chooses h2 in the TLS handshake and then sends whatever it likes: the framing must turn
/// anything into an error for the requests on that connection, never a crash or a request left waiting.
@Suite("An HTTP/2 server that sends bytes no HTTP/2 server would")
struct HostileHTTP2ServerTests {
    /// An empty SETTINGS frame: a valid server connection preface (RFC 9113 §3.4).
    static let serverPreface: [UInt8] = [0, 0, 0, 0x04, 0, 0, 0, 0, 0]

    @Test("text instead of frames ends the request with an error at once, not at its timeout", arguments: HTTP2FramingKind.allCases)
    func notHTTP2(_ framing: HTTP2FramingKind) async throws {
        let tls = try SandboxTLS.make()
        defer { tls.remove() }
        let server = try await RawTLSServer.start(tls: tls) { _ in Array("HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n".utf8) }
        let transport = NIOHTTP2Transport(framing: framing)
        defer { transport.shutdown() }
        let started = ContinuousClock.now
        await #expect(throws: HTTPTransportError.self) {
            try await transport.send(HTTPRequest(url: "https://localhost:\(server.port)/x", body: Array("{}".utf8), timeout: .seconds(20),
                                                 tls: TLSOptions(caFile: tls.caFile)))
        }
        #expect(ContinuousClock.now - started < .seconds(10))
        try await server.stop()
    }

    @Test("random frames after a valid preface: every request ends, with an answer or an error, and the process lives",
          arguments: HTTP2FramingKind.allCases)
    func randomFrames(_ framing: HTTP2FramingKind) async throws {
        let tls = try SandboxTLS.make()
        defer { tls.remove() }
        let connection = Atomic(0)
        let server = try await RawTLSServer.start(tls: tls) { _ in
            // A different sequence on each connection, the same from run to run.
            var generator = SplitMix(seed: UInt64(connection.add(1, ordering: .relaxed).newValue))
            return Self.serverPreface + (0..<512).map { _ in UInt8.random(in: 0...255, using: &generator) }
        }
        let transport = NIOHTTP2Transport(configuration: HTTPTransportConfiguration(maximumConnectionsPerHost: 1), framing: framing)
        defer { transport.shutdown() }
        for index in 0..<40 {
            let request = HTTPRequest(url: "https://localhost:\(server.port)/r\(index)", body: Array("{}".utf8), timeout: .seconds(3),
                                      tls: TLSOptions(caFile: tls.caFile))
            do throws(HTTPTransportError) {
                _ = try await transport.send(request)
            } catch {
                #expect(error != .shutDown && error != .cancelled)
            }
        }
        #expect(connection.load(ordering: .relaxed) >= 2, "a connection that went wrong was replaced")
        try await server.stop()
    }
}

/// TLS with ALPN h2, and then the bytes `answer` gives for the first bytes the client sent, written once.
private struct RawTLSServer {
    let group: MultiThreadedEventLoopGroup
    let channel: any Channel
    var port: Int { channel.localAddress?.port ?? 0 }

    private final class Answerer: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        let answer: @Sendable ([UInt8]) -> [UInt8]
        private var answered = false

        init(answer: @escaping @Sendable ([UInt8]) -> [UInt8]) { self.answer = answer }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard !answered else { return }
            answered = true
            let bytes = answer(Array(buffer: unwrapInboundIn(data)))
            context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: bytes)), promise: nil)
        }
    }

    static func start(tls: SandboxTLS, answer: @escaping @Sendable ([UInt8]) -> [UInt8]) async throws -> RawTLSServer {
        let sslContext = try NIOSSLContext(configuration: tls.serverConfiguration(applicationProtocols: ["h2"]))
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: sslContext))
                    try channel.pipeline.syncOperations.addHandler(Answerer(answer: answer))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return RawTLSServer(group: group, channel: channel)
    }

    func stop() async throws {
        try await channel.close()
        try await group.shutdownGracefully()
    }
}
