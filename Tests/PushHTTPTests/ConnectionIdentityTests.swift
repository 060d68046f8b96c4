import Foundation
import PushCore
import PushSandbox
import Synchronization
import Testing
import TestSupport
@testable import PushHTTP

/// The connections each request reached the server on, and those that closed.
private final class ConnectionLog: Sendable {
    private let state = Mutex((byPath: [String: ObjectIdentifier](), closed: Set<ObjectIdentifier>()))

    func received(_ request: SandboxRequest) {
        guard let connection = request.connection else { return }
        state.withLock { $0.byPath[request.path] = connection }
    }

    func closed(_ connection: ObjectIdentifier) { state.withLock { _ = $0.closed.insert(connection) } }

    func connection(of path: String) -> ObjectIdentifier? { state.withLock { $0.byPath[path] } }

    func isClosed(_ connection: ObjectIdentifier?) -> Bool {
        guard let connection else { return false }
        return state.withLock { $0.closed.contains(connection) }
    }
}

@Suite("Connection identities: requests of different identities never share a connection")
struct ConnectionIdentityTests {
    static let teamA = ConnectionIdentity("TEAMAAAAAA/KEYAAAAAAA")
    static let teamB = ConnectionIdentity("TEAMBBBBBB/KEYBBBBBBB")

    @Test(
        "requests of one identity share a connection; another identity, or none, gets connections of its own",
        arguments: HTTP2FramingKind.allFramings)
    func identitiesDoNotShare(_ framing: HTTP2FramingKind) async throws {
        let tls = try SandboxTLS.make()
        defer { tls.remove() }
        let log = ConnectionLog()
        let server = try await SandboxServer.start(tls: tls) { request in
            log.received(request)
            return SandboxResponse(status: 200)
        }
        let transport = NIOHTTP2Transport(configuration: HTTPTransportConfiguration(maximumConnectionsPerHost: 1), framing: framing)
        defer { transport.shutdown() }
        let options = TLSOptions(caFile: tls.caFile)
        for (path, identity) in [("/a1", Self.teamA), ("/b1", Self.teamB), ("/a2", Self.teamA), ("/none", nil), ("/b2", Self.teamB)] {
            let response = try await transport.send(HTTPRequest(url: server.baseURL + path, tls: options, connectionIdentity: identity))
            #expect(response.status == 200)
        }
        #expect(log.connection(of: "/a1") == log.connection(of: "/a2"))
        #expect(log.connection(of: "/b1") == log.connection(of: "/b2"))
        #expect(log.connection(of: "/a1") != log.connection(of: "/b1"))
        #expect(log.connection(of: "/none") != log.connection(of: "/a1") && log.connection(of: "/none") != log.connection(of: "/b1"))
        #expect(await transport.poolCount == 3)
        await server.stop()
    }

