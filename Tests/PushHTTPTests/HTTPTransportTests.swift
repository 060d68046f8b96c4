import Foundation
import PushCore
import PushSandbox
import Synchronization
import Testing
import TestSupport
@testable import PushHTTP

/// The HTTP/2 client behind `HTTPTransport` meets one specification on the worker's framing (nghttp2) and on the
/// oracle's (swift-nio-http2, from TestSupport).
enum TransportKind: String, CaseIterable, CustomStringConvertible {
    case nghttp2
    case nio

    func make(_ configuration: HTTPTransportConfiguration = HTTPTransportConfiguration()) -> any HTTPTransport {
        switch self {
        case .nghttp2: NIOHTTP2Transport(configuration: configuration, framing: .nghttp2)
        case .nio: NIOHTTP2Transport(configuration: configuration, framing: .nio)
        }
    }

    var description: String { rawValue }
}

@Suite("HTTP/2 over TLS on nghttp2's framing and on swift-nio-http2's, against a real sandbox server")
struct HTTPTransportTests {
    /// For tests that send hundreds of requests at once: what they check is that all complete, and the suites
    /// share CI's two cores, so a request may wait well beyond the usual 10 s.
    static let concurrentTimeout = Duration.seconds(60)

    static func echo(_ request: SandboxRequest) -> SandboxResponse {
        if request.path.hasPrefix("/slow") { return SandboxResponse(status: 200, delay: .seconds(2)) }
        if request.path.hasPrefix("/hang") { return SandboxResponse(status: 200, delay: .seconds(20)) }
        return SandboxResponse(
            status: 201, headers: [("x-seen-method", request.method), ("retry-after", "3")],
            body: request.body.reversed())
    }

    @Test("a POST gets the status, lower-cased headers and body back over HTTP/2", arguments: TransportKind.allCases)
    func postRoundTrip(_ kind: TransportKind) async throws {
        let sandbox = try await ProxySandboxFixture.start(responder: Self.echo)
        let transport = kind.make()
        defer { transport.shutdown() }
        let response = try await transport.send(
            HTTPRequest(
                url: sandbox.server.baseURL + "/x",
                headers: [("content-type", "application/json"), ("x-custom", "1")],
                body: Array("abc".utf8), tls: TLSOptions(caFile: sandbox.tls.caFile)))
        #expect(response.status == 201)
        #expect(response.header("X-Seen-Method") == "POST")
        #expect(response.body == Array("cba".utf8))
        let received = try #require(sandbox.server.requests.first)
        #expect(received.header("x-custom") == "1")
        #expect(received.header("expect") == nil)
        await sandbox.stop()
    }

    @Test("hundreds of concurrent requests complete, multiplexed on a bounded number of connections", arguments: TransportKind.allCases)
    func concurrentRequests(_ kind: TransportKind) async throws {
        let sandbox = try await ProxySandboxFixture.start(responder: Self.echo)
        let transport = kind.make(HTTPTransportConfiguration(maximumConnectionsPerHost: 1))
        defer { transport.shutdown() }
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<500 {
                group.addTask {
                    try await transport.send(
                        HTTPRequest(
                            url: sandbox.server.baseURL + "/n\(index)", body: [UInt8(index % 256)],
                            timeout: Self.concurrentTimeout, tls: TLSOptions(caFile: sandbox.tls.caFile))
                    ).status
                }
            }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(statuses.count == 500)
        #expect(statuses.allSatisfy { $0 == 201 })
        await sandbox.stop()
    }

