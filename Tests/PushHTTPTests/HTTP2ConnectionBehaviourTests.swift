import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import PushCore
import PushSandbox
import Synchronization
import Testing
import TestSupport
@testable import PushHTTP

@Suite("How the HTTP/2 clients use their connections: shutdown notices, flow control, the urgent reserve")
struct HTTP2ConnectionBehaviourTests {
    @Test(
        "a server's graceful GOAWAY ends its connection without losing a request: new ones go to a new connection",
        arguments: TransportKind.allCases)
    func gracefulGoAway(_ kind: TransportKind) async throws {
        // The last answer of each round announces the shutdown, so no request is in flight when the
        // sandbox closes the connection a second later (a real server would finish open streams first).
        let round = 30
        let answered = Atomic(0)
        let closed = RequestCounter()
        let sandboxTLS = try SandboxTLS.make()
        defer { sandboxTLS.remove() }
        let server = try await SandboxServer.start(tls: sandboxTLS, connectionClosed: { _ in closed.add() }) { _ in
            var response = SandboxResponse(status: 200, body: Array("ok".utf8))
            if answered.add(1, ordering: .relaxed).newValue % round == 0 { response.connectionAction = .gracefulGoAway }
            return response
        }
        let transport = kind.make(HTTPTransportConfiguration(maximumConnectionsPerHost: 1))
        defer { transport.shutdown() }
        let tls = TLSOptions(caFile: sandboxTLS.caFile)
        for index in 0..<3 {
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for request in 0..<round {
                    group.addTask { try await transport.send(HTTPRequest(url: server.baseURL + "/r\(index)-\(request)", tls: tls)).status }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses.count == round && statuses.allSatisfy { $0 == 200 })
            try await Task.sleep(for: .milliseconds(100))
        }
        let deadline = ContinuousClock.now + .seconds(30)
        while closed.count < 3, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(closed.count == 3, "each round went over a connection of its own, closed after its GOAWAY")
        await server.stop()
    }

    @Test(
        "a request above the last stream a GOAWAY names was not processed: the swift-nio client sends it again on a new connection (RFC 9113 §6.8)",
        arguments: HTTP2FramingKind.allFramings)
    func unprocessedStreamsAreSentAgain(_ framing: HTTP2FramingKind) async throws {
        let tls = try SandboxTLS.make()
        defer { tls.remove() }
        let closed = RequestCounter()
        let secondArrived = RequestCounter()
        let server = try await SandboxServer.start(tls: tls, connectionClosed: { _ in closed.add() }) { request in
            if request.path == "/first" {
                // Answered once /second has opened stream 3; the GOAWAY then names stream 1 as the last processed.
                var response = SandboxResponse(status: 200, body: Array("first".utf8), delay: .seconds(30))
                response.answerWhen = { secondArrived.count > 0 }
                response.connectionAction = .goAway
                return response
            }
            secondArrived.add()
            // On the first connection /second is never answered (the connection closes first); on the next one at once.
            return SandboxResponse(status: 200, body: Array("second".utf8), delay: closed.count == 0 ? .seconds(15) : nil)
        }
        let transport = NIOHTTP2Transport(configuration: HTTPTransportConfiguration(maximumConnectionsPerHost: 1), framing: framing)
        defer { transport.shutdown() }
        let options = TLSOptions(caFile: tls.caFile)
        let first = Task { try await transport.send(HTTPRequest(url: server.baseURL + "/first", tls: options)) }
        let deadline = ContinuousClock.now + .seconds(30)
        while server.requests.isEmpty, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        let second = try await transport.send(HTTPRequest(url: server.baseURL + "/second", timeout: .seconds(20), tls: options))
        #expect(second.body == Array("second".utf8))
        #expect(try await first.value.body == Array("first".utf8))
        let seconds = server.requests.filter { $0.path == "/second" }
        #expect(seconds.count == 2, "sent once on the closing connection, once more on a new one")
        #expect(closed.count >= 1)
        await server.stop()
    }

