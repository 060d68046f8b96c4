import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import Prometheus
import Synchronization
import Testing
@testable import PushWorker

@Suite("Operations endpoint: /metrics, /healthz, /readyz")
struct OperationsServerTests {
    static func endpoint(
        bindAddress: String = "127.0.0.1", idleTimeout: Duration = .seconds(60),
        maximumConnections: Int = 32, requestHeadTimeout: Duration = .seconds(60),
        responseWriteTimeout: Duration = .seconds(60)
    ) -> OperationsEndpoint {
        OperationsEndpoint(
            bindAddress: bindAddress, port: 0, idleTimeout: idleTimeout, maximumConnections: maximumConnections,
            requestHeadTimeout: requestHeadTimeout, responseWriteTimeout: responseWriteTimeout)
    }

    static func start(
        _ endpoint: OperationsEndpoint, registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()
    ) async throws -> OperationsServer {
        try await OperationsServer.start(
            endpoint, registry: registry,
            liveness: { (true, "alive") }, readiness: { (true, "ready") })
    }

    /// A registry whose `/metrics` answer is about 2 MiB: far more than a `slowReader` client and the server's socket
    /// buffers take, so writing it to a client that does not read blocks.
    static func largeMetricsRegistry() -> PrometheusCollectorRegistry {
        let registry = PrometheusCollectorRegistry()
        for name in ["push_large_one_total", "push_large_two_total"] {
            registry.makeCounter(name: name, labels: [("padding", String(repeating: "p", count: 1 << 20))]).increment()
        }
        return registry
    }

    /// The status line of the answer that arrives first on `client`, nil if none does.
    static func statusLine(_ client: TCPClient) -> String? {
        guard case .bytes(let text) = client.receive(within: .seconds(5)) else { return nil }
        return text.components(separatedBy: "\r\n").first
    }

    func get(_ port: Int, _ path: String) async throws -> (Int, String) {
        let (data, response) = try await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(port)\(path)")!)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, String(decoding: data, as: UTF8.self))
    }

    @Test("metrics in Prometheus text format; readiness answers 503 with its reason until ready; unknown paths 404")
    func endpoints() async throws {
        let registry = PrometheusCollectorRegistry()
        registry.makeCounter(name: "push_example_total", labels: [("provider", "apns")]).increment(by: Int64(3))
        let ready = Atomic<Bool>(false)
        let server = try await OperationsServer.start(
            Self.endpoint(), registry: registry,
            liveness: { (true, "alive") },
            readiness: { ready.load(ordering: .relaxed) ? (true, "ready") : (false, "not yet joined the consumer group") })
        let (metricsStatus, metrics) = try await get(server.port, "/metrics")
        #expect(metricsStatus == 200)
        #expect(metrics.contains(#"push_example_total{provider="apns"} 3"#))
        #expect(try await get(server.port, "/healthz") == (200, "alive\n"))
        #expect(try await get(server.port, "/readyz") == (503, "not yet joined the consumer group\n"))
        ready.store(true, ordering: .relaxed)
        #expect(try await get(server.port, "/readyz") == (200, "ready\n"))
        #expect(try await get(server.port, "/nope").0 == 404)
        await server.stop()
    }

    @Test("a connection whose client sends nothing for the idle timeout is closed by the server")
    func idleConnectionIsClosed() async throws {
        let server = try await Self.start(Self.endpoint(idleTimeout: .milliseconds(500)))
        let client = try TCPClient(host: "127.0.0.1", port: server.port)
        #expect(client.get("/healthz") == "HTTP/1.1 200 OK")
        let idleSince = ContinuousClock.now
        #expect(client.receive(within: .milliseconds(200)) == .nothing, "still open before the timeout")
        #expect(client.receive(within: .seconds(5)) == .closed)
        #expect(ContinuousClock.now - idleSince >= .milliseconds(450))
        await server.stop()
    }

