import ProxyPlugin
import PushCore
import PushKafka
import Synchronization
import Testing
import TestSupport
@testable import PushPipeline

@Suite("Circuit breaking per (provider, app)")
struct CircuitBreakerPipelineTests {
    static func message(_ id: String, app: String) -> KafkaMessage {
        let json = #"{"v":1,"id":"\#(id)","kind":"message","userId":"u","targets":[{"bindingId":"b-\#(id)","provider":"proxy","app":"\#(app)"}]}"#
        return KafkaMessage(topicPartition: TopicPartition(topic: "push.jobs", partition: 0), offset: 0, key: nil,
                            value: Array(json.utf8), timestamp: currentTimeMilliseconds())
    }

    static func outcome(_ processed: ProcessedJob) -> Outcome? {
        guard case .publish(let publications, _) = processed, case .outcome(let outcome)? = publications.first else { return nil }
        return outcome
    }

    func processor(_ provider: ScriptedProvider, failures: Int = 3, clock: FakeClock = FakeClock(),
                   onSleep: @escaping @Sendable (Int64) -> Void = { _ in }) -> JobProcessor {
        var configuration = PipelineConfiguration(retryPolicy: RetryPolicy(baseMilliseconds: 1, maximumMilliseconds: 1, maximumAttempts: 1))
        configuration.circuitBreaker = CircuitBreaker.Settings(failureThreshold: failures, coolDownMilliseconds: 60_000)
        return JobProcessor(registry: ProviderRegistry([provider]), configuration: configuration, store: InMemoryDeliveryStore(),
                            retryQueue: nil, logger: testLogger(), clock: { clock.milliseconds }, sleep: { duration in
                                onSleep(duration.milliseconds)
                                clock.advance(milliseconds: duration.milliseconds)
                            })
    }

    @Test("rejected credentials open the app's circuit: later pushes fail with check_credentials unsent; other apps flow")
    func credentialFailureOpensCircuit() async throws {
        let provider = ScriptedProvider { target in
            target.app == "revoked" ? .failed(reason: "InvalidProviderToken", httpStatus: 403, action: .checkCredentials)
                                    : .delivered(providerMessageId: nil, httpStatus: 200)
        }
        let processor = processor(provider)
        let first = try #require(Self.outcome(await processor.process(Self.message("1", app: "revoked"))))
        #expect(first.status == .failed)
        #expect(first.action == .checkCredentials)
        let second = try #require(Self.outcome(await processor.process(Self.message("2", app: "revoked"))))
        #expect(second.status == .failed)
        #expect(second.action == .checkCredentials)
        #expect(second.reason?.hasPrefix("circuit open") == true)
        #expect(provider.calls(for: "revoked") == 1, "the open circuit sent nothing")
        let other = try #require(Self.outcome(await processor.process(Self.message("3", app: "healthy"))))
        #expect(other.status == .delivered)
        #expect(processor.circuitBreakers.openCircuits.keys.map(\.description) == ["proxy/revoked"])
    }

    @Test("a storm of transient failures opens the circuit; a push it holds back waits out the cool-down and spends no attempt")
    func failureStorm() async throws {
        let sends = Atomic<Int>(0)
        let provider = ScriptedProvider { _ in
            sends.add(1, ordering: .relaxed).newValue <= 3 ? .retryable(reason: "proxy answered 502", httpStatus: 502)
                                                            : .delivered(providerMessageId: nil, httpStatus: 200)
        }
        let clock = FakeClock()
        let slept = Mutex<[Int64]>([])
        let processor = processor(provider, failures: 3, clock: clock) { milliseconds in slept.withLock { $0.append(milliseconds) } }
        for index in 0..<3 {
            #expect(Self.outcome(await processor.process(Self.message("s\(index)", app: "stormy")))?.status == .failed)
        }
        #expect(processor.circuitBreakers.openCircuits.count == 1)

        let heldBack = try #require(Self.outcome(await processor.process(Self.message("s3", app: "stormy"))))
        #expect(heldBack.status == .delivered, "with one attempt allowed, the held-back push still gets its one send")
        #expect(heldBack.attempts == 1)
        #expect(slept.withLock { $0 }.count == 1)
        #expect(slept.withLock { $0 }.allSatisfy { $0 >= 60_000 }, "nothing is sent before the cool-down ends")
        #expect(provider.calls(for: "stormy") == 4)
    }
}