    @Test(
        "an answer larger than the initial flow-control windows arrives whole, again and again on one connection",
        arguments: TransportKind.allCases)
    func largeAnswersKeepTheWindowsOpen(_ kind: TransportKind) async throws {
        let size = 2_500_000
        let sandbox = try await ProxySandboxFixture.start { _ in
            var response = SandboxResponse(status: 200)
            response.generatedBodyBytes = size
            return response
        }
        let transport = kind.make(HTTPTransportConfiguration(maximumConnectionsPerHost: 1))
        defer { transport.shutdown() }
        for _ in 0..<3 {
            let response = try await transport.send(
                HTTPRequest(
                    url: sandbox.server.baseURL + "/big", tls: TLSOptions(caFile: sandbox.tls.caFile),
                    maximumResponseBytes: 3_000_000))
            #expect(response.status == 200)
            #expect(response.body.count == size)
            #expect(!response.bodyTruncated)
        }
        await sandbox.stop()
    }

    @Test(
        "answers cut at the limit do not use up the connection's flow-control window: later answers still arrive",
        arguments: TransportKind.allCases)
    func cutAnswersKeepTheConnectionWindow(_ kind: TransportKind) async throws {
        let sandbox = try await ProxySandboxFixture.start { request in
            var response = SandboxResponse(status: 200, body: Array("small".utf8))
            if request.path.hasPrefix("/huge") { response.generatedBodyBytes = 8 << 20 }
            return response
        }
        let transport = kind.make(HTTPTransportConfiguration(maximumConnectionsPerHost: 1))
        defer { transport.shutdown() }
        let tls = TLSOptions(caFile: sandbox.tls.caFile)
        for index in 0..<20 {
            let cut = try await transport.send(
                HTTPRequest(
                    url: sandbox.server.baseURL + "/huge\(index)", timeout: .seconds(5), tls: tls,
                    maximumResponseBytes: 1000))
            #expect(cut.bodyTruncated && cut.body.count == 1000)
        }
        let after = try await transport.send(HTTPRequest(url: sandbox.server.baseURL + "/small", timeout: .seconds(5), tls: tls))
        #expect(after.body == Array("small".utf8))
        await sandbox.stop()
    }

