import Foundation
import PushCore
import PushHTTP
import PushKafka
import PushPipeline
import PushSandbox
import Testing
import TestSupport
import FCMSandbox
@testable import FCMPlugin

/// An FCM sandbox and a provider configured with its service-account file.
struct FCMHarness {
    let tls: SandboxTLS
    let instance: FCMSandboxInstance
    let provider: FCMProvider

    /// - Parameter timeout: per request; tests of many sends at once raise it, as the suites share CI's two cores.
    ///   It bounds the connection set-up too: libcurl's connect timeout (5 s by default) covers the TLS handshake of each
    ///   extra connection that many sends open, and on loaded CI cores that took longer (the sends ended `request timed out`).
    static func start(clock: FakeClock = FakeClock(), timeout: Duration = .seconds(10)) async throws -> FCMHarness {
        let tls = try SandboxTLS.make()
        let instance = try await FCMSandboxInstance.start(tls: tls, clock: { clock.milliseconds })
        let account = try ServiceAccount(contentsOfFile: instance.credentialsFile)
        let provider = try FCMProvider(
            configuration: FCMConfiguration(
                accounts: [account], endpoint: instance.server.baseURL,
                caFile: tls.caFile, timeout: timeout),
            transport: TestTransport.make(connectTimeout: timeout),
            clock: { clock.milliseconds })
        return FCMHarness(tls: tls, instance: instance, provider: provider)
    }

    func stop() async {
        await provider.shutdown()
        await instance.server.stop()
        tls.remove()
    }

    static func delivery(token: String, kind: JobKind = .message, index: Int = 0) -> Delivery {
        let target = Target.fcm("b\(index)", token: token, platform: "android")
        let job = Job(
            id: "j\(index)", createdAt: currentTimeMilliseconds(), ttl: 60, kind: kind, priority: .high, userId: "u",
            notification: Notification(title: "T", body: "B"), data: ["k": "v"], targets: [target])
        return Delivery(job: job, target: target, attempt: 1, now: currentTimeMilliseconds())
    }
}

@Suite("FCM plugin over HTTP/2 + TLS against the OAuth2 and FCM sandboxes")
struct FCMSandboxTests {
    @Test("one access token serves 1000 sends, fetched once even when they start together")
    func oneTokenForManySends() async throws {
        let harness = try await FCMHarness.start(timeout: .seconds(60))
        let results = await withTaskGroup(of: DeliveryResult.self) { group in
            for index in 0..<1000 {
                group.addTask { await harness.provider.deliver(FCMHarness.delivery(token: "tok-\(index)", index: index)) }
            }
            return await group.reduce(into: [DeliveryResult]()) { $0.append($1) }
        }
        let unexpected = results.filter {
            if case .delivered(let name?, 200, _) = $0 { !name.hasPrefix("projects/example-project/messages/") } else { true }
        }
        #expect(unexpected.isEmpty, "not delivered as expected: \(unexpected)")
        #expect(harness.instance.sandbox.tokenRequestCount == 1)
        await harness.stop()
    }

    @Test("the token is refreshed when the clock nears its expiry, not before")
    func refreshNearExpiry() async throws {
        let clock = FakeClock()
        let harness = try await FCMHarness.start(clock: clock)
        _ = await harness.provider.deliver(FCMHarness.delivery(token: "tok"))
        clock.advance(minutes: 54)
        _ = await harness.provider.deliver(FCMHarness.delivery(token: "tok"))
        #expect(harness.instance.sandbox.tokenRequestCount == 1)
        clock.advance(minutes: 1)
        guard case .delivered = await harness.provider.deliver(FCMHarness.delivery(token: "tok")) else {
            Issue.record("not delivered after the refresh")
            return
        }
        #expect(harness.instance.sandbox.tokenRequestCount == 2)
        await harness.stop()
    }

    @Test(
        "every scripted error code comes back with the right status and action",
        arguments: [
            ("unregistered-1", "rejected", Outcome.Action.removeBinding),
            ("badtoken-1", "rejected", .removeBinding),
            ("mismatch-1", "failed", .checkCredentials),
            ("quota-1", "retryable", .none),
            ("unavailable-1", "retryable", .none),
            ("internal-1", "retryable", .none),
            ("thirdparty-1", "failed", .checkCredentials),
        ])
    func scriptedErrors(_ token: String, _ kind: String, _ action: Outcome.Action) async throws {
        let harness = try await FCMHarness.start()
        let result = await harness.provider.deliver(FCMHarness.delivery(token: token))
        let outcome = Outcome(
            job: FCMHarness.delivery(token: token).job, target: FCMHarness.delivery(token: token).target,
            result: result, attempts: 1, at: 0)
        switch (kind, result) {
        case ("rejected", .rejected), ("retryable", .retryable), ("failed", .failed): break
        default: Issue.record("\(token): expected \(kind), got \(result)")
        }
        #expect(outcome.action == action)
        if token.hasPrefix("quota"), case .retryable(_, _, let retryAfter) = result { #expect(retryAfter == .seconds(1)) }
        await harness.stop()
    }

    @Test("a 401 renews the access token once and retries; a fresh token refused again means credentials")
    func unauthenticated() async throws {
        let clock = FakeClock()
        let harness = try await FCMHarness.start(clock: clock)
        _ = await harness.provider.deliver(FCMHarness.delivery(token: "tok"))
        clock.advance(minutes: 10)
        harness.instance.sandbox.revokeAccessTokens()
        guard case .retryable(_, 401?, _) = await harness.provider.deliver(FCMHarness.delivery(token: "tok")) else {
            Issue.record("an old token refused should be retried with a new one")
            return
        }
        guard case .delivered = await harness.provider.deliver(FCMHarness.delivery(token: "tok")) else {
            Issue.record("the renewed token should deliver")
            return
        }
        harness.instance.sandbox.revokeAccessTokens()
        #expect(
            await harness.provider.deliver(FCMHarness.delivery(token: "tok"))
                == .failed(
                    reason: "UNAUTHENTICATED: Request had invalid authentication credentials.", httpStatus: 401, action: .checkCredentials))
        #expect(harness.instance.sandbox.tokenRequestCount == 2)
        await harness.stop()
    }