    @Test("a request slower than its timeout fails with timedOut", arguments: TransportKind.allCases)
    func timeout(_ kind: TransportKind) async throws {
        let sandbox = try await ProxySandboxFixture.start(responder: Self.echo)
        let transport = kind.make()
        defer { transport.shutdown() }
        await #expect(throws: HTTPTransportError.timedOut) {
            try await transport.send(
                HTTPRequest(
                    url: sandbox.server.baseURL + "/slow", timeout: .milliseconds(300),
                    tls: TLSOptions(caFile: sandbox.tls.caFile)))
        }
        await sandbox.stop()
    }

    @Test(
        "requests on one connection time out each at its own deadline: a short timeout sent after a long one fails at its own, before the answer it would otherwise get, and the others are answered",
        arguments: TransportKind.allCases)
    func timeoutsOfDifferentLengths(_ kind: TransportKind) async throws {
        let sandbox = try await ProxySandboxFixture.start(responder: Self.echo)
        let transport = kind.make(HTTPTransportConfiguration(maximumConnectionsPerHost: 1))
        defer { transport.shutdown() }
        let tls = TLSOptions(caFile: sandbox.tls.caFile)
        func send(_ path: String, timeout: Duration) async -> (Result<Int, HTTPTransportError>, Duration) {
            let start = ContinuousClock.now
            do throws(HTTPTransportError) {
                let status = try await transport.send(HTTPRequest(url: sandbox.server.baseURL + path, timeout: timeout, tls: tls)).status
                return (.success(status), ContinuousClock.now - start)
            } catch {
                return (.failure(error), ContinuousClock.now - start)
            }
        }
        // The connection is up before the requests that matter, so no handshake counts in their times.
        #expect(await send("/warm-up", timeout: Self.concurrentTimeout).0 == .success(201))
        // The sandbox answers /slow… after 2 s: the long timeout outlasts it, the short one does not.
        async let long = send("/slow-long", timeout: Self.concurrentTimeout)
        try await Task.sleep(for: .milliseconds(100))
        async let short = send("/slow-short", timeout: .milliseconds(300))
        async let answered = send("/quick", timeout: Self.concurrentTimeout)
        let (longResult, _) = await long
        let (shortResult, shortTook) = await short
        let (answeredResult, _) = await answered
        #expect(shortResult == .failure(.timedOut), "held to the long request's deadline, it would have been answered after 2 s")
        #expect(shortTook >= .milliseconds(300))
        #expect(longResult == .success(200))
        #expect(answeredResult == .success(201))
        await sandbox.stop()
    }

    @Test("a server certificate from an untrusted CA is refused (verification is always on)", arguments: TransportKind.allCases)
    func untrustedCertificate(_ kind: TransportKind) async throws {
        let sandbox = try await ProxySandboxFixture.start(responder: Self.echo)
        let transport = kind.make()
        defer { transport.shutdown() }
        do {
            _ = try await transport.send(HTTPRequest(url: sandbox.server.baseURL + "/x"))
            Issue.record("a self-signed sandbox was trusted without its CA")
        } catch {
            guard case .tls = error else {
                Issue.record("expected a TLS error, got \(error)")
                return
            }
        }
        await sandbox.stop()
    }

    @Test("mutual TLS: without a client certificate the handshake fails, with one the request succeeds", arguments: TransportKind.allCases)
    func mutualTLS(_ kind: TransportKind) async throws {
        let sandbox = try await ProxySandboxFixture.start(requireClientCertificate: true, responder: Self.echo)
        let transport = kind.make()
        defer { transport.shutdown() }
        let url = sandbox.server.baseURL + "/mtls"
        await #expect(throws: HTTPTransportError.self) {
            try await transport.send(HTTPRequest(url: url, tls: TLSOptions(caFile: sandbox.tls.caFile)))
        }
        let response = try await transport.send(
            HTTPRequest(
                url: url,
                tls: TLSOptions(
                    caFile: sandbox.tls.caFile, clientCertificateFile: sandbox.tls.clientCertificateFile,
                    clientKeyFile: sandbox.tls.clientKeyFile)))
        #expect(response.status == 201)
        await sandbox.stop()
    }

    @Test("a client certificate file that cannot be read is a TLS error, request after request", arguments: TransportKind.allCases)
    func unreadableClientCertificate(_ kind: TransportKind) async throws {
        let sandbox = try await ProxySandboxFixture.start(requireClientCertificate: true, responder: Self.echo)
        let transport = kind.make()
        defer { transport.shutdown() }
        for _ in 0..<3 {
            do {
                _ = try await transport.send(
                    HTTPRequest(
                        url: sandbox.server.baseURL + "/mtls",
                        tls: TLSOptions(
                            caFile: sandbox.tls.caFile, clientCertificateFile: "/nonexistent/client.pem",
                            clientKeyFile: "/nonexistent/client.key")))
                Issue.record("a request went out without its client certificate")
            } catch {
                guard case .tls = error else {
                    Issue.record("expected a TLS error, got \(error)")
                    return
                }
            }
        }
        #expect(sandbox.server.requests.isEmpty)
        await sandbox.stop()
    }

    @Test("a connection refused is a connectionFailed error", arguments: TransportKind.allCases)
    func connectionRefused(_ kind: TransportKind) async throws {
        let transport = kind.make()
        defer { transport.shutdown() }
        await #expect(throws: HTTPTransportError.self) {
            try await transport.send(HTTPRequest(url: "https://127.0.0.1:1/x", timeout: .seconds(2)))
        }
    }

    @Test("cancelling the caller's task cancels the transfer", arguments: TransportKind.allCases)
    func cancellation(_ kind: TransportKind) async throws {
        let sandbox = try await ProxySandboxFixture.start(responder: Self.echo)
        let transport = kind.make()
        defer { transport.shutdown() }
        let task = Task {
            try await transport.send(
                HTTPRequest(url: sandbox.server.baseURL + "/hang", timeout: .seconds(30), tls: TLSOptions(caFile: sandbox.tls.caFile)))
        }
        // Cancelled once the server holds the request, long before it would answer (a loaded task pool may delay either).
        while !sandbox.server.requests.contains(where: { $0.path == "/hang" }) { try await Task.sleep(for: .milliseconds(20)) }
        task.cancel()
        await #expect(throws: HTTPTransportError.cancelled) { try await task.value }
        await sandbox.stop()
    }

    @Test("only https URLs are sent", arguments: TransportKind.allCases)
    func httpsOnly(_ kind: TransportKind) async throws {
        let transport = kind.make()
        defer { transport.shutdown() }
        await #expect(throws: HTTPTransportError.self) {
            try await transport.send(HTTPRequest(url: "http://127.0.0.1:9/x"))
        }
    }
}