    @Test(
        "an urgent request starts before normal ones waiting for a stream, on the streams kept for urgent ones",
        arguments: TransportKind.allCases)
    func urgentRequestsPassTheQueue(_ kind: TransportKind) async throws {
        // The slow answers must outlast the wait for three of them below, on a machine as loaded as CI's
        // (and the slow requests' timeout must outlast the answers).
        let sandbox = try await ProxySandboxFixture.start { request in
            request.path.hasPrefix("/slow") ? SandboxResponse(status: 200, delay: .seconds(12)) : SandboxResponse(status: 204)
        }
        let transport = kind.make(
            HTTPTransportConfiguration(
                maximumConnectionsPerHost: 1, maximumStreamsPerConnection: 4,
                urgentReservedStreams: 1))
        defer { transport.shutdown() }
        let tls = TLSOptions(caFile: sandbox.tls.caFile)
        let slowDone = RequestCounter()
        let slow = (0..<4).map { index in
            Task {
                defer { slowDone.add() }
                return try await transport.send(HTTPRequest(url: sandbox.server.baseURL + "/slow\(index)", timeout: .seconds(30), tls: tls))
            }
        }
        let deadline = ContinuousClock.now + .seconds(10)
        while sandbox.server.requests.count < 3, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        let urgent = try await transport.send(HTTPRequest(url: sandbox.server.baseURL + "/call", tls: tls, lane: .urgent))
        #expect(urgent.status == 204)
        #expect(slowDone.count == 0, "the call did not wait for a slow request to end")
        #expect(
            sandbox.server.requests.filter { $0.path.hasPrefix("/slow") }.count == 3,
            "normal requests left the reserved stream free")
        for task in slow { _ = try await task.value }
        await sandbox.stop()
    }

    @Test("a connection idle beyond the idle limit is not reused: the next request opens a new one", arguments: TransportKind.allCases)
    func idleConnectionsAreReplaced(_ kind: TransportKind) async throws {
        let tls = try SandboxTLS.make()
        defer { tls.remove() }
        let closings = Mutex<[ObjectIdentifier: ContinuousClock.Instant]>([:])
        let server = try await SandboxServer.start(
            tls: tls,
            connectionClosed: { connection in
                closings.withLock { $0[connection] = .now }
            }
        ) { _ in SandboxResponse(status: 200) }
        let transport = kind.make(HTTPTransportConfiguration(maximumConnectionsPerHost: 1, maximumIdleTime: .seconds(6)))
        defer { transport.shutdown() }
        let request = HTTPRequest(url: server.baseURL + "/idle", tls: TLSOptions(caFile: tls.caFile))
        async let first = transport.send(request)
        async let second = transport.send(request)
        #expect(try await [first.status, second.status] == [200, 200])
        // Told by the connections the server saw, and when they closed, not by how many closed by now: a loaded
        // machine may pause past the idle time anywhere in this test.
        let used = Set(server.requests.map(\.connection))
        #expect(used.count == 1, "a connection in use is reused")
        try await Task.sleep(for: .milliseconds(7500))
        #expect(try await transport.send(request).status == 200)
        let deadline = ContinuousClock.now + .seconds(30)
        func closedAt() -> ContinuousClock.Instant? { used.first.flatMap { $0 }.flatMap { id in closings.withLock { $0[id] } } }
        while closedAt() == nil, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        let last = server.requests.last?.receivedAt
        #expect(
            closedAt().map { closed in last.map { closed <= $0 } ?? false } ?? false,
            "the idle connection closed before the next request came, which went over a new one")
        await server.stop()
    }

    @Test(
        "a connection idle past its idle time is closed by its own timer, with no further request to its pool",
        arguments: HTTP2FramingKind.allFramings)
    func idleConnectionIsClosedByItsTimer(_ framing: HTTP2FramingKind) async throws {
        let tls = try SandboxTLS.make()
        defer { tls.remove() }
        let closed = RequestCounter()
        let server = try await SandboxServer.start(tls: tls, connectionClosed: { _ in closed.add() }) { _ in SandboxResponse(status: 200) }
        let transport = NIOHTTP2Transport(
            configuration: HTTPTransportConfiguration(maximumConnectionsPerHost: 1, maximumIdleTime: .seconds(1)),
            framing: framing)
        defer { transport.shutdown() }
        #expect(try await transport.send(HTTPRequest(url: server.baseURL + "/once", tls: TLSOptions(caFile: tls.caFile))).status == 200)
        let deadline = ContinuousClock.now + .seconds(10)
        while closed.count == 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(closed.count == 1)
        await server.stop()
    }

    @Test(
        "requests that ask for a connection lifetime of their own keep their connection past the transport's idle time",
        arguments: HTTP2FramingKind.allFramings)
    func requestedIdleTime(_ framing: HTTP2FramingKind) async throws {
        let tls = try SandboxTLS.make()
        defer { tls.remove() }
        let closed = RequestCounter()
        let server = try await SandboxServer.start(tls: tls, connectionClosed: { _ in closed.add() }) { _ in SandboxResponse(status: 200) }
        let configuration = HTTPTransportConfiguration(maximumConnectionsPerHost: 1, maximumIdleTime: .seconds(1))
        let transport = NIOHTTP2Transport(configuration: configuration, framing: framing)
        defer { transport.shutdown() }
        let request = HTTPRequest(
            url: server.baseURL + "/kept", tls: TLSOptions(caFile: tls.caFile),
            connectionLifetime: HTTPConnectionLifetime(maximumIdleTime: .seconds(3600)))
        #expect(try await transport.send(request).status == 200)
        try await Task.sleep(for: .milliseconds(2500))
        #expect(closed.count == 0)
        #expect(await transport.poolCount == 1)
        #expect(try await transport.send(request).status == 200)
        #expect(closed.count == 0, "the same connection carried the second request")
        await server.stop()
    }

    @Test(
        "a server that allows one stream until its first answer, then many (APNs until a provider token is accepted), gets one connection for a burst, not two",
        arguments: HTTP2FramingKind.allFramings)
    func lowInitialLimitOpensNoSecondConnection(_ framing: HTTP2FramingKind) async throws {
        let tls = try SandboxTLS.make()
        defer { tls.remove() }
        let server = try await SandboxServer.start(tls: tls, initialConcurrentStreams: 1) { request in
            var response = SandboxResponse(status: 200)
            // The first answer takes its time, so the burst below finds the connection ready and held to one stream.
            if request.path == "/first" { response.delay = .seconds(2) }
            response.connectionAction = .allowConcurrentStreams(1000)
            return response
        }
        let transport = NIOHTTP2Transport(configuration: HTTPTransportConfiguration(maximumConnectionsPerHost: 2), framing: framing)
        defer { transport.shutdown() }
        let tlsOptions = TLSOptions(caFile: tls.caFile)
        try await withThrowingTaskGroup(of: Int.self) { group in
            group.addTask { try await transport.send(HTTPRequest(url: server.baseURL + "/first", tls: tlsOptions)).status }
            try await Task.sleep(for: .seconds(1))
            for _ in 0..<20 {
                group.addTask { try await transport.send(HTTPRequest(url: server.baseURL + "/burst", tls: tlsOptions)).status }
            }
            for try await status in group { #expect(status == 200) }
        }
        #expect(Set(server.requests.compactMap(\.connection)).count == 1)
        await server.stop()
    }

    @Test(
        "a pool whose connections all closed is forgotten: the transport's map of pools shrinks, and push_http2_connection_pools follows",
        arguments: HTTP2FramingKind.allFramings)
    func unusedPoolsAreForgotten(_ framing: HTTP2FramingKind) async throws {
        _ = TestMetrics.registry
        let tls = try SandboxTLS.make()
        defer { tls.remove() }
        var servers: [SandboxServer] = []
        for _ in 0..<3 { servers.append(try await SandboxServer.start(tls: tls) { _ in SandboxResponse(status: 200) }) }
        let name = "pools-\(framing)"
        // Long enough that a loaded machine opens all three and reads both counts before the first one's idle time ends
        // (a full test run on 2 cores has stalled the task pool for over 5 s).
        let transport = NIOHTTP2Transport(
            configuration: HTTPTransportConfiguration(maximumIdleTime: .seconds(15)), name: name, framing: framing)
        defer { transport.shutdown() }
        for server in servers {
            #expect(try await transport.send(HTTPRequest(url: server.baseURL + "/x", tls: TLSOptions(caFile: tls.caFile))).status == 200)
        }
        #expect(await transport.poolCount == 3)
        #expect(TestMetrics.value(of: #"push_http2_connection_pools{client="\#(name)"}"#) == 3)
        let deadline = ContinuousClock.now + .seconds(60)
        while await transport.poolCount > 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(await transport.poolCount == 0)
        #expect(TestMetrics.value(of: #"push_http2_connection_pools{client="\#(name)"}"#) == 0)
        for server in servers { await server.stop() }
    }

    @Test(
        "at maximumConnectionPools a new pool takes the place of the least recently used idle one, whose connection closes",
        arguments: HTTP2FramingKind.allFramings)
    func poolsAreBounded(_ framing: HTTP2FramingKind) async throws {
        let tls = try SandboxTLS.make()
        defer { tls.remove() }
        let closed = RequestCounter()
        var servers: [SandboxServer] = []
        for _ in 0..<3 {
            servers.append(
                try await SandboxServer.start(tls: tls, connectionClosed: { _ in closed.add() }) { _ in SandboxResponse(status: 200) })
        }
        let transport = NIOHTTP2Transport(
            configuration: HTTPTransportConfiguration(maximumIdleTime: .seconds(3600), maximumConnectionPools: 2),
            framing: framing)
        defer { transport.shutdown() }
        for server in servers {
            #expect(try await transport.send(HTTPRequest(url: server.baseURL + "/x", tls: TLSOptions(caFile: tls.caFile))).status == 200)
            #expect(await transport.poolCount <= 2)
        }
        let deadline = ContinuousClock.now + .seconds(10)
        while closed.count == 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(closed.count == 1, "the first pool's connection was closed to make room")
        for server in servers { await server.stop() }
    }

    @Test(
        "a server that allows no concurrent streams and never raises the limit: the request fails as timed out after its timeout, unsent",
        arguments: TransportKind.allCases)
    func noStreamEverAllowed(_ kind: TransportKind) async throws {
        let tls = try SandboxTLS.make()
        defer { tls.remove() }
        let server = try await SandboxServer.start(tls: tls, initialConcurrentStreams: 0) { _ in SandboxResponse(status: 200) }
        let transport = kind.make(HTTPTransportConfiguration(maximumConnectionsPerHost: 1))
        defer { transport.shutdown() }
        let options = TLSOptions(caFile: tls.caFile)
        // A client may send before the server's SETTINGS arrive (RFC 9113 §6.5.3): the first request on a new connection can get through.
        _ = try? await transport.send(HTTPRequest(url: server.baseURL + "/first", timeout: .seconds(1), tls: options))
        try await Task.sleep(for: .milliseconds(200))
        let started = ContinuousClock.now
        await #expect(throws: HTTPTransportError.timedOut) {
            try await transport.send(HTTPRequest(url: server.baseURL + "/never", timeout: .seconds(1), tls: options))
        }
        let waited = ContinuousClock.now - started
        #expect(waited >= .seconds(1) && waited < .seconds(4), "failed after \(waited)")
        #expect(!server.requests.contains { $0.path == "/never" })
        await server.stop()
    }

    @Test(
        "a slow server that allows one stream at a time: the swift-nio client's requests wait longer than their timeout for it, and all are answered",
        arguments: HTTP2FramingKind.allFramings)
    func slowProgressIsNotATimeout(_ framing: HTTP2FramingKind) async throws {
        let tls = try SandboxTLS.make()
        defer { tls.remove() }
        let server = try await SandboxServer.start(tls: tls, initialConcurrentStreams: 1) { _ in
            SandboxResponse(status: 200, delay: .milliseconds(400))
        }
        let transport = NIOHTTP2Transport(configuration: HTTPTransportConfiguration(maximumConnectionsPerHost: 1), framing: framing)
        defer { transport.shutdown() }
        let options = TLSOptions(caFile: tls.caFile)
        #expect(try await transport.send(HTTPRequest(url: server.baseURL + "/first", tls: options)).status == 200)
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<6 {
                group.addTask {
                    try await transport.send(HTTPRequest(url: server.baseURL + "/r\(index)", timeout: .seconds(1), tls: options)).status
                }
            }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(statuses == Array(repeating: 200, count: 6), "the last waited about 2.4 s for a stream, its own timeout 1 s")
        await server.stop()
    }

    @Test("after shutdown, a request fails with shutDown", arguments: TransportKind.allCases)
    func afterShutdown(_ kind: TransportKind) async throws {
        let transport = kind.make()
        transport.shutdown()
        await #expect(throws: HTTPTransportError.shutDown) {
            try await transport.send(HTTPRequest(url: "https://127.0.0.1:9/x"))
        }
    }
}

