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

    func processor(_ provider: ScriptedProvider, failures: Int = 3) -> JobProcessor {
        var configuration = PipelineConfiguration(retryPolicy: RetryPolicy(baseMilliseconds: 1, maximumMilliseconds: 1, maximumAttempts: 1))
        configuration.circuitBreaker = CircuitBreaker.Settings(failureThreshold: failures, coolDownMilliseconds: 60_000)
        return JobProcessor(registry: ProviderRegistry([provider]), configuration: configuration, store: InMemoryDeliveryStore(),
                            retryQueue: nil, logger: testLogger())
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

    @Test("a storm of transient failures opens the circuit after the threshold; nothing more is sent during the cool-down")
    func failureStorm() async throws {
        let provider = ScriptedProvider { _ in .retryable(reason: "proxy answered 502", httpStatus: 502) }
        let processor = processor(provider, failures: 3)
        for index in 0..<6 { _ = await processor.process(Self.message("s\(index)", app: "stormy")) }
        #expect(provider.calls(for: "stormy") == 3)
        #expect(processor.circuitBreakers.openCircuits.count == 1)
    }
}
