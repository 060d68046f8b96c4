import Foundation
import ProxyPlugin
import PushCore
import PushHTTP
import PushKafka
import PushSandbox
import ServiceLifecycle
import TestSupport
import Testing
@testable import PushPipeline

/// A pipeline wired to a Kafka fixture and a proxy sandbox, as `push-worker run` wires it.
struct PipelineHarness {
    let kafka: KafkaFixture
    let sandbox: ProxySandboxFixture
    let pipeline: DeliveryPipeline
    let producer: KafkaProducer
    let registry: ProviderRegistry

    let processor: JobProcessor

    init(
        kafka: KafkaFixture, sandbox: ProxySandboxFixture, group: String = "push-worker",
        store: any DeliveryStore = InMemoryDeliveryStore(), retryQueue: (any RetryQueue)? = nil,
        metrics: PipelineMetrics = PipelineMetrics(), configure: (inout PipelineConfiguration) -> Void = { _ in }
    ) throws {
        self.kafka = kafka
        self.sandbox = sandbox
        var configuration = PipelineConfiguration(
            retryPolicy: RetryPolicy(baseMilliseconds: 50, maximumMilliseconds: 200, maximumAttempts: 3),
            shutdownGrace: .seconds(2))
        configuration.consumerGroup = group
        configure(&configuration)
        registry = ProviderRegistry([
            ProxyProvider(
                configuration: ProxyConfiguration(url: sandbox.url, tls: TLSOptions(caFile: sandbox.tls.caFile)),
                transport: TestTransport.make())
        ])
        producer = try kafka.producer()
        processor = JobProcessor(
            registry: registry, configuration: configuration, store: store, retryQueue: retryQueue,
            metrics: metrics, logger: testLogger())
        pipeline = DeliveryPipeline(
            configuration: configuration, consumerProperties: kafka.consumerProperties(group: group),
            producer: producer, processor: processor, logger: testLogger())
    }

    /// Runs the pipeline and its retry scheduler as the worker does; `stop` ends both.
    func start() -> Task<Void, any Error> {
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(services: pipeline.services, logger: testLogger()))
        return Task { try await group.run() }
    }

    func stop(_ running: Task<Void, any Error>) async throws {
        pipeline.stop()
        try await running.value
        producer.close()
        await registry.shutdown()
    }
}

func produce(_ kafka: KafkaFixture, _ jobs: [(key: String, value: [UInt8])]) async throws {
    let producer = try kafka.producer()
    try await producer.send(jobs.map { KafkaRecord(topic: kafka.jobsTopic, key: Array($0.key.utf8), value: $0.value) })
    producer.close()
}

func outcomes(_ messages: [KafkaMessage], topic: String = "push.outcomes") -> [KafkaMessage] {
    messages.filter { $0.topicPartition.topic == topic }
}

@Suite("Pipeline end to end: Kafka in → proxy plugin over HTTP/2 + TLS → Kafka out", .serialized)
struct PipelineTests {
    @Test("a valid job yields exactly one contract-valid outcome per target, keyed by bindingId")
    func oneOutcomePerTarget() async throws {
        let kafka = try KafkaFixture()
        let sandbox = try await ProxySandboxFixture.start()
        let harness = try PipelineHarness(kafka: kafka, sandbox: sandbox)
        try await produce(
            kafka,
            [
                ("alice", jobJSON(id: "j1", kind: "call", targets: [proxyTarget("a1")])),
                ("bob", jobJSON(id: "j2", userId: "bob", targets: [proxyTarget("b1"), proxyTarget("b2")])),
                ("carol", jobJSON(id: "j3", userId: "unknown-carol", targets: [proxyTarget("c1"), proxyTarget("c2"), proxyTarget("c3")])),
            ])
        let reader = try kafka.reader()
        let running = harness.start()
        _ = await reader.wait(timeout: .seconds(30)) { outcomes($0).count >= 6 }
        try await Task.sleep(for: .seconds(1))  // anything extra would show up now
        let published = outcomes(reader.received)
        try await harness.stop(running)
        reader.stop()
        await sandbox.stop()

        #expect(published.count == 6)
        let byBinding = Dictionary(grouping: published, by: { $0.keyString ?? "" })
        #expect(Set(byBinding.keys) == ["a1", "b1", "b2", "c1", "c2", "c3"])
        #expect(byBinding.values.allSatisfy { $0.count == 1 })
        for message in published {
            let outcome = try #require(message.json)
            #expect(outcome["bindingId"] == .string(message.keyString ?? ""))
            let rejected = ["c1", "c2", "c3"].contains(message.keyString ?? "")
            #expect(outcome["status"] == .string(rejected ? "rejected" : "delivered"))
            #expect(outcome["action"] == .string(rejected ? "remove_binding" : "none"))
        }
        let endpointsPerRequest = sandbox.server.requests.map { request -> Int in
            guard case .array(let endpoints)? = (try? JSONParser.parse(request.body))?["endpointData"] else { return 0 }
            return endpoints.count
        }
        #expect(endpointsPerRequest.sorted() == [1, 2, 3], "one proxy request per job, with all of its user's endpoints")
        try await expectSchemaValid(published.map(\.valueString))
    }