@Suite("The https URL as the HTTP/2 client reads it")
struct HTTPSTargetTests {
    @Test("host, port, authority and path (with query) come from the URL")
    func parts() throws {
        let target = try #require(HTTPSTarget("https://API.push.apple.com:2197/3/device/abc?x=1#frag"))
        #expect(target.host == "api.push.apple.com")
        #expect(target.port == 2197)
        #expect(target.authority == "API.push.apple.com:2197")
        #expect(target.path == "/3/device/abc?x=1")
        let bare = try #require(HTTPSTarget("https://fcm.googleapis.com"))
        #expect(bare.port == 443 && bare.path == "/")
        let literal = try #require(HTTPSTarget("https://[::1]:8443/p"))
        #expect(literal.host == "::1" && literal.port == 8443)
    }

    @Test(
        "anything but an https URL with a host and a valid port is refused",
        arguments: [
            "http://example.com/", "https://", "https:///path", "https://user@example.com/", "https://example.com:0/",
            "https://example.com:65536/", "https://example.com:80a/", "https://[::1/", "ftp://example.com", "example.com",
        ])
    func refused(_ url: String) { #expect(HTTPSTarget(url) == nil) }
}

@Suite("A host that speaks only HTTP/1.1")
struct HTTP1OnlyHostTests {
    @Test(
        "the swift-nio client hands every request to a host whose TLS handshake chose HTTP/1.1 to libcurl, which answers it",
        arguments: HTTP2FramingKind.allFramings)
    func fallsBackToLibcurl(_ framing: HTTP2FramingKind) async throws {
        let tls = try SandboxTLS.make()
        defer { tls.remove() }
        let server = try await HTTP1Server.start(tls: tls)
        let transport = NIOHTTP2Transport(framing: framing)
        defer { transport.shutdown() }
        for index in 0..<3 {
            let response = try await transport.send(
                HTTPRequest(
                    url: "https://localhost:\(server.port)/h1/\(index)", body: Array("x".utf8),
                    tls: TLSOptions(caFile: tls.caFile)))
            #expect(response.status == 202)
            #expect(response.header("x-protocol") == "HTTP/1.1")
        }
        #expect(server.counter.count == 3)
        try await server.channel.close()
        try await server.group.shutdownGracefully()
    }

