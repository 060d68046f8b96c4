import Foundation
import PushCore
import PushHTTP
import PushSandbox
import Testing
import TestSupport
import APNsSandbox
@testable import APNsPlugin

@Suite("APNs plugin over HTTP/2 + TLS against the APNs sandbox")
struct APNsSandboxTests {
    static func delivery(
        token: String, kind: JobKind = .call, environment: String? = nil, bindingId: String = "b1",
        pushType: String? = nil
    ) -> Delivery {
        let target = Target.apns(bindingId, app: APNsSandboxFixture.bundleId, token: token, environment: environment, pushType: pushType)
        let job = Job(
            id: "job-\(bindingId)", createdAt: currentTimeMilliseconds(), ttl: 30, kind: kind, priority: .high,
            userId: "alice", notification: Notification(title: "Bob", body: "Calling"), data: ["callId": "c-1"],
            targets: [target])
        return Delivery(job: job, target: target, attempt: 1, now: currentTimeMilliseconds())
    }

    static let liveToken = String(repeating: "ab", count: 32)

    /// libcurl's connection set-up gets the sends' timeout: many sends at once open extra connections, and on
    /// loaded CI cores a handshake took longer than the default 5 s (the sends ended `request timed out`).
    func provider(
        _ fixture: APNsSandboxFixture, sandboxURL: String? = nil,
        authentication: APNsApp.Authentication? = nil, timeout: Duration = .seconds(10)
    ) throws -> APNsProvider {
        let app = APNsApp(
            bundleId: APNsSandboxFixture.bundleId,
            authentication: authentication
                ?? .token(keyFile: fixture.keyFile, keyId: APNsSandboxFixture.keyId, teamId: APNsSandboxFixture.teamId))
        return try APNsProvider(
            configuration: APNsConfiguration(
                apps: [app], productionURL: fixture.server.baseURL,
                sandboxURL: sandboxURL ?? fixture.server.baseURL,
                caFile: fixture.tls.caFile, timeout: timeout),
            transport: TestTransport.make(connectTimeout: timeout),
            logger: testLogger())
    }

    @Test("a VoIP call is accepted by the sandbox's checks and delivered with its apns-id")
    func voipDelivered() async throws {
        let fixture = try await APNsSandboxFixture.start()
        let provider = try provider(fixture)
        let result = await provider.deliver(Self.delivery(token: Self.liveToken))
        guard case .delivered(let messageId?, 200, _) = result else {
            Issue.record("not delivered: \(result)")
            return
        }
        let request = try #require(fixture.server.requests.first)
        #expect(request.header("apns-id") == messageId)
        #expect(request.header("apns-topic") == "com.example.chat.voip")
        #expect(request.header("apns-push-type") == "voip")
        #expect(request.header("apns-priority") == "10")
        #expect(request.header("authorization")?.hasPrefix("bearer ") == true)
        await provider.shutdown()
        await fixture.stop()
    }

    @Test(
        "410 Unregistered yields rejected with invalidSince from Apple's timestamp; 400 BadDeviceToken rejected when the binding names its environment; 503 retryable"
    )
    func scriptedAnswers() async throws {
        let fixture = try await APNsSandboxFixture.start()
        let provider = try provider(fixture)
        let gone = await provider.deliver(Self.delivery(token: "0410" + String(repeating: "a", count: 60)))
        #expect(gone == .rejected(reason: "Unregistered", httpStatus: 410, invalidSince: APNsSandbox.unregisteredSince))
        let bad = await provider.deliver(Self.delivery(token: "0400" + String(repeating: "a", count: 60), environment: "production"))
        #expect(bad == .rejected(reason: "BadDeviceToken", httpStatus: 400))
        let unavailable = await provider.deliver(Self.delivery(token: "0503" + String(repeating: "a", count: 60)))
        #expect(unavailable == .retryable(reason: "ServiceUnavailable", httpStatus: 503))
        await provider.shutdown()
        await fixture.stop()
    }

    @Test("each target's environment picks its endpoint: sandbox tokens go to the sandbox host")
    func environments() async throws {
        let production = try await APNsSandboxFixture.start()
        let development = try await SandboxServer.start(tls: production.tls, responder: production.sandbox.respond)
        let app = APNsApp(
            bundleId: APNsSandboxFixture.bundleId,
            authentication: .token(keyFile: production.keyFile, keyId: APNsSandboxFixture.keyId, teamId: APNsSandboxFixture.teamId))
        let provider = try APNsProvider(
            configuration: APNsConfiguration(
                apps: [app], productionURL: production.server.baseURL,
                sandboxURL: development.baseURL,
                caFile: production.tls.caFile),
            transport: TestTransport.make(), logger: testLogger())
        _ = await provider.deliver(Self.delivery(token: Self.liveToken, environment: "production"))
        _ = await provider.deliver(Self.delivery(token: Self.liveToken, environment: "sandbox"))
        _ = await provider.deliver(Self.delivery(token: Self.liveToken))
        #expect(production.server.requests.count == 2)
        #expect(development.requests.count == 1)
        await provider.shutdown()
        await development.stop()
        await production.stop()
    }

