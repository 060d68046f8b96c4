import PushCore
import PushSandbox
import Synchronization
import Testing
import TestSupport
@testable import PushHTTP

/// Records what reaches it, and answers nothing: the swift-nio client's fallback, to show a request never went there.
private final class UnusedFallback: HTTPTransport {
    private let sent = Mutex(0)
    var requests: Int { sent.withLock { $0 } }

    func send(_ request: HTTPRequest) async throws(HTTPTransportError) -> HTTPResponse {
        sent.withLock { $0 += 1 }
        throw .connectionFailed("the fallback client was used")
    }

    func closeConnections(except live: Set<ConnectionIdentity>) {}

    func shutdown() {}
}

@Suite("A request pinned to an address goes over the HTTP/2 client to that address, with TLS for the URL's host")
struct PinnedAddressTests {
    /// A name under `.invalid` (RFC 6761 §6.4): no name server answers for it, so only the pin can lead to the sandbox.
    static let name = "push.pinned.invalid"

    static func answering() async throws -> (SandboxServer, SandboxTLS) {
        let tls = try SandboxTLS.make(serverNames: [name])
        let server = try await SandboxServer.start(tls: tls) { request in
            SandboxResponse(status: 201, headers: [("x-authority", request.header("host") ?? "")])
        }
        return (server, tls)
    }

    @Test(
        "a pinned request reaches the sandbox on 127.0.0.1 by a name that does not resolve, over the HTTP/2 client, not libcurl",
        arguments: HTTP2FramingKind.allFramings)
    func pinnedRequestUsesTheHTTP2Client(_ framing: HTTP2FramingKind) async throws {
        let (server, tls) = try await Self.answering()
        defer { tls.remove() }
        let fallback = UnusedFallback()
        let transport = NIOHTTP2Transport(framing: framing, fallback: fallback)
        defer { transport.shutdown() }
        for index in 0..<3 {
            let response = try await transport.send(
                HTTPRequest(
                    url: "https://\(Self.name):\(server.port)/s/\(index)", tls: TLSOptions(caFile: tls.caFile),
                    pinnedResolution: "\(Self.name):\(server.port):127.0.0.1"))
            #expect(response.status == 201)
            #expect(response.header("x-authority") == "\(Self.name):\(server.port)", "the request names the host, not the address")
        }
        #expect(fallback.requests == 0)
        #expect(server.requests.count == 3)
        #expect(Set(server.requests.map(\.connection)).count == 1, "the pinned requests share one connection")
        await server.stop()
    }

    @Test(
        "the certificate is checked against the URL's host: a certificate for other names is refused although the address is the pinned one",
        arguments: HTTP2FramingKind.allFramings)
    func certificateIsCheckedAgainstTheName(_ framing: HTTP2FramingKind) async throws {
        // The server is the one on the pinned address, with a certificate for other names than the request's.
        let tls = try SandboxTLS.make(serverNames: ["localhost", "other.pinned.invalid"])
        defer { tls.remove() }
        let server = try await SandboxServer.start(tls: tls) { _ in SandboxResponse(status: 201) }
        let transport = NIOHTTP2Transport(framing: framing, fallback: UnusedFallback())
        defer { transport.shutdown() }
        let request = HTTPRequest(
            url: "https://\(Self.name):\(server.port)/s", tls: TLSOptions(caFile: tls.caFile),
            pinnedResolution: "\(Self.name):\(server.port):127.0.0.1")
        do {
            let response = try await transport.send(request)
            Issue.record("answered \(response.status) with a certificate for another name")
        } catch {
            guard case .tls = error else {
                Issue.record("expected a TLS failure, got \(error)")
                return
            }
        }
        #expect(server.requests.isEmpty)
        await server.stop()
    }

    @Test(
        "a certificate that names the pinned address itself is accepted: it proves the server is the address that was checked (swift-nio-ssl matches IP names against the address connected to)"
    )
    func certificateForThePinnedAddress() async throws {
        let tls = try SandboxTLS.make(serverNames: ["127.0.0.1"])
        defer { tls.remove() }
        let server = try await SandboxServer.start(tls: tls) { _ in SandboxResponse(status: 201) }
        let transport = NIOHTTP2Transport(fallback: UnusedFallback())
        defer { transport.shutdown() }
        let response = try await transport.send(
            HTTPRequest(
                url: "https://\(Self.name):\(server.port)/s", tls: TLSOptions(caFile: tls.caFile),
                pinnedResolution: "\(Self.name):\(server.port):127.0.0.1"))
        #expect(response.status == 201)
        await server.stop()
    }

    @Test("requests to one host pinned to different addresses do not share a connection: each goes to its own address")
    func theAddressIsPartOfThePoolKey() async throws {
        let (server, tls) = try await Self.answering()
        defer { tls.remove() }
        let transport = NIOHTTP2Transport(
            configuration: HTTPTransportConfiguration(maximumIdleTime: .seconds(60)), fallback: UnusedFallback())
        defer { transport.shutdown() }
        let url = "https://\(Self.name):\(server.port)/s"
        let options = TLSOptions(caFile: tls.caFile)
        #expect(
            try await transport.send(HTTPRequest(url: url, tls: options, pinnedResolution: "\(Self.name):\(server.port):127.0.0.1")).status
                == 201)
        // Nothing listens on 127.0.0.2: reusing the open connection to 127.0.0.1 would answer 201.
        await #expect(throws: HTTPTransportError.self) {
            try await transport.send(HTTPRequest(url: url, tls: options, pinnedResolution: "\(Self.name):\(server.port):127.0.0.2"))
        }
        #expect(server.requests.count == 1)
        await server.stop()
    }

    @Test(
        "a pin that names another host or port, or no IP address, is refused unsent instead of being ignored",
        arguments: [
            "other.invalid:443:127.0.0.1", "push.pinned.invalid:444:127.0.0.1", "push.pinned.invalid:443:localhost",
            "push.pinned.invalid:443:", "push.pinned.invalid:443",
        ])
    func mismatchedPinIsRefused(_ resolution: String) async throws {
        let fallback = UnusedFallback()
        let transport = NIOHTTP2Transport(fallback: fallback)
        defer { transport.shutdown() }
        let error = await #expect(throws: HTTPTransportError.self) {
            try await transport.send(HTTPRequest(url: "https://\(Self.name)/s", pinnedResolution: resolution))
        }
        guard case .invalidRequest? = error else {
            Issue.record("expected invalidRequest, got \(String(describing: error))")
            return
        }
        #expect(fallback.requests == 0)
    }

    @Test("a pin is read as libcurl writes it: host case aside, IPv6 addresses in brackets")
    func pinForms() throws {
        let target = try #require(HTTPSTarget("https://Push.Example.net:8443/x"))
        #expect(PinnedAddress("push.example.net:8443:198.51.100.7", for: target)?.address == "198.51.100.7")
        #expect(PinnedAddress("PUSH.example.NET:8443:[2001:db8::1]", for: target)?.address == "2001:db8::1")
        #expect(PinnedAddress("push.example.net:443:198.51.100.7", for: target) == nil)
        #expect(PinnedAddress("push.example.net:8443:198.51.100.300", for: target) == nil)
    }
}