    @Test("a request handed to libcurl is cancelled with the task that sent it, not left running until its timeout")
    func fallbackRequestIsCancelled() async throws {
        let tls = try SandboxTLS.make()
        defer { tls.remove() }
        let server = try await HTTP1Server.start(tls: tls)
        let transport = NIOHTTP2Transport()
        defer { transport.shutdown() }
        let options = TLSOptions(caFile: tls.caFile)
        #expect(try await transport.send(HTTPRequest(url: "https://localhost:\(server.port)/first", tls: options)).status == 202)
        let sending = Task {
            try await transport.send(HTTPRequest(url: "https://localhost:\(server.port)/hang", timeout: .seconds(30), tls: options))
        }
        let deadline = ContinuousClock.now + .seconds(30)
        while server.counter.count < 2, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        let cancelledAt = ContinuousClock.now
        sending.cancel()
        await #expect(throws: HTTPTransportError.cancelled) { try await sending.value }
        #expect(ContinuousClock.now - cancelledAt < .seconds(5))
        try await server.channel.close()
        try await server.group.shutdownGracefully()
    }
}

/// A TLS server offering only `http/1.1` in ALPN that answers 202 to everything.
struct HTTP1Server {
    let group: MultiThreadedEventLoopGroup
    let channel: any Channel
    let counter: RequestCounter
    var port: Int { channel.localAddress?.port ?? 0 }

