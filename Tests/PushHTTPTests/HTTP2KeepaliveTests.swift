import NIOCore
import PushSandbox
import Testing
import TestSupport
@testable import PushHTTP

@Suite("Long-lived HTTP/2 connections: a PING keeps an idle connection and finds a dead one")
struct HTTP2KeepaliveTests {
    static func request(_ server: RawTLSServer, _ tls: SandboxTLS, keepalive: Duration?, pingTimeout: Duration = .seconds(5)) -> HTTPRequest
    {
        HTTPRequest(
            url: "https://localhost:\(server.port)/k", tls: TLSOptions(caFile: tls.caFile),
            connectionLifetime: HTTPConnectionLifetime(
                maximumIdleTime: .seconds(3600), keepaliveInterval: keepalive,
                pingTimeout: pingTimeout))
    }

    /// Waits (at most 10 s) for `condition`; the checks after it say what was expected.
    static func wait(until condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while !condition(), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
    }

    @Test(
        "a connection that heard nothing for its keepalive interval sends a PING and, answered, stays open past the transport's idle time",
        arguments: HTTP2FramingKind.allFramings)
    func answeredPingKeepsTheConnection(_ framing: HTTP2FramingKind) async throws {
        let tls = try SandboxTLS.make()
        defer { tls.remove() }
        let record = PingWatcher.Record()
        let server = try await RawTLSServer.start(tls: tls) { PingWatcher(record: record, answersPings: true) }
        let transport = NIOHTTP2Transport(
            configuration: HTTPTransportConfiguration(maximumConnectionsPerHost: 1, maximumIdleTime: .seconds(1)),
            framing: framing)
        defer { transport.shutdown() }
        let request = Self.request(server, tls, keepalive: .seconds(1))
        #expect(try await transport.send(request).status == 200)
        try await Self.wait { record.pings.count >= 3 }
        #expect(record.pings.count >= 3, "a PING after each quiet second: each acknowledgement was read as an answer")
        #expect(record.closed.count == 0)
        #expect(try await transport.send(request).status == 200)
        #expect(record.connections.count == 1, "the same connection carried the second request")
        try await server.stop()
    }

    @Test(
        "a keepalive PING left unanswered closes the idle connection; the next request opens a new one",
        arguments: HTTP2FramingKind.allFramings)
    func unansweredPingClosesTheIdleConnection(_ framing: HTTP2FramingKind) async throws {
        let tls = try SandboxTLS.make()
        defer { tls.remove() }
        let record = PingWatcher.Record()
        let server = try await RawTLSServer.start(tls: tls) { PingWatcher(record: record, answersPings: false) }
        let transport = NIOHTTP2Transport(configuration: HTTPTransportConfiguration(maximumConnectionsPerHost: 1), framing: framing)
        defer { transport.shutdown() }
        let request = Self.request(server, tls, keepalive: .seconds(1), pingTimeout: .milliseconds(500))
        #expect(try await transport.send(request).status == 200)
        try await Self.wait { record.closed.count >= 1 }
        #expect(record.pings.count >= 1)
        #expect(record.closed.count == 1, "the client closed the connection whose PING went unanswered")
        #expect(try await transport.send(request).status == 200)
        #expect(record.connections.count == 2)
        try await server.stop()
    }

    @Test(
        "without a keepalive interval (every provider but APNs) an idle connection sends no PING", arguments: HTTP2FramingKind.allFramings)
    func noKeepaliveNoPing(_ framing: HTTP2FramingKind) async throws {
        let tls = try SandboxTLS.make()
        defer { tls.remove() }
        let record = PingWatcher.Record()
        let server = try await RawTLSServer.start(tls: tls) { PingWatcher(record: record, answersPings: true) }
        let transport = NIOHTTP2Transport(configuration: HTTPTransportConfiguration(maximumConnectionsPerHost: 1), framing: framing)
        defer { transport.shutdown() }
        #expect(try await transport.send(Self.request(server, tls, keepalive: nil)).status == 200)
        try await Task.sleep(for: .milliseconds(2500))
        #expect(record.pings.count == 0)
        #expect(record.closed.count == 0)
        try await server.stop()
    }
}

/// An HTTP/2 server written frame by frame that answers every request `:status 200` and counts the client's PINGs
/// (RFC 9113 §6.7), acknowledging them or not.
private final class PingWatcher: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    final class Record: Sendable {
        let connections = RequestCounter()
        let closed = RequestCounter()
        let pings = RequestCounter()
    }

    let record: Record
    let answersPings: Bool
    private var received: [UInt8] = []
    private var prefaceRead = false

    init(record: Record, answersPings: Bool) {
        self.record = record
        self.answersPings = answersPings
        record.connections.add()
    }

    func channelInactive(context: ChannelHandlerContext) { record.closed.add() }

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
            let payload = Array(received[9..<(9 + length)])
            received.removeFirst(9 + length)
            switch type {
            case 0x4 where flags & 0x1 == 0:
                answer += StreamRefuser.frame(type: 0x4, flags: 0x1, stream: 0, payload: [])  // SETTINGS ACK
            case 0x6 where flags & 0x1 == 0:
                record.pings.add()
                if answersPings { answer += StreamRefuser.frame(type: 0x6, flags: 0x1, stream: 0, payload: payload) }  // PING ACK
            case 0x1:
                answer += StreamRefuser.frame(type: 0x1, flags: 0x5, stream: stream, payload: [0x88])  // :status 200, END_STREAM
            default:
                break
            }
        }
        if !answer.isEmpty { context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: answer)), promise: nil) }
    }
}