    @Test("at the connection cap a new connection takes the place of the oldest idle one; the others keep working")
    func newConnectionReplacesTheOldestIdleOne() async throws {
        let server = try await Self.start(Self.endpoint(maximumConnections: 3))
        let admitted = try (1...3).map { _ in try TCPClient(host: "127.0.0.1", port: server.port) }
        for client in admitted { #expect(client.get("/healthz") == "HTTP/1.1 200 OK") }

        let newcomer = try TCPClient(host: "127.0.0.1", port: server.port)
        #expect(newcomer.get("/healthz") == "HTTP/1.1 200 OK")
        #expect(admitted[0].receive(within: .seconds(5)) == .closed, "the oldest gave its place")
        for client in admitted.dropFirst() { #expect(client.get("/readyz") == "HTTP/1.1 200 OK") }
        await server.stop()
    }

    @Test("32 clients that never read their /metrics answer hold every place, and /healthz and /readyz are still answered")
    func probeIsAnsweredWhileUnreadAnswersHoldEveryPlace() async throws {
        // The write deadline is long here, so what lets the probes in is the displacement of the oldest busy connection.
        let server = try await Self.start(
            Self.endpoint(maximumConnections: 32, responseWriteTimeout: .seconds(60)), registry: Self.largeMetricsRegistry())
        let holders = try (1...32).map { _ in try TCPClient(host: "127.0.0.1", port: server.port, slowReader: true) }
        for client in holders { client.send("GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n") }
        // Each reads the first bytes of its answer and no more: the server is answering every one, its write blocked.
        for client in holders { #expect(Self.statusLine(client) == "HTTP/1.1 200 OK") }

        let livenessProbe = try TCPClient(host: "127.0.0.1", port: server.port)
        #expect(livenessProbe.get("/healthz") == "HTTP/1.1 200 OK")
        #expect(holders[0].closes(within: .seconds(5)), "the oldest holder gave its place")
        let readinessProbe = try TCPClient(host: "127.0.0.1", port: server.port)
        #expect(readinessProbe.get("/readyz") == "HTTP/1.1 200 OK")
        #expect(livenessProbe.closes(within: .seconds(5)), "an answered, kept-alive connection gives its place first")
        #expect(holders[1].closes(within: .milliseconds(100)) == false, "the other holders keep theirs")
        await server.stop()
    }

    @Test("32 clients announcing 1 GB request bodies and dripping them hold no place: /healthz is answered")
    func bodyDrippersHoldNoPlace() async throws {
        let server = try await Self.start(Self.endpoint(maximumConnections: 32))
        let drippers = try (1...32).map { _ in try TCPClient(host: "127.0.0.1", port: server.port) }
        for client in drippers {
            client.send("GET /healthz HTTP/1.1\r\nHost: test\r\nContent-Length: 1000000000\r\n\r\n")
        }
        for client in drippers { #expect(Self.statusLine(client) == "HTTP/1.1 413 Payload Too Large") }
        for client in drippers { client.send("x") }

        #expect(try TCPClient(host: "127.0.0.1", port: server.port).get("/healthz") == "HTTP/1.1 200 OK")
        await server.stop()
    }

    @Test(
        "a GET or HEAD announcing a request body is answered 413 at its head and closed; the body is never waited for",
        arguments: [
            "GET /metrics HTTP/1.1\r\nHost: test\r\nContent-Length: 1000000000\r\n\r\n",
            "HEAD /healthz HTTP/1.1\r\nHost: test\r\nContent-Length: 1000000000\r\n\r\n",
            "GET /healthz HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n",
        ])
    func requestBodyIsRefusedAtTheHead(request: String) async throws {
        let server = try await Self.start(Self.endpoint())
        let client = try TCPClient(host: "127.0.0.1", port: server.port)
        client.send(request)
        #expect(Self.statusLine(client) == "HTTP/1.1 413 Payload Too Large", "answered before a byte of the body was sent")
        var closed = false
        for _ in 1...50 where !closed {
            client.send("x")
            closed = client.receive(within: .milliseconds(100)) == .closed
        }
        #expect(closed, "the connection does not wait for the announced body")
        await server.stop()
    }

    @Test("a method other than GET or HEAD is answered 405 with Allow at its head; a body it announces is never waited for")
    func otherMethodsAreRefusedAtTheHead() async throws {
        let server = try await Self.start(Self.endpoint())
        let client = try TCPClient(host: "127.0.0.1", port: server.port)
        client.send("POST /healthz HTTP/1.1\r\nHost: test\r\nContent-Length: 1000000000\r\n\r\n")
        guard case .bytes(let answer) = client.receive(within: .seconds(5)) else {
            Issue.record("no answer before the body")
            return
        }
        #expect(answer.hasPrefix("HTTP/1.1 405 Method Not Allowed\r\n"))
        #expect(answer.lowercased().contains("\r\nallow: get, head\r\n"))
        #expect(client.closes(within: .seconds(5)))

        let bodiless = try TCPClient(host: "127.0.0.1", port: server.port)
        bodiless.send("DELETE /metrics HTTP/1.1\r\nHost: test\r\n\r\n")
        #expect(Self.statusLine(bodiless) == "HTTP/1.1 405 Method Not Allowed")
        #expect(bodiless.get("/healthz") == "HTTP/1.1 200 OK", "a request without a body keeps its connection")
        await server.stop()
    }

    @Test("HEAD is answered with the head alone; pipelined requests are answered in order on one connection")
    func headAndPipelinedRequests() async throws {
        let server = try await Self.start(Self.endpoint())
        let client = try TCPClient(host: "127.0.0.1", port: server.port)
        client.send(
            "HEAD /healthz HTTP/1.1\r\nHost: test\r\n\r\nGET /readyz HTTP/1.1\r\nHost: test\r\n\r\n"
                + "GET /nope HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
        var received = ""
        while case .bytes(let more) = client.receive(within: .seconds(5)) { received += more }
        let statusLines = received.matches(of: /HTTP\/1\.1 [0-9]{3} [^\r]*/).map { String($0.output) }
        #expect(statusLines == ["HTTP/1.1 200 OK", "HTTP/1.1 200 OK", "HTTP/1.1 404 Not Found"])
        #expect(!received.contains("alive"), "no body for HEAD")
        #expect(received.contains("ready\n"))
        await server.stop()
    }

    @Test("a client that does not read a large /metrics answer is reset at the write deadline, the answer unfinished")
    func unreadAnswerIsAbortedAtTheWriteDeadline() async throws {
        let server = try await Self.start(
            Self.endpoint(idleTimeout: .seconds(60), responseWriteTimeout: .milliseconds(300)),
            registry: Self.largeMetricsRegistry())
        let client = try TCPClient(host: "127.0.0.1", port: server.port, slowReader: true)
        client.send("GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n")
        #expect(client.closes(within: .seconds(10)), "closed while the client reads nothing")
        let (bytes, closed) = client.receiveAll()
        #expect(closed)
        #expect(bytes < 1 << 20, "far less than the 2 MiB answer arrived: the server gave up writing it")
        await server.stop()
    }

    @Test("40 clients dripping request heads a byte at a time hold every place, and /healthz is still answered")
    func probeIsAnsweredWhileSlowClientsHoldEveryPlace() async throws {
        // The head deadline is long here, so what lets the probe in is the replacement of the oldest idle connection.
        let server = try await Self.start(Self.endpoint(maximumConnections: 40, requestHeadTimeout: .seconds(60)))
        let drippers = try (1...40).map { _ in try TCPClient(host: "127.0.0.1", port: server.port) }
        for byte in ["G", "E", "T"] {
            for client in drippers { client.send(byte) }
        }
        #expect(drippers[39].receive(within: .milliseconds(200)) == .nothing, "every dripper was let in")

        let probe = try TCPClient(host: "127.0.0.1", port: server.port)
        #expect(probe.get("/healthz") == "HTTP/1.1 200 OK")
        #expect(drippers[0].receive(within: .seconds(5)) == .closed, "the oldest dripper gave its place")
        #expect(drippers[1].receive(within: .milliseconds(100)) == .nothing)
        await server.stop()
    }

    @Test("a client that has not completed its request head within the deadline is closed, though it keeps sending bytes")
    func incompleteRequestHeadIsClosed() async throws {
        let server = try await Self.start(Self.endpoint(idleTimeout: .seconds(60), requestHeadTimeout: .milliseconds(500)))
        let dripper = try TCPClient(host: "127.0.0.1", port: server.port)
        let connected = ContinuousClock.now
        var closed = false
        for byte in "GET /healthz HTTP/1.1\r\nHost: test\r\nX-Drip: ".map(String.init) {
            dripper.send(byte)
            if dripper.receive(within: .milliseconds(100)) == .closed {
                closed = true
                break
            }
        }
        #expect(closed)
        #expect(ContinuousClock.now - connected >= .milliseconds(450))
        await server.stop()
    }

    @Test("the head deadline runs from the first byte of each request: a kept-alive connection waits between requests")
    func keptAliveConnectionIsNotClosedBetweenRequests() async throws {
        let server = try await Self.start(Self.endpoint(idleTimeout: .seconds(60), requestHeadTimeout: .milliseconds(300)))
        let client = try TCPClient(host: "127.0.0.1", port: server.port)
        #expect(client.get("/healthz") == "HTTP/1.1 200 OK")
        #expect(client.receive(within: .seconds(1)) == .nothing, "open past the head deadline between requests")
        #expect(client.get("/readyz") == "HTTP/1.1 200 OK")
        client.send("GET /healthz HTTP/1.1\r\n")
        #expect(client.receive(within: .seconds(5)) == .closed, "an unfinished next head gets the deadline")
        await server.stop()
    }

    @Test("the endpoint listens on PUSH_HTTP_BIND only: bound to 127.0.0.2, that is the socket's only address")
    func bindAddressIsHonoured() async throws {
        let configuration = try WorkerConfiguration.load(from: [
            "PUSH_KAFKA_BROKERS": "k1:9092", "PUSH_PROXY_URL": "https://proxy.example.com/push",
            "PUSH_HTTP_BIND": "127.0.0.2", "PUSH_HTTP_PORT": "0",
        ]).get()
        let server = try await Self.start(configuration.operations)
        // The kernel's own answer: a socket bound to 127.0.0.2 accepts nothing addressed to 127.0.0.1. (Connecting to
        // 127.0.0.1 on the same port proves nothing: another test's listener may hold 127.0.0.1 on that number.)
        #expect(server.localAddress?.ipAddress == "127.0.0.2")
        #expect(try TCPClient(host: "127.0.0.2", port: server.port).get("/healthz") == "HTTP/1.1 200 OK")
        await server.stop()
    }
}