    /// Answers 202 at once, except a request under `/hang`, which it never answers.
    private final class Responder: ChannelInboundHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        let requests: @Sendable () -> Void
        private var hangs = false

        init(requests: @escaping @Sendable () -> Void) { self.requests = requests }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head):
                hangs = head.uri.hasPrefix("/hang")
                return
            case .body: return
            case .end: break
            }
            requests()
            guard !hangs else { return }
            let headers = HTTPHeaders([("x-protocol", "HTTP/1.1"), ("content-length", "0")])
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .accepted, headers: headers))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
    }

    /// - Parameter requireClientCertificate: demand a client certificate issued by the sandbox CA (mutual TLS).
    static func start(tls: SandboxTLS, requireClientCertificate: Bool = false) async throws -> HTTP1Server {
        var configuration = try tls.serverConfiguration(applicationProtocols: ["http/1.1"])
        if requireClientCertificate {
            configuration.certificateVerification = .noHostnameVerification
            configuration.trustRoots = .certificates([try NIOSSLCertificate(bytes: Array(tls.caCertificatePEM.utf8), format: .pem)])
        }
        let sslContext = try NIOSSLContext(configuration: configuration)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let counter = RequestCounter()
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: sslContext))
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(Responder { counter.add() })
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return HTTP1Server(group: group, channel: channel, counter: counter)
    }
}

