import FCMPlugin
import Foundation
import PushCore
import PushInMemoryKafka
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
        let harness = try PipelineHarness(
            kafka: kafka, sandbox: sandbox, group: "metrics-group",
            metrics: PipelineMetrics(appLabels: MetricAppLabels(["proxy": ["metrics-app"]])))
        #expect(harness.pipeline.readiness.ready == false)
        #expect(harness.pipeline.readiness.reason == "not yet joined the consumer group")
        let target = { (binding: String) in #"{"bindingId":"\#(binding)","provider":"proxy","app":"metrics-app"}"# }
        try await produce(
            kafka,
            [
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

    @Test(
        "consumer lag per partition is read from librdkafka's statistics; a partition whose lag it does not know (not consumed here) counts 0, not its last value"
    )
    func lagFromStatistics() {
        let statistics =
            #"{"name":"c","topics":{"push.jobs":{"topic":"push.jobs","partitions":{"0":{"partition":0,"consumer_lag":42},"1":{"partition":1,"consumer_lag":-1},"-1":{"partition":-1,"consumer_lag":-1}}}}}"#
        let lags = ConsumerLag.parse(Array(statistics.utf8)).sorted { $0.partition < $1.partition }
        #expect(lags.map(\.topic) == ["push.jobs", "push.jobs"])
        #expect(lags.map(\.partition) == [0, 1])
        #expect(lags.map(\.lag) == [42, 0])
    }

    @Test(
        "the outcome producer's round trip and queue time per broker come from librdkafka's statistics; bootstrap entries and brokers without requests are left out"
    )
    func producerLatencyFromStatistics() {
        let statistics =
            #"{"name":"p","brokers":{"localhost:9092/bootstrap":{"nodeid":-1,"rtt":{"cnt":3,"p50":100,"p99":200},"int_latency":{"cnt":0,"p99":0}},"localhost:9092/1":{"name":"localhost:9092/1","nodeid":1,"rtt":{"min":1580,"cnt":40,"p50":2319,"p99":3391},"int_latency":{"cnt":90,"p50":28031,"p99":48639}},"localhost:9093/2":{"nodeid":2,"rtt":{"cnt":0,"p50":0,"p99":0},"int_latency":{"cnt":0,"p99":0}}}}"#
        #expect(
            ProducerLatency.parse(Array(statistics.utf8))
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
        let producer = try KafkaProducer(
            properties: properties, logger: testLogger(),
            statistics: { json in
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

    @Test(
        "an app label is an app the configuration names, - or unconfigured: after hundreds of made-up names, escapes and control characters through the pipeline, /metrics parses strictly and holds the configured values only"
    )
    func appLabelsComeFromConfiguration() async throws {
        _ = TestMetrics.registry
        let probe: ProviderID = "metricsprobe"
        let provider = ScriptedProvider(id: probe) { target in
            target.app == "tenant-b" ? .failed(reason: "scripted", httpStatus: 400) : .delivered(providerMessageId: nil, httpStatus: 200)
        }
        let fcm = ScriptedProvider(id: .fcm, format: FCMTargetFormat()) { _ in .delivered(providerMessageId: "m", httpStatus: 200) }
        let metrics = PipelineMetrics(appLabels: MetricAppLabels([probe: ["tenant-a", "tenant-b"], .fcm: ["configured-project"]]))
        // App names as they stand in the job's JSON: made up, look-alikes of configured ones, and text-format breakers.
        let madeUp =
            (0..<300).map { "made-up-\($0)" }
            + [
                #"made-up-quote\"d"#, #"made-up-back\\slash"#, #"made-up-x{y=\"z\"} 1"#, "made-up-pct%0Aencoded", "tenant-a ", "TENANT-A",
                #"made-up-\u00e9"#,
            ]
        let refused = [
            #"{"bindingId":"c1","provider":"metricsprobe","app":"made-up-line\nfeed","token":"t"}"#,
            #"{"bindingId":"c2","rfc8599":"pn-provider=fcm;pn-param=made-up%0Aevil;pn-prid=t"}"#,
            #"{"bindingId":"c3","rfc8599":"pn-provider=fcm;pn-param=made-up%0D%0Aevil;pn-prid=t"}"#,
        ]
        let accepted =
            madeUp.map { #"{"provider":"metricsprobe","app":"\#($0)","token":"t"}"# }
            + ["tenant-a", "tenant-b"].map { #"{"provider":"metricsprobe","app":"\#($0)","token":"t"}"# }
            + [
                #"{"provider":"metricsprobe","token":"t"}"#,
                #"{"rfc8599":"pn-provider=fcm;pn-param=configured-project;pn-prid=t"}"#,
                #"{"rfc8599":"pn-provider=fcm;pn-param=made-up-%22%7D%201;pn-prid=t"}"#,
            ]
        let kafka = InMemoryKafka(topics: ["push.jobs": 2, "push.jobs.urgent": 1, "push.outcomes": 2, "push.dlq": 1])
        for (index, target) in accepted.enumerated() {
            let withBinding = #"{"bindingId":"b\#(index)","# + target.dropFirst()
            kafka.append(
                KafkaRecord(topic: "push.jobs", key: Array("u\(index)".utf8), value: jobJSON(id: "labels-\(index)", targets: [withBinding]))
            )
        }
        for (index, target) in refused.enumerated() {
            kafka.append(
                KafkaRecord(topic: "push.jobs", key: Array("r\(index)".utf8), value: jobJSON(id: "refused-\(index)", targets: [target])))
        }
        let configuration = PipelineConfiguration(shutdownGrace: .seconds(2))
        let processor = JobProcessor(
            registry: ProviderRegistry([provider, fcm]), configuration: configuration, store: InMemoryDeliveryStore(),
            retryQueue: nil, metrics: metrics, logger: testLogger())
        let pipeline = DeliveryPipeline(
            configuration: configuration, sources: kafka.sources(group: "labels"), sink: kafka.sink,
            processor: processor, logger: testLogger())
        let running = Task { try await pipeline.run() }
        let ends = kafka.messages(in: "push.jobs").reduce(into: [TopicPartition: Int64]()) { ends, message in
            ends[message.topicPartition] = max(ends[message.topicPartition] ?? 0, message.offset + 1)
        }
        try await waitUntil(timeout: .seconds(60)) { kafka.position(group: "labels") == ends }
        pipeline.stop()
        try await running.value
        #expect(kafka.messages(in: "push.dlq").count == refused.count)

        let samples = try PrometheusText.parse(TestMetrics.registry.emitToString())
        let deliveries = samples.filter { $0.name == "push_deliveries_total" && $0.labels["provider"] == probe.rawValue }
        #expect(Set(deliveries.compactMap { $0.labels["app"] }) == ["tenant-a", "tenant-b", "unconfigured", "-"])
        #expect(
            deliveries.first { $0.labels["app"] == "unconfigured" && $0.labels["status"] == "delivered" }?.value == Double(madeUp.count))
        #expect(deliveries.first { $0.labels["app"] == "tenant-b" && $0.labels["status"] == "failed" }?.value == 1)
        #expect(
            samples.contains {
                $0.name == "push_deliveries_total" && $0.labels["provider"] == "fcm" && $0.labels["app"] == "configured-project"
            })
        let labelValues = samples.flatMap { $0.labels.values }
        #expect(!labelValues.contains { $0.contains("made-up") || $0.contains("evil") || $0.contains { $0.isNewline } })
    }
}
