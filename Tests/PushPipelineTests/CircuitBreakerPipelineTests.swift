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
        let json =
            #"{"v":1,"id":"\#(id)","kind":"message","userId":"u","targets":[{"bindingId":"b-\#(id)","provider":"proxy","app":"\#(app)"}]}"#
        return KafkaMessage(
            topicPartition: TopicPartition(topic: "push.jobs", partition: 0), offset: 0, key: nil,
            value: Array(json.utf8), timestamp: currentTimeMilliseconds())
    }

    static func outcome(_ processed: ProcessedJob) -> Outcome? {
        guard case .publish(let publications, _) = processed, case .outcome(let outcome)? = publications.first else { return nil }
        return outcome
    }

    func processor(
        _ provider: ScriptedProvider, failures: Int = 3, clock: FakeClock = FakeClock(),
        onSleep: @escaping @Sendable (Int64) -> Void = { _ in }
    ) -> JobProcessor {
        var configuration = PipelineConfiguration(retryPolicy: RetryPolicy(baseMilliseconds: 1, maximumMilliseconds: 1, maximumAttempts: 1))
        configuration.circuitBreaker = CircuitBreaker.Settings(failureThreshold: failures, coolDownMilliseconds: 60_000)
        return JobProcessor(
            registry: ProviderRegistry([provider]), configuration: configuration, store: InMemoryDeliveryStore(),
            retryQueue: nil, logger: testLogger(), clock: { clock.milliseconds },
            sleep: { duration in
                onSleep(duration.milliseconds)
                clock.advance(milliseconds: duration.milliseconds)
            })
    }

    @Test("rejected credentials open the app's circuit: later pushes fail with check_credentials unsent; other apps flow")
    func credentialFailureOpensCircuit() async throws {
        let provider = ScriptedProvider { target in
            target.app == "revoked"
                ? .failed(reason: "InvalidProviderToken", httpStatus: 403, action: .checkCredentials)
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
            sends.add(1, ordering: .relaxed).newValue <= 3
                ? .retryable(reason: "proxy answered 502", httpStatus: 502)
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

    static func message(_ id: String, app: String, ttl: Int) -> KafkaMessage {
        let json =
            #"{"v":1,"id":"\#(id)","kind":"message","userId":"u","ttl":\#(ttl),"targets":[{"bindingId":"b-\#(id)","provider":"proxy","app":"\#(app)"}]}"#
        return KafkaMessage(
            topicPartition: TopicPartition(topic: "push.jobs", partition: 0), offset: 0, key: nil,
            value: Array(json.utf8), timestamp: currentTimeMilliseconds())
    }

    @Test("a probe whose send expired waiting for its app's slot gives the circuit back: the app's next push goes out")
    func abandonedProbeIsGivenBack() async throws {
        let failing = Atomic<Bool>(true)
        let provider = ScriptedProvider { _ in
            failing.load(ordering: .relaxed)
                ? .retryable(reason: "proxy answered 503", httpStatus: 503)
                : .delivered(providerMessageId: nil, httpStatus: 200)
        }
        var configuration = PipelineConfiguration(
            maximumInFlightPerApp: 1,
            retryPolicy: RetryPolicy(baseMilliseconds: 1, maximumMilliseconds: 1, maximumAttempts: 1))
        configuration.circuitBreaker = CircuitBreaker.Settings(failureThreshold: 1, coolDownMilliseconds: 100)
        let processor = JobProcessor(
            registry: ProviderRegistry([provider]), configuration: configuration, store: InMemoryDeliveryStore(),
            retryQueue: nil, logger: testLogger())
        #expect(Self.outcome(await processor.process(Self.message("outage", app: "a", ttl: 60)))?.status == .failed)
        #expect(processor.circuitBreakers.openCircuits.count == 1)
        failing.store(false, ordering: .relaxed)
        try await Task.sleep(for: .milliseconds(150))

        // The provider is back, but the app's one slot is busy: the probe waits for it until its TTL ends.
        let scope = DeliveryScope(provider: .proxy, key: "a")
        #expect(await processor.appLimits.acquire(scope, lane: .normal, parking: nil))
        let probe = try #require(Self.outcome(await processor.process(Self.message("probe", app: "a", ttl: 1))))
        #expect(probe.status == .expired)
        #expect(probe.reason?.contains("waiting for a slot") == true)
        processor.appLimits.release(scope)

        let next = try #require(Self.outcome(await processor.process(Self.message("next", app: "a", ttl: 5))))
        #expect(next.status == .delivered, "the circuit still waited for the abandoned probe: \(next.reason ?? "")")
        #expect(processor.circuitBreakers.openCircuits.isEmpty)
    }

    @Test("a send waits for its app's slot at most the longest slot wait, then is retried, not sent and spending no attempt")
    func slotWaitIsBounded() async throws {
        let provider = ScriptedProvider { _ in .delivered(providerMessageId: nil, httpStatus: 200) }
        let queue = RecordingRetryQueue()
        let configuration = PipelineConfiguration(maximumInFlightPerApp: 1, attemptTimeout: .milliseconds(100))
        let processor = JobProcessor(
            registry: ProviderRegistry([provider]), configuration: configuration, store: InMemoryDeliveryStore(),
            retryQueue: queue, logger: testLogger())
        let scope = DeliveryScope(provider: .proxy, key: "slow")
        #expect(await processor.appLimits.acquire(scope, lane: .normal, parking: nil))
        _ = await processor.process(Self.message("waits", app: "slow", ttl: 3600))
        processor.appLimits.release(scope)
        let entries = queue.scheduled
        #expect(entries.count == 1, "the send was handed to the retry queue")
        #expect(entries.first?.attempts == 0, "nothing was sent, so no attempt is spent")
        #expect(entries.first?.lastReason.contains("no slot of this app came free") == true)
        #expect(provider.calls(for: "slow") == 0)
    }
}

/// A retry queue that only records what it was handed.
final class RecordingRetryQueue: RetryQueue {
    private let entries = Mutex<[RetryEntry]>([])
    var scheduled: [RetryEntry] { entries.withLock { $0 } }
    func schedule(_ entry: RetryEntry, dueAt: Int64) async throws { entries.withLock { $0.append(entry) } }
    func claimDue(limit: Int, lease: Duration) async throws -> [RetryClaim] { [] }
    func renew(_ leases: [RetryLease], for lease: Duration) async throws -> [RetryLease?] { leases.map { _ in nil } }
    func complete(_ id: String) async throws {}
    func count() async throws -> Int { scheduled.count }
    func depth(overdueAfter: Duration) async throws -> RetryQueueDepth { RetryQueueDepth(entries: scheduled.count, overdue: 0) }
}

@Suite("A failure stops no more than the scope its provider names")
struct DeliveryScopeTests {
    static func message(_ id: String, bindingId: String, app: String, extra: String = "") -> KafkaMessage {
        let json =
            #"{"v":1,"id":"\#(id)","kind":"message","userId":"u","targets":[{"bindingId":"\#(bindingId)","provider":"proxy","app":"\#(app)"\#(extra)}]}"#
        return KafkaMessage(
            topicPartition: TopicPartition(topic: "push.jobs", partition: 0), offset: 0, key: nil,
            value: Array(json.utf8), timestamp: currentTimeMilliseconds())
    }

    func processor(_ provider: ScriptedProvider) -> JobProcessor {
        var configuration = PipelineConfiguration(retryPolicy: RetryPolicy(baseMilliseconds: 1, maximumMilliseconds: 1, maximumAttempts: 1))
        configuration.circuitBreaker = CircuitBreaker.Settings(failureThreshold: 3, coolDownMilliseconds: 60_000)
        return JobProcessor(
            registry: ProviderRegistry([provider]), configuration: configuration, store: InMemoryDeliveryStore(),
            retryQueue: nil, logger: testLogger())
    }

    @Test("a credential failure blamed on one request ends that target failed and opens no circuit")
    func perTargetCredentialFailure() async throws {
        let provider = ScriptedProvider(scope: { _ in DeliveryScope(provider: .proxy, key: "origin") }) { target in
            target.bindingId == "b-0"
                ? .failed(reason: "403", httpStatus: 403, action: .checkCredentials, blame: .request)
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
            target.details(ProxyTarget.self)?.tokenType == "cookie"
                ? .failed(reason: "BadCertificateEnvironment", httpStatus: 403, action: .checkCredentials)
                : .delivered(providerMessageId: nil, httpStatus: 200)
        }
        let processor = processor(provider)
        let sandboxFailure = try #require(
            CircuitBreakerPipelineTests.outcome(
                await processor.process(
                    Self.message("1", bindingId: "b1", app: "chat", extra: #","token":"t","tokenType":"cookie""#))))
        #expect(sandboxFailure.status == .failed)
        #expect(processor.circuitBreakers.openCircuits.keys.map(\.description) == ["proxy/chat/cookie"])
        let production = try #require(
            CircuitBreakerPipelineTests.outcome(await processor.process(Self.message("2", bindingId: "b2", app: "chat"))))
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

@Suite("Circuit breakers keyed by outside values stay bounded")
struct CircuitBreakerBoundTests {
    static func scope(_ index: Int) -> DeliveryScope {
        DeliveryScope(provider: "webpush", key: "https://host-\(index).example", metricLabel: "webpush-origin")
    }

    @Test("100 000 distinct origins answered on the merits keep no breaker: closed with no failure is the same as none")
    func pristineBreakersAreNotKept() {
        let breakers = CircuitBreakers(settings: .default, metrics: PipelineMetrics(), logger: testLogger())
        for index in 0..<100_000 {
            let scope = Self.scope(index)
            #expect(breakers.permit(scope, at: 1000).permit == .allowed)
            breakers.record(.rejected(reason: "endpoint refused", httpStatus: nil), in: scope, at: 1000)
        }
        #expect(breakers.count == 0)
    }

    @Test("failing origins beyond the bound evict the longest unused; idle ones are forgotten")
    func failingBreakersAreBounded() {
        let breakers = CircuitBreakers(
            settings: .default, metrics: PipelineMetrics(), logger: testLogger(),
            maximumEntries: 1000, idleEviction: .seconds(60))
        for index in 0..<100_000 {
            breakers.record(.retryable(reason: "503", httpStatus: 503), in: Self.scope(index), at: Int64(index))
        }
        #expect(breakers.count <= 1000)
        #expect(breakers.count >= 900)
        // The newest are kept: their failure counts go on.
        _ = breakers.permit(Self.scope(99_999), at: 100_000)
        #expect(breakers.count <= 1000)
        // Left alone past the idle time, all are forgotten at the next sweep.
        for index in 0..<5000 { _ = breakers.permit(Self.scope(200_000 + index), at: 10_000_000) }
        #expect(breakers.count == 0)
    }

    @Test("push_circuits_open counts the breakers not closed, through openings, closings, evictions and forgetting")
    func openCircuitsAreCounted() {
        let breakers = CircuitBreakers(
            settings: .default, metrics: PipelineMetrics(), logger: testLogger(), maximumEntries: 1000, idleEviction: .seconds(60))
        for index in 0..<3 {
            for _ in 0..<50 { breakers.record(.retryable(reason: "503", httpStatus: 503), in: Self.scope(index), at: 1000) }
        }
        #expect(breakers.openCircuits.count == 3)
        #expect(breakers.openCount == 3)
        breakers.forget { $0 == Self.scope(0) }
        #expect(breakers.openCount == 2)
        // Left alone past the idle time, the rest are forgotten at the next sweep.
        for index in 0..<5000 { _ = breakers.permit(Self.scope(200_000 + index), at: 10_000_000) }
        #expect(breakers.openCount == 0)
        #expect(breakers.openCount == breakers.openCircuits.count)
    }
}
