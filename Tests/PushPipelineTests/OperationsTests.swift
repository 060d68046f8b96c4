import Foundation
import PushCore
import PushKafka
import Synchronization
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

    @Test("the outcome producer's round trip and queue time per broker come from librdkafka's statistics; bootstrap entries and brokers without requests are left out")
    func producerLatencyFromStatistics() {
        let statistics = #"{"name":"p","brokers":{"localhost:9092/bootstrap":{"nodeid":-1,"rtt":{"cnt":3,"p50":100,"p99":200},"int_latency":{"cnt":0,"p99":0}},"localhost:9092/1":{"name":"localhost:9092/1","nodeid":1,"rtt":{"min":1580,"cnt":40,"p50":2319,"p99":3391},"int_latency":{"cnt":90,"p50":28031,"p99":48639}},"localhost:9093/2":{"nodeid":2,"rtt":{"cnt":0,"p50":0,"p99":0},"int_latency":{"cnt":0,"p99":0}}}}"#
        #expect(ProducerLatency.parse(Array(statistics.utf8))
            == [ProducerLatency(broker: "1", roundTripP50: 2.319, roundTripP99: 3.391, queueP99: 48.639)])
        #expect(ProducerLatency.parse(Array("{broken".utf8)).isEmpty)
        #expect(ProducerLatency.parse(Array(#"{"brokers":{"b":{"nodeid":1,"rtt":{"cnt":1,"p50":-5,"p99":9}}}}"#.utf8)).isEmpty)
    }

    @Test("a broker that answers slowly shows in the producer's round trip (librdkafka's mock broker with 60 ms added)")
    func slowBrokerShowsInProduceRoundTrip() async throws {
        let kafka = try KafkaFixture(partitions: 1)
        kafka.cluster.setRoundTripTime(broker: -1, milliseconds: 60)
        let seen = Mutex<[ProducerLatency]>([])
        var properties = KafkaProducer.defaultProperties(bootstrapServers: kafka.cluster.bootstrapServers)
        properties["statistics.interval.ms"] = "100"
        let producer = try KafkaProducer(properties: properties, logger: testLogger(), statistics: { json in
            let latencies = ProducerLatency.parse(json)
            if !latencies.isEmpty { seen.withLock { $0 = latencies } }
        })
        defer { producer.close() }
        let slow = { seen.withLock { $0.contains { $0.broker == "1" && $0.roundTripP50 >= 50 } } }
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline, !slow() {
            try await producer.send([KafkaRecord(topic: kafka.outcomesTopic, key: nil, value: Array("outcome".utf8))])
        }
        #expect(slow())
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
