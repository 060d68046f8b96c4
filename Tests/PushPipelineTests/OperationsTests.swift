import Foundation
import PushCore
import PushKafka
import Testing
import TestSupport
@testable import PushPipeline

@Suite("Pipeline metrics and readiness")
struct PipelineOperationsTests {
    @Test("after a run the delivery, consumption and invalid-job counters hold the right values; readiness follows the group")
    func metricsAndReadiness() async throws {
        _ = TestMetrics.registry
        let kafka = try KafkaFixture(partitions: 1)
        let sandbox = try await ProxySandboxFixture.start()
        let harness = try PipelineHarness(kafka: kafka, sandbox: sandbox, group: "metrics-group")
        #expect(harness.pipeline.readiness.ready == false)
        #expect(harness.pipeline.readiness.reason == "not yet joined the consumer group")
        let target = { (binding: String) in #"{"bindingId":"\#(binding)","provider":"proxy","app":"metrics-app"}"# }
        try await produce(kafka, [
            ("a", jobJSON(id: "m1", targets: [target("m1a"), target("m1b")])),
            ("b", jobJSON(id: "m2", userId: "unknown-x", targets: [target("m2a")])),
            ("c", Array("{broken".utf8)),
        ])
        let reader = try kafka.reader()
        let running = harness.start()
        _ = await reader.wait(timeout: .seconds(30)) { $0.count >= 4 }
        #expect(harness.pipeline.readiness.ready)
        #expect(harness.pipeline.isAlive)
        #expect(TestMetrics.value(of: #"push_deliveries_total{provider="proxy",app="metrics-app",status="delivered"}"#) == 2)
        #expect(TestMetrics.value(of: #"push_deliveries_total{provider="proxy",app="metrics-app",status="rejected"}"#) == 1)
        #expect((TestMetrics.value(of: #"push_jobs_invalid_total{code="invalid_json"}"#) ?? 0) >= 1)
        #expect((TestMetrics.value(of: "push_jobs_consumed_total") ?? 0) >= 3)
        #expect(TestMetrics.registry.emitToString().contains("push_provider_request_duration_seconds_bucket{provider=\"proxy\""))
        harness.pipeline.stop()
        #expect(harness.pipeline.readiness == (false, "shutting down"))
        try await running.value
        harness.producer.close()
        await harness.registry.shutdown()
        reader.stop()
        await sandbox.stop()
    }

    @Test("consumer lag per partition is read from librdkafka's statistics")
    func lagFromStatistics() {
        let statistics = #"{"name":"c","topics":{"push.jobs":{"topic":"push.jobs","partitions":{"0":{"partition":0,"consumer_lag":42},"1":{"partition":1,"consumer_lag":-1},"-1":{"partition":-1,"consumer_lag":-1}}}}}"#
        let lags = ConsumerLag.parse(Array(statistics.utf8))
        #expect(lags.count == 1)
        #expect(lags.first?.topic == "push.jobs")
        #expect(lags.first?.partition == 0)
        #expect(lags.first?.lag == 42)
    }

    @Test("an app label from jobs is capped per provider, so hostile input cannot create unbounded series")
    func labelCardinality() {
        _ = TestMetrics.registry
        let metrics = PipelineMetrics()
        let job = Job(id: "j", createdAt: 0, ttl: 60, kind: .message, priority: .high, userId: "u",
                      targets: [Target(bindingId: "b", provider: "webpush")])
        for index in 0..<(PipelineMetrics.maximumAppsPerProvider + 50) {
            var target = job.targets[0]
            target.app = "hostile-\(index)"
            metrics.finished(Outcome(job: job, target: target, status: .failed, reason: nil, attempts: 0, at: 0))
        }
        let series = TestMetrics.registry.emitToString().split(separator: "\n")
            .filter { $0.hasPrefix(#"push_deliveries_total{provider="webpush""#) }
        #expect(series.count == PipelineMetrics.maximumAppsPerProvider + 1)
        #expect(TestMetrics.value(of: #"push_deliveries_total{provider="webpush",app="other",status="failed"}"#) == 50)
    }
}
