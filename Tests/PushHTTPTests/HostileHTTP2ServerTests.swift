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

    @Test("text instead of frames ends the request with an error at once, not at its timeout", arguments: HTTP2FramingKind.allFramings)
    func notHTTP2(_ framing: HTTP2FramingKind) async throws {
        let tls = try SandboxTLS.make()
        defer { tls.remove() }
        let server = try await RawTLSServer.start(tls: tls) { _ in Array("HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n".utf8) }
        let transport = NIOHTTP2Transport(framing: framing)
        defer { transport.shutdown() }
        let started = ContinuousClock.now
        await #expect(throws: HTTPTransportError.self) {
            try await transport.send(
                HTTPRequest(
                    url: "https://localhost:\(server.port)/x", body: Array("{}".utf8), timeout: .seconds(120),
                    tls: TLSOptions(caFile: tls.caFile)))
        }
        // Far below the timeout, with room for a task pool the whole suite keeps busy (stalls of 20 s seen on 2 cores).
        #expect(ContinuousClock.now - started < .seconds(60))
        try await server.stop()
    }

    @Test(
        "random frames after a valid preface: every request ends, with an answer or an error, and the process lives",
        arguments: HTTP2FramingKind.allFramings)
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
            let request = HTTPRequest(
                url: "https://localhost:\(server.port)/r\(index)", body: Array("{}".utf8), timeout: .seconds(3),
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

    @Test(
        "a stream the server refuses (RST_STREAM REFUSED_STREAM) was not processed: the request is sent again and answered (RFC 9113 §8.7)",
        arguments: HTTP2FramingKind.allFramings)
    func refusedStreamIsSentAgain(_ framing: HTTP2FramingKind) async throws {
        let tls = try SandboxTLS.make()
        defer { tls.remove() }
        let requests = RequestCounter()
        let server = try await RawTLSServer.start(tls: tls) { StreamRefuser(refusals: 1, requests: requests) }
        let transport = NIOHTTP2Transport(framing: framing)
        defer { transport.shutdown() }
        let response = try await transport.send(
            HTTPRequest(
                url: "https://localhost:\(server.port)/x", body: Array("{}".utf8),
                tls: TLSOptions(caFile: tls.caFile)))
        #expect(response.status == 200)
        #expect(requests.count == 2)
        try await server.stop()
    }

    @Test(
        "a request refused on every try is sent 1 + maximumHandBacks times, then fails as refused", arguments: HTTP2FramingKind.allFramings)
    func alwaysRefusedFails(_ framing: HTTP2FramingKind) async throws {
        let tls = try SandboxTLS.make()
        defer { tls.remove() }
        let requests = RequestCounter()
        let server = try await RawTLSServer.start(tls: tls) { StreamRefuser(refusals: .max, requests: requests) }
        let transport = NIOHTTP2Transport(framing: framing)
        defer { transport.shutdown() }
        do throws(HTTPTransportError) {
            _ = try await transport.send(
                HTTPRequest(
                    url: "https://localhost:\(server.port)/x", body: Array("{}".utf8),
                    tls: TLSOptions(caFile: tls.caFile)))
            Issue.record("a request refused every time was answered")
        } catch {
            #expect(error.description.contains("refused the request 4 times"), "\(error)")
        }
        #expect(requests.count == 1 + HTTP2ConnectionPool.maximumHandBacks)
        try await server.stop()
    }

    @Test(
        """
        an answer whose HPACK-compressed fields decode past SETTINGS_MAX_HEADER_LIST_SIZE (5 KB on the wire, 4 MB decoded) fails \
        its request while decoding; nghttp2 resets only that stream and its connection carries the next request, \
        swift-nio-http2 ends the connection and the next request goes over a new one
        """, arguments: HTTP2FramingKind.allFramings)
    func fieldSectionBeyondTheLimit(_ framing: HTTP2FramingKind) async throws {
        let tls = try SandboxTLS.make()
        defer { tls.remove() }
        let bomb = FieldSectionBomb.Record()
        let server = try await RawTLSServer.start(tls: tls) { FieldSectionBomb(record: bomb) }
        let transport = NIOHTTP2Transport(configuration: HTTPTransportConfiguration(maximumConnectionsPerHost: 1), framing: framing)
        defer { transport.shutdown() }
        let options = TLSOptions(caFile: tls.caFile)
        do throws(HTTPTransportError) {
            let response = try await transport.send(
                HTTPRequest(url: "https://localhost:\(server.port)/bomb", timeout: .seconds(5), tls: options))
            Issue.record("answered with \(response.status) and \(response.headers.count) fields")
        } catch {
            #expect(error != .timedOut, "failed while decoding, not at the timeout")
            if framing == .nghttp2 { #expect(error.description.contains("SETTINGS_MAX_HEADER_LIST_SIZE"), "\(error)") }
        }
        let next = try await transport.send(HTTPRequest(url: "https://localhost:\(server.port)/next", timeout: .seconds(5), tls: options))
        #expect(next.status == 200)
        if framing == .nghttp2 {
            #expect(bomb.connections.count == 1, "the connection survived the reset stream")
            #expect(bomb.resetStreams.withLock { $0 } == [1], "RST_STREAM for the bombed stream")
        } else {
            // swift-nio-http2's decoder ends the whole connection (NIOHTTP2Framing).
            #expect(bomb.connections.count == 2)
        }
        try await server.stop()
    }
}

/// An HTTP/2 server written frame by frame: it refuses the first `refusals` request streams the server sees (all its connections) with
/// RST_STREAM(REFUSED_STREAM) and answers later ones `:status 200` (HPACK static entry 8), counting every request.
final class StreamRefuser: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    static let clientPrefaceLength = 24
    let refusals: Int
    let requests: RequestCounter
    private var received: [UInt8] = []
    private var prefaceRead = false

    init(refusals: Int, requests: RequestCounter) {
        self.refusals = refusals
        self.requests = requests
    }

    static func frame(type: UInt8, flags: UInt8, stream: UInt32, payload: [UInt8]) -> [UInt8] {
        let length = UInt32(payload.count)
        return [
            UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF), type, flags,
            UInt8(stream >> 24 & 0x7F), UInt8(stream >> 16 & 0xFF), UInt8(stream >> 8 & 0xFF), UInt8(stream & 0xFF),
        ] + payload
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        received += Array(buffer: unwrapInboundIn(data))
        var answer: [UInt8] = []
        if !prefaceRead {
            guard received.count >= Self.clientPrefaceLength else { return }
            received.removeFirst(Self.clientPrefaceLength)
            prefaceRead = true
            answer += HostileHTTP2ServerTests.serverPreface
        }
        while received.count >= 9 {
            let length = Int(received[0]) << 16 | Int(received[1]) << 8 | Int(received[2])
            guard received.count >= 9 + length else { break }
            let type = received[3], flags = received[4]
            let stream = UInt32(received[5] & 0x7F) << 24 | UInt32(received[6]) << 16 | UInt32(received[7]) << 8 | UInt32(received[8])
            received.removeFirst(9 + length)
            if type == 0x4, flags & 0x1 == 0 { answer += Self.frame(type: 0x4, flags: 0x1, stream: 0, payload: []) }  // SETTINGS ACK
            guard type == 0x1 else { continue }  // HEADERS opens a request
            requests.add()
            if requests.count <= refusals {
                answer += Self.frame(type: 0x3, flags: 0, stream: stream, payload: [0, 0, 0, 0x7])  // RST_STREAM REFUSED_STREAM
            } else {
                answer += Self.frame(type: 0x1, flags: 0x5, stream: stream, payload: [0x88])  // END_STREAM | END_HEADERS
            }
        }
        if !answer.isEmpty { context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: answer)), promise: nil) }
    }
}