@Suite("A failure stops no more than the scope its provider names")
struct DeliveryScopeTests {
    static func message(_ id: String, bindingId: String, app: String, extra: String = "") -> KafkaMessage {
        let json = #"{"v":1,"id":"\#(id)","kind":"message","userId":"u","targets":[{"bindingId":"\#(bindingId)","provider":"proxy","app":"\#(app)"\#(extra)}]}"#
        return KafkaMessage(topicPartition: TopicPartition(topic: "push.jobs", partition: 0), offset: 0, key: nil,
                            value: Array(json.utf8), timestamp: currentTimeMilliseconds())
    }

    func processor(_ provider: ScriptedProvider) -> JobProcessor {
        var configuration = PipelineConfiguration(retryPolicy: RetryPolicy(baseMilliseconds: 1, maximumMilliseconds: 1, maximumAttempts: 1))
        configuration.circuitBreaker = CircuitBreaker.Settings(failureThreshold: 3, coolDownMilliseconds: 60_000)
        return JobProcessor(registry: ProviderRegistry([provider]), configuration: configuration, store: InMemoryDeliveryStore(),
                            retryQueue: nil, logger: testLogger())
    }

    @Test("a credential failure blamed on one request ends that target failed and opens no circuit")
    func perTargetCredentialFailure() async throws {
        let provider = ScriptedProvider(scope: { _ in DeliveryScope(provider: .proxy, key: "origin") }) { target in
            target.bindingId == "b-0" ? .failed(reason: "403", httpStatus: 403, action: .checkCredentials, blame: .request)
                                      : .delivered(providerMessageId: nil, httpStatus: 201)
        }
        let processor = processor(provider)
        var statuses: [Outcome.Status] = []
        for index in 0..<40 {
            let processed = await processor.process(Self.message("j\(index)", bindingId: "b-\(index)", app: "web"))
            statuses.append(try #require(CircuitBreakerPipelineTests.outcome(processed)).status)
        }
        #expect(statuses.first == .failed)
        #expect(statuses.dropFirst().allSatisfy { $0 == .delivered }, "the other 39 are delivered: \(statuses)")
        #expect(processor.circuitBreakers.openCircuits.isEmpty)
    }

    @Test("a scope's credential failure stops that scope only: the same app in another environment keeps sending")
    func environmentsAreSeparateScopes() async throws {
        let provider = ScriptedProvider(scope: { target in
            DeliveryScope(provider: .proxy, key: "\(target.app ?? "-")/\(target.details(ProxyTarget.self)?.tokenType ?? "production")")
        }) { target in
            target.details(ProxyTarget.self)?.tokenType == "cookie" ? .failed(reason: "BadCertificateEnvironment", httpStatus: 403, action: .checkCredentials)
                                         : .delivered(providerMessageId: nil, httpStatus: 200)
        }
        let processor = processor(provider)
        let sandboxFailure = try #require(CircuitBreakerPipelineTests.outcome(await processor.process(
            Self.message("1", bindingId: "b1", app: "chat", extra: #","token":"t","tokenType":"cookie""#))))
        #expect(sandboxFailure.status == .failed)
        #expect(processor.circuitBreakers.openCircuits.keys.map(\.description) == ["proxy/chat/cookie"])
        let production = try #require(CircuitBreakerPipelineTests.outcome(await processor.process(Self.message("2", bindingId: "b2", app: "chat"))))
        #expect(production.status == .delivered)
    }

    @Test("requests in flight are bounded per scope by the scope's own limit")
    func perScopeLimit() async throws {
        let limits = AppConcurrencyLimits(limit: 500, metrics: PipelineMetrics())
        let hostile = DeliveryScope(provider: .webpush, key: "https://hostile.example", inFlightLimit: 2)
        let other = DeliveryScope(provider: .webpush, key: "https://push.example", inFlightLimit: 2)
        #expect(await limits.acquire(hostile, lane: .normal, parking: nil))
        #expect(await limits.acquire(hostile, lane: .normal, parking: nil))
        let third = Task { await limits.acquire(hostile, lane: .normal, parking: nil) }
        try await Task.sleep(for: .milliseconds(100))
        #expect(limits.running(hostile) == 2, "the third waits for the hostile origin's slot")
        #expect(await limits.acquire(other, lane: .normal, parking: nil), "another origin is not held up")
        limits.release(hostile)
        #expect(await third.value)
        limits.release(hostile)
        limits.release(hostile)
        limits.release(other)
    }
}
