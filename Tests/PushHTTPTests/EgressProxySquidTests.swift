import PushCore
import PushSandbox
import Testing
import TestSupport
@testable import PushHTTP

/// Through a real squid that takes only authenticated CONNECTs and alone knows the provider's made-up name.
@Suite(
    "Provider connections tunnel through the egress proxy with HTTP CONNECT",
    .enabled(if: SquidProcess.isInstalled, "squid is not installed"))
struct EgressProxySquidTests {
    /// Under `.test` (RFC 6761 §6.2): only squid's hosts file resolves it, so only the tunnel reaches the sandbox.
    static let providerName = "api.push.apple.test"

    struct Harness {
        let tls: SandboxTLS
        let server: SandboxServer
        let squid: SquidProcess

        static func start() async throws -> Harness {
            _ = TestMetrics.registry
            let tls = try SandboxTLS.make(serverNames: [providerName, "localhost"])
            let server = try await SandboxServer.start(tls: tls) { request in
                SandboxResponse(status: 200, headers: [("x-authority", request.header("host") ?? "")])
            }
            let squid = try await SquidProcess.launch(hosts: [providerName], connectPorts: [server.port])
            return Harness(tls: tls, server: server, squid: squid)
        }

        func transport(proxy url: String, noProxy: String = "") throws -> NIOHTTP2Transport {
            NIOHTTP2Transport(
                configuration: HTTPTransportConfiguration(egressProxy: try EgressProxy(url: url, noProxy: NoProxyRules(noProxy))),
                fallback: NoFallback())
        }

        func request(host: String = EgressProxySquidTests.providerName, pinnedTo address: String? = nil) -> HTTPRequest {
            HTTPRequest(
                url: "https://\(host):\(server.port)/3/device/abc", body: Array("{}".utf8), tls: TLSOptions(caFile: tls.caFile),
                pinnedResolution: address.map { "\(host):\(server.port):\($0)" })
        }

        func stop() async {
            squid.remove()
            await server.stop()
            tls.remove()
        }
    }

    static func failures(_ reason: String) -> Double {
        TestMetrics.value(of: #"push_egress_proxy_failures_total{reason="\#(reason)"}"#) ?? 0
    }

    @Test("a request reaches the sandbox by a name only the proxy resolves, over CONNECT name:port with Basic credentials")
    func throughTheProxy() async throws {
        let harness = try await Harness.start()
        let transport = try harness.transport(proxy: harness.squid.url())
        for _ in 0..<2 {
            let response = try await transport.send(harness.request())
            #expect(response.status == 200)
            #expect(response.header("x-authority") == "\(Self.providerName):\(harness.server.port)", "TLS and HTTP/2 are for the name")
        }
        transport.shutdown()
        let connects = await harness.squid.connects(atLeast: 1)
        #expect(
            connects == [SquidProcess.Connect(target: "\(Self.providerName):\(harness.server.port)", status: 200)],
            "one tunnel carries both")
        await harness.stop()
    }