    @Test(
        "closeConnections(except:) lets a removed identity's waiting and running requests finish, then closes its connection; a live identity keeps its own",
        arguments: HTTP2FramingKind.allFramings)
    func retiredIdentityFinishesThenCloses(_ framing: HTTP2FramingKind) async throws {
        let tls = try SandboxTLS.make()
        defer { tls.remove() }
        let log = ConnectionLog()
        // One stream per connection and one connection per pool: while one request of A runs, the others wait for it.
        let server = try await SandboxServer.start(tls: tls, initialConcurrentStreams: 1, connectionClosed: { log.closed($0) }) { request in
            log.received(request)
            return SandboxResponse(status: 200, delay: request.path.hasPrefix("/slow") ? .milliseconds(300) : nil)
        }
        let transport = NIOHTTP2Transport(
            configuration: HTTPTransportConfiguration(maximumConnectionsPerHost: 1, maximumIdleTime: .seconds(3600)),
            framing: framing)
        defer { transport.shutdown() }
        let options = TLSOptions(caFile: tls.caFile)
        #expect(
            try await transport.send(HTTPRequest(url: server.baseURL + "/b1", tls: options, connectionIdentity: Self.teamB)).status == 200)
        let sending = (0..<3).map { index in
            Task {
                try await transport.send(HTTPRequest(url: server.baseURL + "/slow\(index)", tls: options, connectionIdentity: Self.teamA))
                    .status
            }
        }
        let deadline = ContinuousClock.now + .seconds(10)
        while server.requests.count < 2, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        transport.closeConnections(except: [Self.teamB])
        for task in sending {
            #expect(try await task.value == 200, "a request of the removed identity sent before the removal is answered")
        }
        let connectionOfA = log.connection(of: "/slow0")
        while !log.isClosed(connectionOfA), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(log.isClosed(connectionOfA), "the removed identity's connection closed once its requests ended")
        #expect(Set((0..<3).map { log.connection(of: "/slow\($0)") }).count == 1, "its waiting requests went over the same connection")
        #expect(!log.isClosed(log.connection(of: "/b1")), "the live identity's connection stays open")
        #expect(
            try await transport.send(HTTPRequest(url: server.baseURL + "/b2", tls: options, connectionIdentity: Self.teamB)).status == 200)
        #expect(log.connection(of: "/b2") == log.connection(of: "/b1"))
        // The identity used again (an app added back): its old connection is closed, so this one goes over a new one.
        #expect(
            try await transport.send(HTTPRequest(url: server.baseURL + "/a-again", tls: options, connectionIdentity: Self.teamA)).status
                == 200)
        await server.stop()
    }

    @Test(
        "connections with the same TLS options share one TLS context; options read again from the path with new content build a new one",
        arguments: HTTP2FramingKind.allFramings)
    func tlsContextsAreBuiltOncePerContent(_ framing: HTTP2FramingKind) async throws {
        _ = TestMetrics.registry
        let tls = try SandboxTLS.make()
        defer { tls.remove() }
        var servers: [SandboxServer] = []
        for _ in 0..<3 { servers.append(try await SandboxServer.start(tls: tls) { _ in SandboxResponse(status: 200) }) }
        let name = "tls-contexts-\(framing)"
        let transport = NIOHTTP2Transport(
            configuration: HTTPTransportConfiguration(maximumIdleTime: .seconds(3600)), name: name, framing: framing)
        defer { transport.shutdown() }
        // A CA bundle of its own, to be replaced at the same path as a Kubernetes secret volume would.
        let caFile = tls.directory.appendingPathComponent("rotated-ca.pem").path
        try tls.caCertificatePEM.write(toFile: caFile, atomically: true, encoding: .utf8)
        let options = TLSOptions(caFile: caFile)
        // Two hosts and two identities: three connections, one context.
        #expect(
            try await transport.send(HTTPRequest(url: servers[0].baseURL + "/", tls: options, connectionIdentity: Self.teamA)).status == 200
        )
        #expect(
            try await transport.send(HTTPRequest(url: servers[0].baseURL + "/", tls: options, connectionIdentity: Self.teamB)).status == 200
        )
        #expect(
            try await transport.send(HTTPRequest(url: servers[1].baseURL + "/", tls: options, connectionIdentity: Self.teamA)).status == 200
        )
        #expect(transport.tlsContextBuilds == 1)
        #expect(TestMetrics.value(of: #"push_http_tls_contexts{client="\#(name)"}"#) == 1)
        try ("# rotated\n" + tls.caCertificatePEM).write(toFile: caFile, atomically: true, encoding: .utf8)
        #expect(
            try await transport.send(HTTPRequest(url: servers[2].baseURL + "/", tls: options, connectionIdentity: Self.teamA)).status == 200
        )
        #expect(transport.tlsContextBuilds == 1, "the options carry the bytes they read: the path is not read again")
        #expect(
            try await transport.send(
                HTTPRequest(url: servers[2].baseURL + "/", tls: TLSOptions(caFile: caFile), connectionIdentity: Self.teamB)
            ).status == 200)
        #expect(transport.tlsContextBuilds == 2, "options read again hold the new content, which made a context of its own")
        for server in servers { await server.stop() }
    }
}