@Suite("Retry-After (RFC 9110 §10.2.3)")
struct RetryAfterTests {
    @Test("delay-seconds")
    func seconds() { #expect(RetryAfter.parse("7") == .seconds(7)) }

    @Test("an HTTP-date counts from now")
    func httpDate() {
        let now = Date(timeIntervalSince1970: 1_445_412_480)  // Wed, 21 Oct 2015 07:28:00 GMT
        #expect(RetryAfter.parse("Wed, 21 Oct 2015 07:28:30 GMT", now: now) == .seconds(30))
    }

    @Test(
        "the obsolete RFC 850 and asctime forms are read too (RFC 9110 §5.6.7)",
        arguments: [
            "Wednesday, 21-Oct-15 07:28:30 GMT", "Wed Oct 21 07:28:30 2015",
        ])
    func obsoleteDates(_ value: String) {
        let now = Date(timeIntervalSince1970: 1_445_412_480)  // Wed, 21 Oct 2015 07:28:00 GMT
        #expect(RetryAfter.parse(value, now: now) == .seconds(30))
    }

    @Test("an asctime day below 10 is padded with a space")
    func asctimeSingleDigitDay() {
        let now = Date(timeIntervalSince1970: 784_111_747)  // Sun, 06 Nov 1994 08:49:07 GMT
        #expect(RetryAfter.parse("Sun Nov  6 08:49:37 1994", now: now) == .seconds(30))
    }

    @Test("a date in the past means now")
    func pastDate() { #expect(RetryAfter.parse("Sun, 06 Nov 1994 08:49:37 GMT") == .zero) }

    @Test(
        "a text that is not exactly an HTTP-date is ignored, whatever bytes it holds",
        arguments: [
            "", "soon", "-3", "Wed, 30 Feb 2015 07:28:30 GMT", "Wed, 21 Oct 2015 24:00:00 GMT", "wed, 21 Oct 2015 07:28:30 GMT",
            "Wed, 21 Oct 2015 07:28:30 UTC", "Wed, 21 Oct 2015 07:28:30 GMT x", "Fri, 3\u{5BB}\u{9A}\u{1C}\0 999 2\u{F}:59 GMT",
            "Wed,\u{00A0}21 Oct 2015 07:28:30 GMT", "Wed, 2\u{0661} Oct 2015 07:28:30 GMT",
        ])
    func invalid(_ value: String) { #expect(RetryAfter.parse(value) == nil) }

    @Test(
        "an absurd delay, beyond Int64 or far in the future, counts as one day",
        arguments: [
            "99999999999999999", "9223372036854775807", "99999999999999999999999999999", "Fri, 31 Dec 9999 23:59:59 GMT",
        ])
    func absurd(_ value: String) { #expect(RetryAfter.parse(value) == RetryPolicy.maximumRetryAfter) }
}

@Suite("Hostile answers and requests at the transport")
struct HostileTransportTests {
    @Test("a header value with CR/LF never reaches the wire: the request is refused before it is sent", arguments: TransportKind.allCases)
    func headerInjectionRefused(_ kind: TransportKind) async throws {
        let sandbox = try await ProxySandboxFixture.start(responder: HTTPTransportTests.echo)
        let transport = kind.make()
        defer { transport.shutdown() }
        for headers in [
            [("apns-collapse-id", "x\r\napns-push-type: voip")], [("apns-collapse-id", "x\0y")], [("bad name", "v")], [("bad\"name", "v")],
            [("", "v")],
        ] {
            await #expect(throws: HTTPTransportError.self) {
                try await transport.send(
                    HTTPRequest(
                        url: sandbox.server.baseURL + "/x", headers: headers,
                        tls: TLSOptions(caFile: sandbox.tls.caFile)))
            }
        }
        await #expect(throws: HTTPTransportError.self) {
            try await transport.send(
                HTTPRequest(url: sandbox.server.baseURL + "/x\r\nHost: evil", tls: TLSOptions(caFile: sandbox.tls.caFile)))
        }
        #expect(sandbox.server.requests.isEmpty)
        await sandbox.stop()
    }

    @Test("a huge body is cut at the request's limit and the answer still counts, in bounded memory", arguments: TransportKind.allCases)
    func hugeBodyTruncated(_ kind: TransportKind) async throws {
        let huge = [UInt8](repeating: UInt8(ascii: "x"), count: 8 << 20)
        let sandbox = try await ProxySandboxFixture.start { _ in SandboxResponse(status: 201, headers: [("location", "/m/1")], body: huge) }
        let transport = kind.make()
        defer { transport.shutdown() }
        let response = try await transport.send(
            HTTPRequest(
                url: sandbox.server.baseURL + "/x", tls: TLSOptions(caFile: sandbox.tls.caFile),
                maximumResponseBytes: 4096))
        #expect(response.status == 201)
        #expect(response.header("location") == "/m/1")
        #expect(response.body.count == 4096)
        #expect(response.bodyTruncated)
        let unlimited = try await transport.send(
            HTTPRequest(url: sandbox.server.baseURL + "/x", tls: TLSOptions(caFile: sandbox.tls.caFile)))
        #expect(unlimited.body.count == HTTPTransportConfiguration().maximumResponseBytes, "the transport's own limit applies")
        await sandbox.stop()
    }

    @Test("hundreds of response headers are cut to a bounded list", arguments: TransportKind.allCases)
    func manyHeadersBounded(_ kind: TransportKind) async throws {
        let headers = (0..<300).map { ("x-h\($0)", String(repeating: "v", count: 20)) }
        let sandbox = try await ProxySandboxFixture.start { _ in SandboxResponse(status: 200, headers: headers) }
        let transport = kind.make()
        defer { transport.shutdown() }
        let response = try await transport.send(
            HTTPRequest(url: sandbox.server.baseURL + "/x", tls: TLSOptions(caFile: sandbox.tls.caFile)))
        #expect(response.status == 200)
        #expect(response.headers.count <= HTTPResponse.maximumHeaderCount)
        await sandbox.stop()
    }
}