    @Test("wrong credentials: the proxy's 407 fails the request as a connection failure naming the proxy, counted as auth_required")
    func wrongCredentials() async throws {
        let harness = try await Harness.start()
        let before = Self.failures("auth_required")
        let transport = try harness.transport(proxy: harness.squid.url(password: "wrong-password"))
        do {
            let response = try await transport.send(harness.request())
            Issue.record("answered \(response.status) through a proxy that refused the credentials")
        } catch {
            #expect(
                error
                    == .connectionFailed(
                        "the egress proxy 127.0.0.1:\(harness.squid.port) refused CONNECT \(Self.providerName):\(harness.server.port): 407 Proxy Authentication Required (check the credentials in HTTPS_PROXY)"
                    ))
            #expect(!error.description.contains("wrong-password"))
        }
        #expect(Self.failures("auth_required") == before + 1)
        transport.shutdown()
        #expect(await harness.squid.connects(atLeast: 1).map(\.status) == [407])
        #expect(harness.server.requests.isEmpty)
        await harness.stop()
    }

    @Test("a host NO_PROXY names goes straight to the server; the others still go through the proxy")
    func noProxyGoesDirect() async throws {
        let harness = try await Harness.start()
        let transport = try harness.transport(proxy: harness.squid.url(), noProxy: "localhost")
        #expect(try await transport.send(harness.request(host: "localhost")).status == 200)
        #expect(try await transport.send(harness.request()).status == 200)
        transport.shutdown()
        let connects = await harness.squid.connects(atLeast: 1)
        #expect(connects.map(\.target) == ["\(Self.providerName):\(harness.server.port)"], "no CONNECT for localhost")
        #expect(harness.server.requests.count == 2)
        await harness.stop()
    }

    @Test("a pinned request tunnels to its checked address (CONNECT 127.0.0.1:port) with TLS for its name")
    func pinnedRequestConnectsToTheAddress() async throws {
        let harness = try await Harness.start()
        let transport = try harness.transport(proxy: harness.squid.url())
        let response = try await transport.send(harness.request(pinnedTo: "127.0.0.1"))
        #expect(response.status == 200)
        #expect(response.header("x-authority") == "\(Self.providerName):\(harness.server.port)")
        transport.shutdown()
        let connects = await harness.squid.connects(atLeast: 1)
        #expect(connects == [SquidProcess.Connect(target: "127.0.0.1:\(harness.server.port)", status: 200)])
        await harness.stop()
    }

    @Test("the HTTP/1.1 client (libcurl) opens its tunnel through the same proxy with the same credentials")
    func curlThroughTheProxy() async throws {
        let harness = try await Harness.start()
        let transport = CurlHTTPTransport(
            configuration: HTTPTransportConfiguration(egressProxy: try EgressProxy(url: harness.squid.url())))
        // The sandbox speaks HTTP/2 only, so what happens inside the tunnel is beside the point: squid opened it.
        let result: String
        do { result = "answered \(try await transport.send(harness.request()).status)" } catch { result = "\(error)" }
        transport.shutdown()
        let connects = await harness.squid.connects(atLeast: 1)
        #expect(connects == [SquidProcess.Connect(target: "\(Self.providerName):\(harness.server.port)", status: 200)], "\(result)")
        await harness.stop()
    }

    @Test(
        "the HTTP/1.1 client (libcurl) tunnels a pinned request to its checked address (CONNECT 127.0.0.1:port), as the HTTP/2 client does")
    func curlPinnedThroughTheProxy() async throws {
        let harness = try await Harness.start()
        let transport = CurlHTTPTransport(
            configuration: HTTPTransportConfiguration(egressProxy: try EgressProxy(url: harness.squid.url())))
        let result: String
        do { result = "answered \(try await transport.send(harness.request(pinnedTo: "127.0.0.1")).status)" } catch { result = "\(error)" }
        transport.shutdown()
        let connects = await harness.squid.connects(atLeast: 1)
        #expect(connects == [SquidProcess.Connect(target: "127.0.0.1:\(harness.server.port)", status: 200)], "\(result)")
        await harness.stop()
    }

    @Test("a pinned host:port:address becomes curl's connect-to entry host:port:address:port, an IPv6 address in brackets")
    func connectToEntries() {
        #expect(CurlMultiLoop.connectToEntry("push.example:443:203.0.113.7") == "push.example:443:203.0.113.7:443")
        #expect(CurlMultiLoop.connectToEntry("+push.example:443:2001:db8::1") == "push.example:443:[2001:db8::1]:443")
    }

    @Test("a CONNECT the proxy's rules deny (a port it does not tunnel to): a connection failure with its 403, counted as refused")
    func refusedConnect() async throws {
        let harness = try await Harness.start()
        let before = Self.failures("refused")
        let transport = try harness.transport(proxy: harness.squid.url())
        let request = HTTPRequest(
            url: "https://\(Self.providerName):1/3/device/abc", body: Array("{}".utf8), tls: TLSOptions(caFile: harness.tls.caFile))
        do {
            _ = try await transport.send(request)
            Issue.record("the proxy tunnelled to a port its rules deny")
        } catch {
            guard case .connectionFailed(let detail) = error else {
                Issue.record("expected a connection failure, got \(error)")
                return
            }
            #expect(detail.contains("refused CONNECT \(Self.providerName):1: 403"), "\(detail)")
        }
        #expect(Self.failures("refused") == before + 1)
        transport.shutdown()
        await harness.stop()
    }

    @Test("a proxy that cannot be reached fails the request as a connection failure naming it, counted as unreachable")
    func unreachableProxy() async throws {
        let harness = try await Harness.start()
        let port = harness.squid.port
        harness.squid.stop()
        let before = Self.failures("unreachable")
        let transport = try harness.transport(proxy: "http://127.0.0.1:\(port)")
        do {
            _ = try await transport.send(harness.request())
            Issue.record("answered without a proxy")
        } catch {
            guard case .connectionFailed(let detail) = error else {
                Issue.record("expected a connection failure, got \(error)")
                return
            }
            #expect(detail.hasPrefix("the egress proxy 127.0.0.1:\(port) cannot be reached: "), "\(detail)")
        }
        #expect(Self.failures("unreachable") == before + 1)
        transport.shutdown()
        await harness.stop()
    }
}

/// The HTTP/1.1 fallback must not be used: every sandbox speaks HTTP/2.
private struct NoFallback: HTTPTransport {
    func send(_ request: HTTPRequest) async throws(HTTPTransportError) -> HTTPResponse {
        throw .connectionFailed("the HTTP/1.1 fallback was used")
    }
    func closeConnections(except live: Set<ConnectionIdentity>) {}
    func shutdown() {}
}