/// An HTTP/2 server written frame by frame whose first answer is a field section that HPACK's dynamic table makes tiny
/// on the wire: one 4 000-byte field, added to the table (RFC 7541 §6.2.1), then referenced by its index (§6.1) 1 000
/// times: 5 KB sent, 4 MB decoded. The stream is left open (no END_STREAM); later requests get `:status 200`.
private final class FieldSectionBomb: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    final class Record: Sendable {
        let connections = RequestCounter()
        let requests = RequestCounter()
        let resetStreams = Mutex<[UInt32]>([])
    }

    static let fieldSection: [UInt8] = {
        let value = [UInt8](repeating: UInt8(ascii: "a"), count: 4000)
        // 0x88 `:status 200`; 0x40 literal with incremental indexing, new name; 4000 = 127 + 0x1E·128 + 0x21 (§5.1).
        let literal: [UInt8] = [0x40, 6] + Array("x-bomb".utf8) + [0x7F, 0xA1, 0x1E] + value
        return [0x88] + literal + [UInt8](repeating: 0x80 | 62, count: 1000)  // 62: the newest dynamic entry
    }()

    let record: Record
    private var received: [UInt8] = []
    private var prefaceRead = false

    init(record: Record) {
        self.record = record
        record.connections.add()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        received += Array(buffer: unwrapInboundIn(data))
        var answer: [UInt8] = []
        if !prefaceRead {
            guard received.count >= StreamRefuser.clientPrefaceLength else { return }
            received.removeFirst(StreamRefuser.clientPrefaceLength)
            prefaceRead = true
            answer += HostileHTTP2ServerTests.serverPreface
        }
        while received.count >= 9 {
            let length = Int(received[0]) << 16 | Int(received[1]) << 8 | Int(received[2])
            guard received.count >= 9 + length else { break }
            let type = received[3], flags = received[4]
            let stream = UInt32(received[5] & 0x7F) << 24 | UInt32(received[6]) << 16 | UInt32(received[7]) << 8 | UInt32(received[8])
            received.removeFirst(9 + length)
            if type == 0x4, flags & 0x1 == 0 { answer += StreamRefuser.frame(type: 0x4, flags: 0x1, stream: 0, payload: []) }
            if type == 0x3 { record.resetStreams.withLock { $0.append(stream) } }
            guard type == 0x1 else { continue }
            record.requests.add()
            if record.requests.count == 1 {
                answer += StreamRefuser.frame(type: 0x1, flags: 0x4, stream: stream, payload: Self.fieldSection)  // END_HEADERS
            } else {
                answer += StreamRefuser.frame(type: 0x1, flags: 0x5, stream: stream, payload: [0x88])
            }
        }
        if !answer.isEmpty { context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: answer)), promise: nil) }
    }
}

/// TLS with ALPN h2, then a handler of the test's: by default, the bytes `answer` gives for the first bytes
/// the client sent, written once.
struct RawTLSServer {
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
        try await start(tls: tls) { Answerer(answer: answer) }
    }

    static func start(tls: SandboxTLS, handler: @escaping @Sendable () -> any ChannelHandler) async throws -> RawTLSServer {
        let sslContext = try NIOSSLContext(configuration: tls.serverConfiguration(applicationProtocols: ["h2"]))
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: sslContext))
                    try channel.pipeline.syncOperations.addHandler(handler())
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