    @Test("a new connection allows one stream until the token is accepted; then 300 concurrent pushes all go through")
    func streamLimitRaisedAfterToken() async throws {
        let fixture = try await APNsSandboxFixture.start()
        // What is tested is that all go through; the suites share CI's two cores, so a push may wait beyond 10 s.
        let provider = try provider(fixture, timeout: .seconds(60))
        let results = await withTaskGroup(of: DeliveryResult.self) { group in
            for index in 0..<300 {
                group.addTask { await provider.deliver(Self.delivery(token: Self.liveToken, bindingId: "b\(index)")) }
            }
            return await group.reduce(into: [DeliveryResult]()) { $0.append($1) }
        }
        let undelivered = results.filter { if case .delivered = $0 { false } else { true } }
        #expect(results.count == 300 && undelivered.isEmpty, "not delivered: \(undelivered)")
        await provider.shutdown()
        await fixture.stop()
    }

    @Test("GOAWAY mid-stream: unfinished requests come back retryable, none is lost, and a new connection carries the rest")
    func goAway() async throws {
        let fixture = try await APNsSandboxFixture.start(goAwayEvery: 25)
        let provider = try provider(fixture)
        var pending = (0..<100).map { Self.delivery(token: Self.liveToken, bindingId: "g\($0)") }
        var delivered = Set<String>()
        for _ in 0..<5 where !pending.isEmpty {
            let round = await withTaskGroup(of: (Delivery, DeliveryResult).self) { group in
                for delivery in pending { group.addTask { (delivery, await provider.deliver(delivery)) } }
                return await group.reduce(into: [(Delivery, DeliveryResult)]()) { $0.append($1) }
            }
            for (delivery, result) in round {
                switch result {
                case .delivered: delivered.insert(delivery.target.bindingId)
                case .retryable: break
                default: Issue.record("GOAWAY must not turn into a final failure: \(result)")
                }
            }
            pending = round.filter { if case .retryable = $0.1 { true } else { false } }.map(\.0)
        }
        #expect(delivered.count == 100)
        #expect(Set(fixture.server.requests.compactMap(\.connection)).count >= 2, "the GOAWAY forced a new connection")
        await provider.shutdown()
        await fixture.stop()
    }

    @Test("APNs connections are kept a day without requests, with a PING after an hour of quiet (Apple: keep connections open)")
    func connectionLifetimeIsApples() {
        let lifetime = APNsProvider.connectionLifetime
        #expect(lifetime.maximumIdleTime == .seconds(24 * 3600))
        #expect(lifetime.keepaliveInterval == .seconds(3600))
        #expect(lifetime.pingTimeout == .seconds(5))
        #expect(HTTPTransportConfiguration().maximumIdleTime < lifetime.maximumIdleTime, "other providers' connections close sooner")
    }

    // The transport's idle time of 1 s stands for its 118 s, the keepalive interval of 1 s for Apple's hour.
    @Test(
        "APNs connections outlive the transport's idle time: a push after it goes over the same connection",
        arguments: HTTP2FramingKind.allFramings)
    func connectionOutlivesTheIdleTime(_ framing: HTTP2FramingKind) async throws {
        let closed = Locked(0)
        let tls = try SandboxTLS.make()
        defer { tls.remove() }
        let sandbox = try await APNsSandboxInstance.start(tls: tls, connectionClosed: { _ in closed.withLock { $0 += 1 } })
        let app = APNsApp(
            bundleId: APNsSandboxFixture.bundleId,
            authentication: .token(keyFile: sandbox.keyFile, keyId: APNsSandboxFixture.keyId, teamId: APNsSandboxFixture.teamId))
        let transport = NIOHTTP2Transport(
            configuration: HTTPTransportConfiguration(maximumConnectionsPerHost: 1, maximumIdleTime: .seconds(1)),
            name: "apns", framing: framing)
        let provider = try APNsProvider(
            configuration: APNsConfiguration(
                apps: [app], productionURL: sandbox.server.baseURL,
                sandboxURL: sandbox.server.baseURL, caFile: tls.caFile),
            transport: transport, logger: testLogger(),
            connectionLifetime: HTTPConnectionLifetime(maximumIdleTime: .seconds(3600), keepaliveInterval: .seconds(1)))
        let first = await provider.deliver(Self.delivery(token: Self.liveToken, bindingId: "k1"))
        try await Task.sleep(for: .milliseconds(2500))
        let second = await provider.deliver(Self.delivery(token: Self.liveToken, bindingId: "k2"))
        for result in [first, second] {
            guard case .delivered = result else {
                Issue.record("not delivered: \(result)")
                continue
            }
        }
        #expect(closed.withLock { $0 } == 0, "no connection closed: both pushes went over the first one")
        await provider.shutdown()
        await sandbox.server.stop()
    }