final class RequestCounter: Sendable {
    private let value = Atomic(0)
    func add() { value.add(1, ordering: .relaxed) }
    var count: Int { value.load(ordering: .relaxed) }
}

@Suite("A connection whose peer vanished")
struct DeadConnectionTests {
    @Test(
        "when nothing arrives during a whole request timeout, a PING unanswered closes the connection; the next request opens a new one",
        arguments: HTTP2FramingKind.allFramings)
    func unansweredPingClosesTheConnection(_ framing: HTTP2FramingKind) async throws {
        let sandbox = try await ProxySandboxFixture.start { _ in SandboxResponse(status: 200) }
        let relay = try await BlackholeRelay.start(to: sandbox.server.port)
        let transport = NIOHTTP2Transport(configuration: HTTPTransportConfiguration(maximumConnectionsPerHost: 1), framing: framing)
        defer { transport.shutdown() }
        let url = "https://localhost:\(relay.port)/x"
        let tls = TLSOptions(caFile: sandbox.tls.caFile)
        #expect(try await transport.send(HTTPRequest(url: url, tls: tls)).status == 200)
        relay.blackhole.store(true, ordering: .relaxed)
        await #expect(throws: HTTPTransportError.timedOut) {
            try await transport.send(HTTPRequest(url: url, timeout: .milliseconds(500), tls: tls))
        }
        try await Task.sleep(for: .seconds(8))
        relay.blackhole.store(false, ordering: .relaxed)
        #expect(try await transport.send(HTTPRequest(url: url, tls: tls)).status == 200)
        #expect(relay.accepted.load(ordering: .relaxed) == 2)
        try await relay.stop()
        await sandbox.stop()
    }
}

/// A TCP relay that can silently drop every byte in both directions, like a peer or NAT that vanished without a FIN.
private final class BlackholeRelay: Sendable {
    let blackhole = Atomic(false)
    let accepted = Atomic(0)
    private let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    private let channel = Mutex<(any Channel)?>(nil)

    var port: Int { channel.withLock { $0?.localAddress?.port ?? 0 } }

    private final class Forwarder: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        let partner: any Channel
        let relay: BlackholeRelay

        init(partner: any Channel, relay: BlackholeRelay) {
            self.partner = partner
            self.relay = relay
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard !relay.blackhole.load(ordering: .relaxed) else { return }
            partner.writeAndFlush(unwrapInboundIn(data), promise: nil)
        }

        func channelInactive(context: ChannelHandlerContext) { partner.close(promise: nil) }
    }

    static func start(to port: Int) async throws -> BlackholeRelay {
        let relay = BlackholeRelay()
        let server = try await ServerBootstrap(group: relay.group)
            .childChannelOption(.autoRead, value: false)
            .childChannelInitializer { inbound in
                relay.accepted.add(1, ordering: .relaxed)
                return ClientBootstrap(group: inbound.eventLoop)
                    .channelInitializer { outbound in
                        outbound.eventLoop.makeCompletedFuture {
                            try outbound.pipeline.syncOperations.addHandler(Forwarder(partner: inbound, relay: relay))
                        }
                    }
                    .connect(host: "127.0.0.1", port: port)
                    .flatMap { outbound in
                        inbound.eventLoop.makeCompletedFuture {
                            try inbound.pipeline.syncOperations.addHandler(Forwarder(partner: outbound, relay: relay))
                        }
                    }
                    .flatMap { inbound.setOption(.autoRead, value: true) }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        relay.channel.withLock { $0 = server }
        return relay
    }

    func stop() async throws {
        try await channel.withLock { $0 }?.close()
        try await group.shutdownGracefully()
    }
}
