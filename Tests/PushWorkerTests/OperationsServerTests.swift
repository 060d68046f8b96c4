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
        maximumConnections: Int = 32, requestHeadTimeout: Duration = .seconds(60)
    ) -> OperationsEndpoint {
        OperationsEndpoint(
            bindAddress: bindAddress, port: 0, idleTimeout: idleTimeout, maximumConnections: maximumConnections,
            requestHeadTimeout: requestHeadTimeout)
    }

    static func start(_ endpoint: OperationsEndpoint) async throws -> OperationsServer {
        try await OperationsServer.start(
            endpoint, registry: PrometheusCollectorRegistry(),
            liveness: { (true, "alive") }, readiness: { (true, "ready") })
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

    @Test("at the connection cap with a request in progress on every connection, one more connection is closed at once")
    func connectionsBeyondTheLimitAreRefusedWhenAllAreBusy() async throws {
        let server = try await Self.start(Self.endpoint(maximumConnections: 3))
        // A complete head whose body never comes: the request is in progress until the body ends.
        let busy = try (1...3).map { _ in try TCPClient(host: "127.0.0.1", port: server.port) }
        for client in busy { client.send("POST /healthz HTTP/1.1\r\nHost: test\r\nContent-Length: 10\r\n\r\n") }
        for client in busy { #expect(client.receive(within: .milliseconds(200)) == .nothing) }

        let excess = try TCPClient(host: "127.0.0.1", port: server.port)
        #expect(excess.receive(within: .seconds(5)) == .closed)
        for client in busy { #expect(client.receive(within: .milliseconds(100)) == .nothing, "the busy ones stay open") }
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