    @Test("a malformed job lands in the DLQ with its bytes, key and reason, and the next job still flows")
    func deadLetters() async throws {
        let kafka = try KafkaFixture(partitions: 1)
        let sandbox = try await ProxySandboxFixture.start()
        let harness = try PipelineHarness(kafka: kafka, sandbox: sandbox)
        let broken = Array(#"{"v":1,"id":"x","kind":"call""#.utf8)
        let hostile: [UInt8] = [0xFF, 0x00, 0xFE]
        let version2 = Array(#"{"v":2,"id":"j-v2","kind":"message","userId":"u","targets":[{"bindingId":"m0","provider":"proxy"}]}"#.utf8)
        try await produce(
            kafka,
            [
                ("mallory", broken),
                ("mallory", hostile),
                ("mallory", version2),
                ("alice", jobJSON(id: "after", targets: [proxyTarget("a1")])),
            ])
        let reader = try kafka.reader()
        let running = harness.start()
        let messages = await reader.wait(timeout: .seconds(30)) { $0.count >= 4 }
        try await harness.stop(running)
        reader.stop()
        await sandbox.stop()

        let dead = outcomes(messages, topic: kafka.deadLetterTopic)
        #expect(dead.count == 3)
        #expect(dead.map(\.value) == [broken, hostile, version2])
        #expect(dead.allSatisfy { $0.keyString == "mallory" })
        #expect(dead[0].header(OutcomePublisher.codeHeader) == "invalid_json")
        #expect(dead[0].header(OutcomePublisher.reasonHeader) == "unexpected end of input at byte 29")
        #expect(dead[1].header(OutcomePublisher.codeHeader) == "invalid_json")
        #expect(dead[2].header(OutcomePublisher.codeHeader) == "unsupported_version")
        #expect(dead[0].header(OutcomePublisher.sourceHeader) == "push.jobs/0@0")
        let delivered = outcomes(messages)
        #expect(delivered.count == 1)
        #expect(delivered.first?.json?["jobId"] == .string("after"))
    }

    @Test(
        "outcomes and dead letters carry CloudEvents binary-mode headers (ce_specversion, ce_id, ce_source, ce_type, ce_time, ce_subject); the value stays contract v1"
    )
    func cloudEventHeaders() async throws {
        let kafka = try KafkaFixture(partitions: 1)
        let sandbox = try await ProxySandboxFixture.start()
        let harness = try PipelineHarness(kafka: kafka, sandbox: sandbox, group: "tenant a/push")
        let before = currentTimeMilliseconds()
        try await produce(
            kafka, [("mallory", Array(#"{"v":1"#.utf8)), ("alice", jobJSON(id: "job/1", targets: [proxyTarget("a1"), proxyTarget("a2")]))])
        let reader = try kafka.reader()
        let running = harness.start()
        let messages = await reader.wait(timeout: .seconds(30)) { $0.count >= 3 }
        try await harness.stop(running)
        reader.stop()
        await sandbox.stop()

        let delivered = outcomes(messages).sorted { ($0.keyString ?? "") < ($1.keyString ?? "") }
        #expect(delivered.count == 2)
        for (record, binding) in zip(delivered, ["a1", "a2"]) {
            #expect(record.header("ce_specversion") == "1.0")
            #expect(record.header("ce_id") == "delivered/1/5:job/1/\(binding)")
            #expect(record.header("ce_source") == "/push-worker/tenant%20a%2Fpush")
            #expect(record.header("ce_type") == "io.push-worker.outcome.delivered")
            #expect(record.header("ce_subject") == binding)
            #expect(record.header("content-type") == "application/json")
            guard case .integer(let at)? = record.json?["at"] else {
                Issue.record("the value is no longer the outcome JSON")
                continue
            }
            #expect(record.header("ce_time") == UTCTimestamp.iso8601(millisecondsSinceEpoch: at))
            #expect(record.json?["bindingId"] == .string(binding))
        }
        let dead = outcomes(messages, topic: kafka.deadLetterTopic)
        #expect(dead.count == 1)
        #expect(dead.first?.header("ce_id") == "dead-letter/push.jobs/0@0")
        #expect(dead.first?.header("ce_type") == "io.push-worker.dead-letter")
        #expect(dead.first?.header("ce_source") == "/push-worker/tenant%20a%2Fpush")
        #expect(dead.first?.header("ce_subject") == nil)
        #expect(dead.first?.header("content-type") == nil)
        #expect(dead.first?.header(OutcomePublisher.codeHeader) == "invalid_json")
        let deadAt = dead.first?.header("ce_time") ?? ""
        #expect(deadAt >= UTCTimestamp.iso8601(millisecondsSinceEpoch: before))
    }

    @Test("a job too large for a Kafka message goes to the DLQ truncated, its size in a header, and the next job still flows")
    func oversizedDeadLetter() async throws {
        let kafka = try KafkaFixture(partitions: 1)
        let sandbox = try await ProxySandboxFixture.start()
        let harness = try PipelineHarness(kafka: kafka, sandbox: sandbox)
        // 1.2 MB: above the producer's default message.max.bytes (1,000,000), as in the flood scenario.
        let huge =
            Array(#"{"v":1,"id":"huge","body":""#.utf8) + [UInt8](repeating: UInt8(ascii: "x"), count: 1_200_000) + Array(#""}"#.utf8)
        let bigProducer = try KafkaProducer(
            properties: KafkaProducer.defaultProperties(bootstrapServers: kafka.cluster.bootstrapServers)
                .merging(["message.max.bytes": "4000000"]) { $1 }, logger: testLogger())
        try await bigProducer.send([
            KafkaRecord(topic: kafka.jobsTopic, key: Array("mallory".utf8), value: huge),
            KafkaRecord(
                topic: kafka.jobsTopic, key: Array("alice".utf8),
                value: jobJSON(id: "after-huge", targets: [proxyTarget("a1")])),
        ])
        bigProducer.close()
        let reader = try kafka.reader()
        let running = harness.start()
        let messages = await reader.wait(timeout: .seconds(30)) { $0.count >= 2 }
        try await harness.stop(running)
        reader.stop()
        await sandbox.stop()

        let dead = outcomes(messages, topic: kafka.deadLetterTopic)
        #expect(dead.count == 1)
        #expect(dead.first?.header(OutcomePublisher.codeHeader) == "too_large")
        #expect(dead.first?.header(OutcomePublisher.truncatedHeader) == String(huge.count))
        #expect(dead.first?.value.count == OutcomePublisher.maximumDeadLetterBytes)
        #expect(dead.first.map { $0.value[...] == huge.prefix(OutcomePublisher.maximumDeadLetterBytes) } == true)
        #expect(outcomes(messages).first?.json?["jobId"] == .string("after-huge"))
    }

    @Test("an offset is not committed before its outcome is acknowledged: a restarted worker sees the job again")
    func noCommitBeforeAcknowledgement() async throws {
        let kafka = try KafkaFixture(partitions: 1)
        let sandbox = try await ProxySandboxFixture.start()
        try await produce(kafka, [("alice", jobJSON(id: "unacked", targets: [proxyTarget("a1")]))])
        kafka.cluster.failNextProduceRequests(100_000)  // retriable errors until cleared: no outcome is acknowledged

        let first = try PipelineHarness(kafka: kafka, sandbox: sandbox) {
            $0.shutdownGrace = .zero
            $0.revocationGrace = .zero
        }
        let firstRun = first.start()
        try await waitUntil(timeout: .seconds(20)) { sandbox.server.requests.count >= 1 }
        try await Task.sleep(for: .milliseconds(500))
        first.pipeline.stop()
        try await firstRun.value
        // The stopped worker's producer may still publish its outcome now; the offset stays uncommitted.
        kafka.cluster.clearRequestErrors(apiKey: 0)
        first.producer.close()
        await first.registry.shutdown()

        let reader = try kafka.reader()
        let second = try PipelineHarness(kafka: kafka, sandbox: sandbox)
        let secondRun = second.start()
        try await waitUntil(timeout: .seconds(40)) { sandbox.server.requests.count >= 2 }
        _ = await reader.wait(timeout: .seconds(30)) { outcomes($0).count >= 1 }
        try await second.stop(secondRun)
        reader.stop()
        await sandbox.stop()

        #expect(sandbox.server.requests.count == 2, "the second worker must be handed the unacknowledged job again")
        #expect(outcomes(reader.received).allSatisfy { $0.json?["jobId"] == .string("unacked") })
        #expect(!outcomes(reader.received).isEmpty)
    }

    @Test("at the in-flight limit no more jobs start, the consumer takes jobs only up to its read-ahead bound, then finishes everything")
    func backPressure() async throws {
        let kafka = try KafkaFixture(partitions: 1)
        let sandbox = try await ProxySandboxFixture.start()
        let harness = try PipelineHarness(kafka: kafka, sandbox: sandbox) {
            $0.maximumInFlightJobs = 3
            $0.maximumReadAheadJobs = 6
        }
        try await produce(
            kafka, (0..<9).map { ("user-\($0)", jobJSON(id: "slow-\($0)", userId: "slow-\($0)", targets: [proxyTarget("s\($0)")])) })
        let reader = try kafka.reader()
        let running = harness.start()
        var (highest, highestStarted) = (0, 0)
        let deadline = ContinuousClock.now + .seconds(40)
        while outcomes(reader.received).count < 9, ContinuousClock.now < deadline {
            highest = max(highest, harness.pipeline.inFlightJobs)
            highestStarted = max(highestStarted, harness.pipeline.startedJobs)
            try await Task.sleep(for: .milliseconds(20))
        }
        try await harness.stop(running)
        reader.stop()
        await sandbox.stop()

        #expect(highestStarted <= 3, "never more than the limit in flight")
        #expect(highestStarted >= 2, "the limit was actually reached")
        #expect(highest <= 6, "never more consumed than the read-ahead bound (twice the limit here)")
        #expect(outcomes(reader.received).count == 9)
    }

    @Test("one user's jobs are delivered in Kafka order: the second waits for the slow first")
    func perKeyOrder() async throws {
        let kafka = try KafkaFixture(partitions: 1)
        let sandbox = try await ProxySandboxFixture.start()
        let harness = try PipelineHarness(kafka: kafka, sandbox: sandbox)
        try await produce(
            kafka,
            [
                ("user-k", jobJSON(id: "first", kind: "call", userId: "slow-k", targets: [proxyTarget("k1")])),
                ("user-k", jobJSON(id: "second", kind: "cancel", userId: "k", targets: [proxyTarget("k1")])),
                ("other", jobJSON(id: "unrelated", userId: "o", targets: [proxyTarget("o1")])),
            ])
        let reader = try kafka.reader()
        let running = harness.start()
        _ = await reader.wait(timeout: .seconds(30)) { outcomes($0).count >= 3 }
        try await harness.stop(running)
        reader.stop()
        await sandbox.stop()

        let requests = sandbox.server.requests
        #expect(requests.count == 3)
        let userOf = { (request: SandboxRequest) -> String in
            guard case .string(let user)? = (try? JSONParser.parse(request.body))?["userId"] else { return "" }
            return user
        }
        let first = try #require(requests.first { userOf($0) == "slow-k" })
        let second = try #require(requests.first { userOf($0) == "k" })
        let unrelated = try #require(requests.first { userOf($0) == "o" })
        #expect(second.receivedAt - first.receivedAt >= .milliseconds(1900), "the cancel went out before the call was answered")
        #expect(unrelated.receivedAt - first.receivedAt < .seconds(1), "other users do not wait")
    }

    @Test("a retryable failure is retried within the attempt budget and then reported failed with the last error")
    func retriesThenFails() async throws {
        let kafka = try KafkaFixture(partitions: 1)
        let sandbox = try await ProxySandboxFixture.start()
        let harness = try PipelineHarness(kafka: kafka, sandbox: sandbox)
        try await produce(kafka, [("f", jobJSON(id: "flaky", userId: "flaky-f", targets: [proxyTarget("f1")]))])
        let reader = try kafka.reader()
        let running = harness.start()
        let messages = await reader.wait(timeout: .seconds(30)) { outcomes($0).count >= 1 }
        try await harness.stop(running)
        reader.stop()
        await sandbox.stop()

        let outcome = try #require(outcomes(messages).first?.json)
        #expect(outcome["status"] == .string("failed"))
        #expect(outcome["attempts"] == .integer(3))
        #expect(outcome["httpStatus"] == .integer(500))
        #expect(outcome["reason"] == .string("3 attempts exhausted (last error: proxy answered 500)"))
        #expect(sandbox.server.requests.count == 3)
    }
}

func waitUntil(timeout: Duration, _ condition: () -> Bool) async throws {
    let deadline = ContinuousClock.now + timeout
    while !condition() {
        guard ContinuousClock.now < deadline else {
            Issue.record("condition not met within \(timeout)")
            return
        }
        try await Task.sleep(for: .milliseconds(50))
    }
}

/// Validates outcome documents against docs/outcome.schema.json with an independent validator.
func expectSchemaValid(_ documents: [String]) async throws {
    let check = try await runSchemaCheck(["outcome", "-"], input: documents.joined(separator: "\n"))
    #expect(check.status == 0, "\(check.output)")
}
