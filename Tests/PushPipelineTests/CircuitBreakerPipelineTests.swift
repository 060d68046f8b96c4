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