    @Test("the token endpoint down: sends are retryable, and the endpoint is not asked once per message")
    func tokenEndpointDown() async throws {
        let clock = FakeClock()
        let harness = try await FCMHarness.start(clock: clock)
        harness.instance.sandbox.setTokenEndpointDown(true)
        for index in 0..<50 {
            guard case .retryable = await harness.provider.deliver(FCMHarness.delivery(token: "tok", index: index)) else {
                Issue.record("expected retryable while the token endpoint is down")
                return
            }
        }
        #expect(
            harness.instance.sandbox.tokenRequestCount <= 2,
            "negative caching: \(harness.instance.sandbox.tokenRequestCount) token requests for 50 sends")
        harness.instance.sandbox.setTokenEndpointDown(false)
        guard case .retryable = await harness.provider.deliver(FCMHarness.delivery(token: "tok")) else {
            Issue.record("within the failure backoff the endpoint is not asked again")
            return
        }
        clock.advance(minutes: 2)
        guard case .delivered = await harness.provider.deliver(FCMHarness.delivery(token: "tok")) else {
            Issue.record("delivery should resume once the endpoint is back and the backoff has passed")
            return
        }
        await harness.stop()
    }

    @Test("a refused grant (revoked key) is a credentials failure")
    func refusedGrant() async throws {
        let tls = try SandboxTLS.make()
        let instance = try await FCMSandboxInstance.start(tls: tls)
        var account = try ServiceAccount(contentsOfFile: instance.credentialsFile)
        account.privateKeyPEM = try PushCryptoKeys.freshRSA()
        let provider = try FCMProvider(
            configuration: FCMConfiguration(
                accounts: [account], endpoint: instance.server.baseURL,
                caFile: tls.caFile), transport: TestTransport.make())
        guard case .failed(let reason, nil, .checkCredentials, _) = await provider.deliver(FCMHarness.delivery(token: "tok")) else {
            Issue.record("expected a credentials failure")
            return
        }
        #expect(reason.contains("invalid_grant"))
        await provider.shutdown()
        await instance.server.stop()
        tls.remove()
    }
}

@Suite("FCM token endpoint outage in the pipeline")
struct FCMCircuitTests {
    static func message(_ id: String, provider: String, app: String) -> KafkaMessage {
        let json =
            #"{"v":1,"id":"\#(id)","kind":"message","ttl":30,"userId":"u","targets":[{"bindingId":"b-\#(id)","provider":"\#(provider)","app":"\#(app)","token":"tok-\#(id)"}]}"#
        return KafkaMessage(
            topicPartition: TopicPartition(topic: "push.jobs", partition: 0), offset: 0, key: nil,
            value: Array(json.utf8), timestamp: currentTimeMilliseconds())
    }

    @Test("the token endpoint down opens the project's circuit after the threshold; other providers keep delivering")
    func circuitOpens() async throws {
        let harness = try await FCMHarness.start()
        harness.instance.sandbox.setTokenEndpointDown(true)
        let proxy = ScriptedProvider { _ in .delivered(providerMessageId: nil, httpStatus: 200) }
        var configuration = PipelineConfiguration(retryPolicy: RetryPolicy(baseMilliseconds: 1, maximumMilliseconds: 1, maximumAttempts: 1))
        configuration.circuitBreaker = CircuitBreaker.Settings(failureThreshold: 3, coolDownMilliseconds: 60_000)
        let processor = JobProcessor(
            registry: ProviderRegistry([harness.provider, proxy]), configuration: configuration,
            store: InMemoryDeliveryStore(), retryQueue: nil, logger: testLogger())
        var last: ProcessedJob?
        for index in 0..<6 { last = await processor.process(Self.message("f\(index)", provider: "fcm", app: FCMSandboxInstance.projectId)) }
        #expect(processor.circuitBreakers.openCircuits.keys.map(\.description) == ["fcm/example-project"])
        if case .publish(let publications, _)? = last, case .outcome(let heldBack)? = publications.first {
            #expect(heldBack.status == .expired, "held back by the open circuit, it waits for the cool-down, which outlasts its 30 s TTL")
            #expect(heldBack.attempts == 0, "nothing was sent")
        } else {
            Issue.record("no outcome for the held-back push")
        }
        #expect(harness.instance.sandbox.tokenRequestCount <= 2)
        guard case .publish(let publications, _) = await processor.process(Self.message("p1", provider: "proxy", app: "acme")),
            case .outcome(let outcome)? = publications.first
        else {
            Issue.record("no outcome")
            return
        }
        #expect(outcome.status == .delivered)
        await harness.stop()
    }
}
