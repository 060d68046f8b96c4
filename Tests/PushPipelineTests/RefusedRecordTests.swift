import PushCore
import PushInMemoryKafka
import PushKafka
import ServiceContextModule
import ServiceLifecycle
import Testing
import TestSupport
import Tracing

@testable import PushPipeline

/// A tracer that records nothing and injects a `traceparent` and a `tracestate` of `stateBytes` into every record it
/// is asked to carry a context on: trace headers that make an outcome large.
private struct HeavyTraceTracer: Tracer {
    let stateBytes: Int

    func startSpan<Instant: TracerInstant>(
        _ operationName: String, context: @autoclosure () -> ServiceContext, ofKind kind: SpanKind, at instant: @autoclosure () -> Instant,
        function: String, file fileID: String, line: UInt
    ) -> NoOpTracer.NoOpSpan {
        NoOpTracer.NoOpSpan(context: context())
    }

    func forceFlush() {}

    func extract<Carrier, Extract>(_ carrier: Carrier, into context: inout ServiceContext, using extractor: Extract)
    where Extract: Extractor, Extract.Carrier == Carrier {}

    func inject<Carrier, Inject>(_ context: ServiceContext, into carrier: inout Carrier, using injector: Inject)
    where Inject: Injector, Inject.Carrier == Carrier {
        injector.inject("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", forKey: "traceparent", into: &carrier)
        injector.inject("k=" + String(repeating: "v", count: stateBytes - 2), forKey: "tracestate", into: &carrier)
    }
}

/// Bytes a broker counts against `message.max.bytes`, near enough: key, value, and each header's name and value.
private func size(of record: KafkaRecord) -> Int {
    (record.key?.count ?? 0) + record.value.count + record.headers.reduce(0) { $0 + $1.name.utf8.count + $1.value.count }
}

private func size(of message: KafkaMessage) -> Int {
    size(of: KafkaRecord(topic: "", key: message.key, value: message.value, headers: message.headers))
}

private func header(_ name: String, of message: KafkaMessage) -> String? {
    message.headers.first { $0.name == name }.map { String(decoding: $0.value, as: UTF8.self) }
}

/// A worker reading jobs from an in-memory log whose sink refuses every record over `maximumBytes` as librdkafka
/// does (`MSG_SIZE_TOO_LARGE`), each job traced with `traceStateBytes` of `tracestate`.
private struct RefusingHarness {
    let kafka = InMemoryKafka(topics: ["push.jobs": 1, "push.outcomes": 1, "push.dlq": 1])
    let pipeline: DeliveryPipeline

    init(maximumBytes: Int, traceStateBytes: Int, provider: any PushProvider) {
        kafka.refuseRecords { record in size(of: record) > maximumBytes ? KafkaError.messageSizeTooLarge : nil }
        let configuration = PipelineConfiguration(shutdownGrace: .seconds(2))
        let processor = JobProcessor(
            registry: ProviderRegistry([provider]), configuration: configuration, store: InMemoryDeliveryStore(), retryQueue: nil,
            logger: testLogger(), tracing: JobTracing(tracer: HeavyTraceTracer(stateBytes: traceStateBytes), consumerGroup: "push-worker"))
        pipeline = DeliveryPipeline(
            configuration: configuration, sources: kafka.sources(group: "push-worker"), sink: kafka.sink, processor: processor,
            logger: testLogger())
    }

    /// Runs the worker until the group's position passes every job, then stops it.
    func runUntilCommitted() async throws {
        let running = Task { try await pipeline.run() }
        let end = Int64(kafka.messages(in: "push.jobs").count)
        try await waitUntil(timeout: .seconds(60)) {
            kafka.position(group: "push-worker")[TopicPartition(topic: "push.jobs", partition: 0)] == end
        }
        pipeline.stop()
        try await running.value
    }
}

