import Foundation
import PushCore
import PushSandbox
import Synchronization
import Testing
import TestSupport
@testable import PushHTTP

@Suite("How both HTTP/2 clients use their connections: shutdown notices, flow control, the urgent reserve")
struct HTTP2ConnectionBehaviourTests {
    @Test("a server's graceful GOAWAY ends its connection without losing a request: new ones go to a new connection",
          arguments: TransportKind.allCases)
    func gracefulGoAway(_ kind: TransportKind) async throws {
        let answered = Atomic(0)
        let sandbox = try await ProxySandboxFixture.start { _ in
            var response = SandboxResponse(status: 200, body: Array("ok".utf8))
            if answered.add(1, ordering: .relaxed).newValue % 40 == 0 { response.connectionAction = .gracefulGoAway }
            return response
        }
        let transport = kind.make(HTTPTransportConfiguration(maximumConnectionsPerHost: 1))
        defer { transport.shutdown() }
        let tls = TLSOptions(caFile: sandbox.tls.caFile)
        for round in 0..<3 {
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<60 {
                    group.addTask { try await transport.send(HTTPRequest(url: sandbox.server.baseURL + "/r\(round)-\(index)", tls: tls)).status }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses.count == 60 && statuses.allSatisfy { $0 == 200 })
        }
        let connections = Set(sandbox.server.requests.compactMap(\.connection))
        #expect(connections.count >= 2, "after a GOAWAY, requests went over a new connection")
        await sandbox.stop()
    }

    @Test("an answer larger than the initial flow-control windows arrives whole, again and again on one connection",
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
            let response = try await transport.send(HTTPRequest(url: sandbox.server.baseURL + "/big", tls: TLSOptions(caFile: sandbox.tls.caFile),
                                                                maximumResponseBytes: 3_000_000))
            #expect(response.status == 200)
            #expect(response.body.count == size)
            #expect(!response.bodyTruncated)
        }
        await sandbox.stop()
    }

    @Test("an urgent request starts before normal ones waiting for a stream, on the streams kept for urgent ones",
          arguments: TransportKind.allCases)
    func urgentRequestsPassTheQueue(_ kind: TransportKind) async throws {
        let sandbox = try await ProxySandboxFixture.start { request in
            request.path.hasPrefix("/slow") ? SandboxResponse(status: 200, delay: .seconds(2)) : SandboxResponse(status: 204)
        }
        let transport = kind.make(HTTPTransportConfiguration(maximumConnectionsPerHost: 1, maximumStreamsPerConnection: 4,
                                                             urgentReservedStreams: 1))
        defer { transport.shutdown() }
        let tls = TLSOptions(caFile: sandbox.tls.caFile)
        let slow = (0..<8).map { index in
            Task { try await transport.send(HTTPRequest(url: sandbox.server.baseURL + "/slow\(index)", tls: tls)) }
        }
        try await Task.sleep(for: .milliseconds(300))
        let clock = ContinuousClock()
        let started = clock.now
        let urgent = try await transport.send(HTTPRequest(url: sandbox.server.baseURL + "/call", tls: tls, lane: .urgent))
        #expect(urgent.status == 204)
        #expect(clock.now - started < .milliseconds(1500), "the call did not wait for a slow request to end")
        #expect(sandbox.server.requests.filter { $0.path.hasPrefix("/slow") }.count == 3,
                "normal requests left the reserved stream free")
        for task in slow { _ = try await task.value }
        await sandbox.stop()
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

    @Test("anything but an https URL with a host and a valid port is refused", arguments: [
        "http://example.com/", "https://", "https:///path", "https://user@example.com/", "https://example.com:0/",
        "https://example.com:65536/", "https://example.com:80a/", "https://[::1/", "ftp://example.com", "example.com",
    ])
    func refused(_ url: String) { #expect(HTTPSTarget(url) == nil) }
}
