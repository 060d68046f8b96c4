import FCMPlugin
import PushCore
import PushKafka
import Testing
import TestSupport
@testable import PushPipeline

@Suite("SIP bindings and cancels in the pipeline")
struct SIPBindingPipelineTests {
    static func message(_ json: String) -> KafkaMessage {
        KafkaMessage(
            topicPartition: TopicPartition(topic: "push.jobs", partition: 0), offset: 0, key: nil,
            value: Array(json.utf8), timestamp: currentTimeMilliseconds())
    }

    static func outcomes(_ processed: ProcessedJob) -> [Outcome] {
        guard case .publish(let publications, _) = processed else { return [] }
        return publications.compactMap { if case .outcome(let outcome) = $0 { outcome } else { nil } }
    }

    func processor(_ provider: ScriptedProvider, windows: DedupeWindows = .default) -> JobProcessor {
        var configuration = PipelineConfiguration()
        configuration.dedupeWindows = windows
        return JobProcessor(
            registry: ProviderRegistry([provider]), configuration: configuration, store: InMemoryDeliveryStore(),
            retryQueue: nil, logger: testLogger())
    }

    @Test("X-MPUSH null alone (the seed's unregister) yields rejected + remove_binding, provider none, 0 attempts, nothing sent")
    func bareNullUnbinds() async throws {
        let provider = ScriptedProvider(id: .fcm, format: FCMTargetFormat()) { _ in .delivered(providerMessageId: "m", httpStatus: 200) }
        let job = #"{"v":1,"id":"j1","kind":"message","userId":"alice","targets":[{"bindingId":"gone","xmpush":"null"}]}"#
        let outcome = try #require(Self.outcomes(await processor(provider).process(Self.message(job))).first)
        #expect(outcome.status == .rejected)
        #expect(outcome.action == .removeBinding)
        #expect(outcome.attempts == 0)
        #expect(outcome.provider == "none")
        #expect(outcome.bindingId == "gone")
    }

    @Test("pn-prid=null yields rejected + remove_binding with no provider call; the job's other targets are sent")
    func unboundTargetIsRejectedUnsent() async throws {
        let provider = ScriptedProvider(id: .fcm, format: FCMTargetFormat()) { _ in .delivered(providerMessageId: "m", httpStatus: 200) }
        let job =
            #"{"v":1,"id":"j1","kind":"call","userId":"alice","targets":[{"bindingId":"gone","rfc8599":"pn-provider=fcm;pn-param=dead-project;pn-prid=null"},{"bindingId":"live","xmpush":"a:live-project:tok-1"}]}"#
        let outcomes = Self.outcomes(await processor(provider).process(Self.message(job)))
        let gone = try #require(outcomes.first { $0.bindingId == "gone" })
        #expect(gone.status == .rejected)
        #expect(gone.action == .removeBinding)
        #expect(gone.attempts == 0)
        #expect(gone.app == "dead-project")
        #expect(provider.calls(for: "dead-project") == 0)
        #expect(outcomes.first { $0.bindingId == "live" }?.status == .delivered)
        #expect(provider.calls(for: "live-project") == 1)
    }

    @Test("a cancel is never deduplicated against the call it cancels, even with the call's collapseKey and a cancel window")
    func cancelNotDeduplicatedAgainstCall() async throws {
        let provider = ScriptedProvider { _ in .delivered(providerMessageId: nil, httpStatus: 200) }
        let processor = processor(provider, windows: DedupeWindows(milliseconds: [.call: 5_000, .cancel: 5_000]))
        func job(_ id: String, _ kind: String) -> KafkaMessage {
            Self.message(
                #"{"v":1,"id":"\#(id)","kind":"\#(kind)","userId":"alice","collapseKey":"call-77","data":{"callId":"call-77"},"targets":[{"bindingId":"b1","provider":"proxy","app":"p"}]}"#
            )
        }
        #expect(Self.outcomes(await processor.process(job("call-77", "call"))).first?.status == .delivered)
        #expect(Self.outcomes(await processor.process(job("cancel-77", "cancel"))).first?.status == .delivered)
        #expect(
            Self.outcomes(await processor.process(job("cancel-77b", "cancel"))).first?.status == .deduplicated,
            "a second cancel of the same call inside the cancel window is still a duplicate")
        #expect(provider.calls(for: "p") == 2)
    }

    @Test(
        "a target that cannot be parsed ends rejected on its own (action none, 0 attempts, the rule as reason) while the job's good target is delivered"
    )
    func unparseableTargetIsRejectedAlone() async throws {
        let provider = ScriptedProvider(id: .fcm, format: FCMTargetFormat()) { _ in .delivered(providerMessageId: "m", httpStatus: 200) }
        let processor = processor(provider)
        let job =
            #"{"v":1,"id":"j1","kind":"call","userId":"alice","targets":[{"bindingId":"bad","rfc8599":"pn-provider=fcm;pn-prid=t"},{"bindingId":"pager","provider":"pager"},{"bindingId":"live","xmpush":"a:live-project:tok-1"}]}"#
        let outcomes = Self.outcomes(await processor.process(Self.message(job)))
        #expect(outcomes.count == 3)
        let bad = try #require(outcomes.first { $0.bindingId == "bad" })
        #expect(bad.status == .rejected)
        #expect(bad.action == .none)
        #expect(bad.attempts == 0)
        #expect(bad.provider == .fcm)
        #expect(bad.app == nil)
        #expect(bad.reason?.hasPrefix("invalid_field: targets[0].rfc8599 pn-param (the Firebase project id) is required for fcm") == true)
        let pager = try #require(outcomes.first { $0.bindingId == "pager" })
        #expect((pager.provider, pager.status, pager.action, pager.attempts) == ("none", .rejected, .none, 0))
        #expect(pager.reason?.hasPrefix(#"unknown_provider: targets[1].provider "pager""#) == true)
        #expect(outcomes.first { $0.bindingId == "live" }?.status == .delivered)
        #expect(provider.calls(for: "live-project") == 1)

        let again = Self.outcomes(await processor.process(Self.message(job)))
        var refusedAgain = try #require(again.first { $0.bindingId == "bad" })
        refusedAgain.at = bad.at
        #expect(refusedAgain == bad, "a redelivered job refuses the target again, alike but for the time: it claims no dedupe window")
        #expect(again.first { $0.bindingId == "live" }?.attempts == 1)
        #expect(provider.calls(for: "live-project") == 1, "and sends nothing again")
    }

    @Test("a job whose every target is unparseable is still dead-lettered, with the first target's rule as the reason")
    func allTargetsUnparseableIsDeadLettered() async throws {
        let provider = ScriptedProvider(id: .fcm, format: FCMTargetFormat()) { _ in .delivered(providerMessageId: "m", httpStatus: 200) }
        let job =
            #"{"v":1,"id":"j1","kind":"call","userId":"alice","targets":[{"bindingId":"bad","rfc8599":"pn-provider=fcm;pn-prid=t"},{"bindingId":"pager","provider":"pager"}]}"#
        guard case .publish(let publications, _) = await processor(provider).process(Self.message(job)) else {
            Issue.record("the job was not finished")
            return
        }
        #expect(publications.count == 1)
        guard case .deadLetter(let rejection, let value, _, _)? = publications.first else {
            Issue.record("not dead-lettered: \(publications)")
            return
        }
        #expect(rejection.code == .invalidField)
        #expect(
            rejection.message
                == "targets[0].rfc8599 pn-param (the Firebase project id) is required for fcm (and every other target of the job is invalid too)"
        )
        #expect(value == Array(job.utf8))
        #expect(provider.calls(for: "live-project") == 0)
    }
}