@Suite("Records the broker refuses for good: sent smaller, then dead-lettered, then given up, never retried forever", .serialized)
struct RefusedRecordTests {
    @Test(
        "an outcome too large only because of its trace headers is published without them; one too large even then becomes a dead letter with the reason; the job's other outcomes are published once, unchanged, and its offset commits"
    )
    func refusedRecordsAreDegradedStepByStep() async throws {
        _ = TestMetrics.registry
        // "fits": small; "trace": fits without its 4000 bytes of trace headers only; "huge": fits in no form with its value.
        let provider = ScriptedProvider { target in
            switch target.bindingId {
            case "trace": .failed(reason: String(repeating: "r", count: 3000), httpStatus: 400)
            case "huge": .failed(reason: String(repeating: "r", count: 9000), httpStatus: 400)
            default: .delivered(providerMessageId: "m", httpStatus: 200)
            }
        }
        let harness = RefusingHarness(maximumBytes: 6000, traceStateBytes: 4000, provider: provider)
        let kafka = harness.kafka
        // Two sends refused outright first (a broker down): a transient error is still retried, as the same records.
        kafka.refuseSends(2)
        kafka.append(
            KafkaRecord(
                topic: "push.jobs", key: Array("alice".utf8),
                value: jobJSON(id: "job-1", targets: [proxyTarget("fits"), proxyTarget("trace"), proxyTarget("huge")])))
        let droppedBefore = TestMetrics.value(of: #"push_publish_dropped_total{topic_kind="outcomes"}"#) ?? 0

        try await harness.runUntilCommitted()

        let outcomes = kafka.messages(in: "push.outcomes")
        let byBinding = Dictionary(grouping: outcomes) { String(decoding: $0.key ?? [], as: UTF8.self) }
        #expect(byBinding.keys.sorted() == ["fits", "trace"], "\(byBinding.keys)")
        let fits = try #require(byBinding["fits"])
        #expect(fits.count == 1, "an acknowledged outcome was sent again")
        #expect(header("tracestate", of: fits[0])?.utf8.count == 4000, "an outcome that fit lost its trace headers")
        #expect(header("ce_id", of: fits[0]) != nil)
        let trace = try #require(byBinding["trace"])
        #expect(trace.count == 1)
        #expect(header("traceparent", of: trace[0]) == nil && header("tracestate", of: trace[0]) == nil)
        #expect(header("ce_type", of: trace[0]) == "io.push-worker.outcome.failed", "the CloudEvents headers are the contract: they stay")
        #expect(trace[0].json?["bindingId"] == .string("trace"))

        let deadLetters = kafka.messages(in: "push.dlq")
        #expect(deadLetters.count == 1, "\(deadLetters.map { header("push-dlq-source", of: $0) })")
        let huge = try #require(deadLetters.first)
        #expect(huge.key.map { String(decoding: $0, as: UTF8.self) } == "huge")
        #expect(header(OutcomePublisher.codeHeader, of: huge) == "outcome_too_large")
        #expect(header(OutcomePublisher.reasonHeader, of: huge)?.hasPrefix("the outcome could not be published to push.outcomes: ") == true)
        #expect(header(OutcomePublisher.sourceHeader, of: huge)?.hasPrefix("outcome/failed/1/5:job-1/huge") == true)
        #expect(header("ce_type", of: huge) == "io.push-worker.dead-letter")
        // Its value (the outcome JSON, over 9000 bytes) was refused too: the dead letter went without it.
        #expect(huge.value.isEmpty)
        #expect(Int(header(OutcomePublisher.truncatedHeader, of: huge) ?? "") ?? 0 > 9000)
        #expect(header("tracestate", of: huge) == nil)

        #expect(kafka.committed(group: "push-worker")[TopicPartition(topic: "push.jobs", partition: 0)] == 1)
        #expect(provider.calls(for: "-") == 3, "a refused publication must not send the notifications again")
        #expect(TestMetrics.value(of: #"push_publish_dropped_total{topic_kind="outcomes"}"#) ?? 0 == droppedBefore, "nothing was given up")
        // 2 refused outright, then: all three ("trace" and "huge" refused) → both without trace headers ("huge" refused)
        // → "huge" as a dead letter (refused) → that dead letter without its value.
        #expect(kafka.sends == 6)
    }

    @Test("a record refused in every form is given up: counted, and its job still ends so its offset commits")
    func recordRefusedInEveryFormIsGivenUp() async throws {
        _ = TestMetrics.registry
        let provider = ScriptedProvider { _ in .delivered(providerMessageId: "m", httpStatus: 200) }
        let harness = RefusingHarness(maximumBytes: 100, traceStateBytes: 100, provider: provider)
        let kafka = harness.kafka
        kafka.append(KafkaRecord(topic: "push.jobs", key: Array("alice".utf8), value: jobJSON(id: "job-2", targets: [proxyTarget("b1")])))
        // Not a job: its dead letter is refused too, with and without its value.
        kafka.append(KafkaRecord(topic: "push.jobs", key: Array("alice".utf8), value: Array(String(repeating: "x", count: 500).utf8)))
        let outcomesBefore = TestMetrics.value(of: #"push_publish_dropped_total{topic_kind="outcomes"}"#) ?? 0
        let deadLettersBefore = TestMetrics.value(of: #"push_publish_dropped_total{topic_kind="dead_letters"}"#) ?? 0

        try await harness.runUntilCommitted()

        #expect(kafka.messages(in: "push.outcomes").isEmpty && kafka.messages(in: "push.dlq").isEmpty)
        #expect(kafka.committed(group: "push-worker")[TopicPartition(topic: "push.jobs", partition: 0)] == 2)
        #expect(TestMetrics.value(of: #"push_publish_dropped_total{topic_kind="outcomes"}"#) == outcomesBefore + 1)
        #expect(TestMetrics.value(of: #"push_publish_dropped_total{topic_kind="dead_letters"}"#) == deadLettersBefore + 1)
        // The outcome: as built, without trace headers, as a dead letter, without its value; the dead letter: as
        // built, without trace headers, without its value.
        #expect(kafka.sends == 7)
    }
}

@Suite("Records the broker refuses for good, through librdkafka and the mock cluster", .serialized)
struct RefusedRecordKafkaTests {
    @Test(
        "a dead letter over the producer's message.max.bytes is published without its value, and the job's offset commits instead of retrying forever"
    )
    func deadLetterOverMessageMaxBytesIsPublishedWithoutItsValue() async throws {
        let kafka = try KafkaFixture(partitions: 1)
        let oversized = Array(#"{"v":1,"id":""#.utf8) + Array(repeating: UInt8(ascii: "x"), count: 3000)
        try await produce(kafka, [("mallory", oversized), ("alice", jobJSON(id: "after", targets: [proxyTarget("a1")]))])

        var configuration = PipelineConfiguration(shutdownGrace: .seconds(2))
        configuration.consumerGroup = "push-worker"
        let producer = try KafkaProducer(
            properties: KafkaProducer.defaultProperties(bootstrapServers: kafka.cluster.bootstrapServers).merging([
                "message.max.bytes": "1000"
            ]) {
                $1
            }, logger: testLogger())
        let provider = ScriptedProvider { _ in .delivered(providerMessageId: "m", httpStatus: 200) }
        let processor = JobProcessor(
            registry: ProviderRegistry([provider]), configuration: configuration, store: InMemoryDeliveryStore(), retryQueue: nil,
            logger: testLogger())
        let pipeline = DeliveryPipeline(
            configuration: configuration, consumerProperties: kafka.consumerProperties(group: "push-worker"), producer: producer,
            processor: processor, logger: testLogger())
        let reader = try kafka.reader()
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(services: pipeline.services, logger: testLogger()))
        let running = Task { try await group.run() }
        let messages = await reader.wait(timeout: .seconds(30)) { messages in
            messages.contains { $0.topicPartition.topic == kafka.deadLetterTopic }
                && messages.contains { $0.topicPartition.topic == kafka.outcomesTopic }
        }
        pipeline.stop()
        try await running.value
        producer.close()
        reader.stop()

        let deadLetter = try #require(messages.first { $0.topicPartition.topic == kafka.deadLetterTopic }, "the dead letter never arrived")
        #expect(deadLetter.value.isEmpty)
        #expect(deadLetter.key.map { String(decoding: $0, as: UTF8.self) } == "mallory")
        #expect(deadLetter.header(OutcomePublisher.codeHeader) == "invalid_json")
        #expect(deadLetter.header(OutcomePublisher.sourceHeader) == "push.jobs/0@0")
        #expect(deadLetter.header(OutcomePublisher.truncatedHeader) == String(oversized.count))
        #expect(deadLetter.header("ce_type") == "io.push-worker.dead-letter")
        let probe = try KafkaClusterProbe(properties: kafka.consumerProperties(group: "push-worker"), logger: testLogger())
        let jobs = TopicPartition(topic: kafka.jobsTopic, partition: 0)
        let committed = try await probe.committedOffsets([jobs], timeout: .seconds(10))
        #expect(committed[jobs] == 2, "the partition did not commit past the job whose dead letter was too large")
    }
}