    @Test("certificate authentication: the app's client certificate is the credential; without it nothing is delivered")
    func certificateAuthentication() async throws {
        let fixture = try await APNsSandboxFixture.start(certificateAuthentication: true)
        let withCertificate = try provider(
            fixture,
            authentication: .certificate(
                TLSOptions(
                    clientCertificateFile: fixture.tls.clientCertificateFile, clientKeyFile: fixture.tls.clientKeyFile)))
        guard case .delivered = await withCertificate.deliver(Self.delivery(token: Self.liveToken)) else {
            Issue.record("certificate-authenticated push not delivered")
            return
        }
        #expect(fixture.server.requests.allSatisfy { $0.header("authorization") == nil })
        let withoutCertificate = try provider(fixture, authentication: .certificate(TLSOptions()))
        guard case .retryable = await withoutCertificate.deliver(Self.delivery(token: Self.liveToken)) else {
            Issue.record("a handshake without the certificate must not deliver")
            return
        }
        await withCertificate.shutdown()
        await withoutCertificate.shutdown()
        await fixture.stop()
    }

    @Test("an app with a VoIP Services certificate beside its alert credentials sends VoIP pushes with it and others without")
    func voipCertificateBesideAlertCredentials() async throws {
        let fixture = try await APNsSandboxFixture.start(certificateAuthentication: true)
        var app = APNsApp(bundleId: APNsSandboxFixture.bundleId, authentication: .certificate(TLSOptions()))
        app.voipAuthentication = .certificate(
            TLSOptions(
                clientCertificateFile: fixture.tls.clientCertificateFile,
                clientKeyFile: fixture.tls.clientKeyFile))
        let provider = try APNsProvider(
            configuration: APNsConfiguration(
                apps: [app], productionURL: fixture.server.baseURL,
                sandboxURL: fixture.server.baseURL, caFile: fixture.tls.caFile),
            transport: TestTransport.make(), logger: testLogger())
        guard case .delivered = await provider.deliver(Self.delivery(token: Self.liveToken, kind: .call)) else {
            Issue.record("the VoIP push did not go with the VoIP certificate")
            return
        }
        guard case .retryable = await provider.deliver(Self.delivery(token: Self.liveToken, kind: .message, bindingId: "b2")) else {
            Issue.record("the alert push must use the app's own (here: missing) certificate")
            return
        }
        #expect(fixture.server.requests.map { $0.header("apns-push-type") } == ["voip"])
        await provider.shutdown()
        await fixture.stop()
    }

    @Test("an oversized payload fails with PayloadTooLarge and no request is made")
    func payloadTooLarge() async throws {
        let fixture = try await APNsSandboxFixture.start()
        let provider = try provider(fixture)
        var delivery = Self.delivery(token: Self.liveToken, kind: .message)
        let target = delivery.target
        var job = delivery.job
        job.data = ["blob": String(repeating: "x", count: 5000)]
        delivery = Delivery(job: job, target: target, attempt: 1, now: delivery.now)
        guard case .failed(let reason, nil, .none, _) = await provider.deliver(delivery) else {
            Issue.record("expected failed")
            return
        }
        #expect(reason.hasPrefix("PayloadTooLarge"))
        #expect(fixture.server.requests.isEmpty)
        await provider.shutdown()
        await fixture.stop()
    }

    @Test("a target naming an app without credentials fails saying so")
    func unknownApp() async throws {
        let fixture = try await APNsSandboxFixture.start()
        let provider = try provider(fixture)
        let target = Target.apns("b", app: "com.other.app", token: Self.liveToken)
        let job = Job(
            id: "j", createdAt: currentTimeMilliseconds(), ttl: 30, kind: .message, priority: .high, userId: "u", targets: [target])
        #expect(
            await provider.deliver(Delivery(job: job, target: target, attempt: 1, now: currentTimeMilliseconds()))
                == .failed(reason: "no APNs credentials for app com.other.app", httpStatus: nil))
        await provider.shutdown()
        await fixture.stop()
    }
}
